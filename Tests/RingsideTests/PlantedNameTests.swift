import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import Ringside
import RingsideTestSupport
import Testing

// Another user may take a bot's name in a shared directory (/dev/shm is everyone's, sticky): a
// FIFO there would hold an open for reading until a writer came, a device or a directory is no
// bot file. The producer runs in a child with a deadline: one that waited would be killed, and fail.
@Suite("Bot.attach: what another user planted at a bot's name never makes it wait")
struct PlantedNameTests {
    /// What `Bot.attach` says of `file` at `path`: what it is, whose, and what to do.
    private static func reason(_ file: PlantedFile) -> String {
        "\(file.kind) owned by uid \(PlantedFile.owner), not a regular file of uid \(geteuid()); "
            + "a bot opens only regular files of its own user (have it removed, or attach another name)"
    }

    @Test(
        "nobody's FIFO, device, directory or socket at the bot's name: attach fails at once, naming the file, what it is and its owner; the file is left alone",
        arguments: PlantedFile.allCases)
    func atTheBotsName(file: PlantedFile) throws {
        try withPlantedRing(file, named: "taken", purpose: "planting files as user nobody at a bot's name") { directory, path in
            let run = try runProcess(
                "ringside-test-producer", ["sequence", "--dir", directory.path, "--ring", "taken", "--count", "1"], timeoutSeconds: 20)
            #expect(run.status == 2, "the producer hung (killed at the deadline) or attached: \(run.output) \(run.errors)")
            #expect(run.errors == "ringside-test-producer: ring taken: \(path): \(Self.reason(file))\n")
            #expect(isStillPlanted(file, at: path))
            // The typed error, in this process: the child showed that the attach returns.
            #expect(throws: RingError.notARegularFile(ring: "taken", path: path, reason: Self.reason(file))) {
                try Bot.attach("taken", directory: directory.path)
            }
            #expect(directory.ringNames() == ["taken"], "nothing else made")
        }
    }

    @Test(
        "a worker of a bot whose name holds nobody's FIFO registers and writes its own file: reading the bot's file for the operator's switches never waits on the FIFO"
    )
    func workerBesideAFIFO() throws {
        try withPlantedRing(.fifo, named: "pooled", purpose: "planting a FIFO as user nobody at a bot's name") { directory, path in
            let run = try runProcess(
                "ringside-test-producer", ["worker", "--dir", directory.path, "--ring", "pooled", "--add", "5"], timeoutSeconds: 20)
            try #require(run.status == 0, "the worker hung (killed at the deadline) or failed: \(run.output) \(run.errors)")
            let pid = try #require(
                run.output.split(separator: " ").last.flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
            let inspector = try RingInspector("pooled@\(pid)", directory: directory)
            let total = try #require(try inspector.metrics().first { $0.name == "worker_total" })
            #expect(try inspector.cells(of: total).total == 5)
            #expect(isStillPlanted(.fifo, at: path))
        }
    }
}
