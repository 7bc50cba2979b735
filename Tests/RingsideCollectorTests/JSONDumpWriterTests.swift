import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import RingsideCollector
import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

/// A dump writer of `folder/latest.json`.
private func makeDumper(_ folder: String, log: CapturedLog) throws -> JSONDumpWriter {
    JSONDumpWriter(
        path: folder + "/latest.json", directory: try LogDirectory(path: folder), intervalNanos: 1_000_000_000,
        log: log.log)
}

/// The names in `folder` that are temporary dumps (`latest.json.tmp.*`).
private func temporaries(_ folder: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix("latest.json.tmp.") }
}

@Suite("--json-dump's writer")
struct JSONDumpWriterTests {
    @Test("the document replaces a dump of ours at PATH, through a temporary file that is gone after")
    func replaces() throws {
        try withLogTestDirectory { folder in
            let path = folder + "/latest.json"
            try "an older dump\n".write(toFile: path, atomically: false, encoding: .utf8)
            let captured = CapturedLog()
            var dumper = try makeDumper(folder, log: captured)
            dumper.write(Snapshot())
            #expect(try jsonObject(#require(fileText(path)))["collector"] != nil)
            #expect(try temporaries(folder).isEmpty && captured.all.isEmpty)
        }
    }

    @Test("a link, a FIFO or a directory at PATH is refused, said once, and left alone; the dump resumes once it is gone")
    func refusesWhatIsNotOurs() throws {
        try withLogTestDirectory { folder in
            let path = folder + "/latest.json"
            let target = try LinkTarget(in: folder)
            let captured = CapturedLog()
            var dumper = try makeDumper(folder, log: captured)
            #expect(symlink(target.path, path) == 0)
            dumper.write(Snapshot())
            dumper.write(Snapshot())
            #expect(captured.all.count == 1)
            #expect(captured.contains("cannot write the JSON dump: \(path) is a symbolic link, not a regular file of the collector's"))
            #expect(target.isUnchanged && entryKind(path) == S_IFLNK)
            try FileManager.default.removeItem(atPath: path)
            #expect(mkfifo(path, 0o644) == 0)
            expectNoBlock(on: path) { dumper.write(Snapshot()) }
            #expect(captured.contains("\(path) is a FIFO (named pipe)") && entryKind(path) == S_IFIFO)
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            dumper.write(Snapshot())
            #expect(captured.contains("\(path) is a directory") && entryKind(path) == S_IFDIR)
            #expect(try temporaries(folder).isEmpty, "each refused dump's temporary file is removed")
            try FileManager.default.removeItem(atPath: path)
            dumper.write(Snapshot())
            #expect(captured.all.count == 4 && captured.contains("the JSON dump \(path) is written again"))
            #expect(entryKind(path) == S_IFREG && target.isUnchanged)
        }
    }

    @Test("a link planted at the old, predictable temporary name (PATH.tmp.PID) is neither followed nor in the way")
    func plantedTemporary() throws {
        try withLogTestDirectory { folder in
            let path = folder + "/latest.json"
            let target = try LinkTarget(in: folder)
            #expect(symlink(target.path, path + ".tmp.\(getpid())") == 0)
            let captured = CapturedLog()
            var dumper = try makeDumper(folder, log: captured)
            dumper.write(Snapshot())
            #expect(captured.all.isEmpty && entryKind(path) == S_IFREG && target.isUnchanged)
        }
    }
}
