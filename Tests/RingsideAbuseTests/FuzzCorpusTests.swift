import Foundation
import RingsideTestSupport
import Testing

/// The fuzz targets' corpora (`Tests/fixtures/fuzz/TARGET/`: seeds made by the real writers, and
/// every input fuzzing found a crash, a hang or a broken check with, kept as a regression), replayed
/// through the usual build of `ringside-fuzz`: each target's parser must take every one of them.
/// `.ci/fuzz` searches for new ones with libFuzzer.
@Suite("Fuzz corpora: every seed and regression of every target replays without a finding")
struct FuzzCorpusTests {
    static let corpus = packageRoot + "/Tests/fixtures/fuzz"
    static let targets = ((try? FileManager.default.contentsOfDirectory(atPath: corpus)) ?? []).filter { !$0.hasPrefix(".") }.sorted()

    @Test("every target has a corpus, and every corpus a target")
    func everyTargetHasACorpus() throws {
        let run = try runProcess("ringside-fuzz", ["--list"])
        #expect(run.status == 0, "\(run.errors)")
        let listed = run.outputLines.compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(!listed.isEmpty)
        #expect(listed.sorted() == Self.targets, "ringside-fuzz --list names \(listed); Tests/fixtures/fuzz holds \(Self.targets)")
        for target in Self.targets {
            let inputs = try FileManager.default.contentsOfDirectory(atPath: "\(Self.corpus)/\(target)")
            #expect(!inputs.isEmpty, "\(target)'s corpus is empty")
        }
    }

    @Test("a target's corpus replays", arguments: targets)
    func replay(target: String) throws {
        let run = try runProcess("ringside-fuzz", [target, "\(Self.corpus)/\(target)"], timeoutSeconds: 600)
        let last = run.errorLines.last { $0.hasPrefix("replaying ") } ?? "no input"
        #expect(
            run.status == 0,
            "\(target) \(run.status == nil ? "crashed or hung" : "exited \(run.status!)") on \(last): \(run.errorLines.suffix(5))")
        #expect(run.output.contains("\(target): ") && run.output.contains(" inputs, no finding"), "\(run.output)")
    }
}
