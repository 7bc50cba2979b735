import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

@Suite("ringside-dump postmortem: files and bad input")
struct PostmortemCommandTests {
    @Test("a dead bot's file, named or by its path: the trace, protobuf and log written, none left half-written")
    func namedOrByPath() throws {
        let out = try TemporaryDirectory("ringside-postmortem-out")
        defer { out.remove() }
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "seq", count: 50, start: 1)
            let byName = try dump(directory, "postmortem", "seq", "--out", out.path)
            #expect(byName.status == 0, "\(byName.output)\(byName.errors)")
            #expect(byName.output.contains("trace: 0 slices, 50 counter samples"), "a histogram of no time unit: \(byName.output)")
            let files = try FileManager.default.contentsOfDirectory(atPath: out.path).sorted()
            #expect(files == ["seq-postmortem.hlog", "seq-postmortem.pftrace", "seq-postmortem.trace.json"])
            let first = try String(contentsOfFile: out.path + "/seq-postmortem.trace.json", encoding: .utf8)
            // By the file's path (--dir unused), into the same place: the files replaced whole.
            let byPath = try runProcess("ringside-dump", ["postmortem", directory.path + "/ringside.seq", "--out", out.path + "/"])
            #expect(byPath.status == 0, "\(byPath.output)\(byPath.errors)")
            #expect(try String(contentsOfFile: out.path + "/seq-postmortem.trace.json", encoding: .utf8) == first)
            #expect(try FileManager.default.contentsOfDirectory(atPath: out.path).sorted() == files)
            // --json: the same facts for scripts.
            let json = try dump(directory, "postmortem", "seq", "--out", out.path, "--json").json()
            #expect(json.object("trace")?.int("counter_samples") == 50 && json.object("trace")?.int("slices") == 0)
            let file = try #require(json.objects("files").first)
            #expect(file.string("ring") == "seq" && file.object("producer")?.bool("alive") == false)
            #expect(file.objects("lanes").map { $0.int("records") } == [50])
            #expect(json.objects("wrote").compactMap { $0.string("path") }.map { ($0 as NSString).lastPathComponent }.sorted() == files)
        }
    }

    @Test("no such bot, a file that is no ring, a path of another name, a missing --out directory: clear errors, nothing written")
    func badInput() throws {
        let out = try TemporaryDirectory("ringside-postmortem-out")
        defer { out.remove() }
        try withRingDirectory { directory in
            let missing = try dump(directory, "postmortem", "nosuch", "--out", out.path)
            #expect(missing.status == 1 && missing.errors.contains("nosuch"), "\(missing.errors)")

            let garbage = directory.path + "/ringside.junk"
            try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: garbage))
            let corrupt = try dump(directory, "postmortem", "junk", "--out", out.path)
            #expect(corrupt.status == 1 && corrupt.errors.contains("junk"), "\(corrupt.errors)")

            let notRing = try runProcess("ringside-dump", ["postmortem", out.path + "/trace.json", "--out", out.path])
            #expect(notRing.status == 1 && notRing.errors.contains("not a ring file"), "\(notRing.errors)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: out.path).isEmpty)

            try makeSequenceRing(directory, "seq", count: 5)
            let noDirectory = try dump(directory, "postmortem", "seq", "--out", out.path + "/absent")
            #expect(noDirectory.status == 1 && noDirectory.errors.contains("cannot write"), "\(noDirectory.errors)")

            let usage = try dump(directory, "postmortem")
            #expect(usage.status == 2 && usage.errors.contains("which bot?"), "\(usage.errors)")
        }
    }

    @Test("a live bot is refused (its lanes change as they are read); --live reads it anyway")
    func liveBot() throws {
        let out = try TemporaryDirectory("ringside-postmortem-out")
        defer { out.remove() }
        try withRingDirectory { directory in
            let holder = try holdRing(directory, "held", count: 20)
            defer { holder.kill() }
            let refused = try dump(directory, "postmortem", "held", "--out", out.path)
            #expect(refused.status == 1 && refused.errors.contains("is alive") && refused.errors.contains("--live"), "\(refused.errors)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: out.path).isEmpty)
            let live = try dump(directory, "postmortem", "held", "--live", "--out", out.path)
            #expect(live.status == 0 && live.output.contains("alive"), "\(live.output)\(live.errors)")
        }
    }
}
