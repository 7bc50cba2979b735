import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

// A C bot's forked worker against what another user planted where it will look
// (Tests/fixtures/c_planted.c): its own worker name, or the path of the parent's file. The
// fixture's processes end by SIGALRM rather than wait: a child that waited is "signal 14".
@Suite("a C bot's forked worker never waits on what another user planted (Tests/fixtures/c_planted.c)")
struct PlantedFileTests {
    /// One run of the fixture: it forks, the test plants `file` where `plantedAt` says (given the
    /// child's pid) while the child waits, then the child makes its first call.
    private struct Run {
        let child: Int32
        let lines: [String]
        let errors: String
    }

    private static func run(
        _ executable: String, _ directory: RingDirectory, _ where: String, _ file: PlantedFile, plantedAt: (Int32) -> String
    ) throws -> Run? {
        let process = try ChildProcess(executable, [directory.path, "pb", `where`], withInput: true)
        let first = try #require(process.readLine(), "the fixture did not fork")
        let child = try #require(Int32(first.dropFirst("child ".count)), "\(first)")
        guard try plantAsNobody(file, at: plantedAt(child)) else { return nil }
        process.write("go\n")
        var lines: [String] = []
        while let line = process.readLine() { lines.append(line) }
        let exit = process.waitForExit()
        #expect(exit.status == 0, "\(lines) \(exit.standardError)")
        return Run(child: child, lines: lines, errors: exit.standardError)
    }

    /// Builds the fixture, then calls `body` with it, a fresh shared ring directory and each kind
    /// of file in turn; returns at once where the fixture or root is missing (outside CI).
    private static func forEachPlantedFile(_ body: (String, RingDirectory, PlantedFile) throws -> Void) throws {
        guard try requiredRoot("planting files as user nobody") else { return }
        let build = try TemporaryDirectory("ringside-kit-planted")
        defer { build.remove() }
        guard let executable = try buildCProducer("c", fixture: "c_planted", into: build) else { return }
        for file in PlantedFile.allCases {
            try withSharedRingDirectory { try body(executable, $0, file) }
        }
    }

    @Test(
        "nobody's FIFO, device, directory or socket at the forked worker's own name: it takes a fresh name of its user's (<bot>@<pid>.<n>) and writes there"
    )
    func atTheWorkersName() throws {
        try Self.forEachPlantedFile { executable, directory, file in
            guard let run = try Self.run(executable, directory, "worker", file, plantedAt: { directory.filePath(for: "pb@\($0)") })
            else {
                return
            }
            #expect(run.lines.last == "child \(run.child) exit 0", "\(file): \(run.lines) \(run.errors)")
            let written = try #require(run.lines.first { $0.hasPrefix("worker ") }, "\(file): \(run.lines)")
            let worker = String(written.dropFirst("worker ".count).dropFirst(directory.path.count + "/ringside.".count))
            #expect(worker.hasPrefix("pb@\(run.child).") && WorkerRing(worker)?.suffix != nil, "\(file): \(written)")
            var info = stat()
            #expect(lstat(directory.filePath(for: worker), &info) == 0 && info.st_uid == geteuid() && info.st_mode & S_IFMT == S_IFREG)
            let inspector = try RingInspector(worker, directory: directory)
            let increments = try #require(try inspector.metrics().first { $0.name == "planted_increments" })
            #expect(try inspector.cells(of: increments).total == 1, "\(file): the child's call, in its file")
            #expect(isStillPlanted(file, at: directory.filePath(for: "pb@\(run.child)")), "\(file)")
        }
    }

    @Test(
        "nobody's FIFO, device, directory or socket where the parent's file was: the child's first call returns, it writes nothing and says why once on stderr"
    )
    func atTheParentsPath() throws {
        try Self.forEachPlantedFile { executable, directory, file in
            let path = directory.filePath(for: "pb")
            guard let run = try Self.run(executable, directory, "parent", file, plantedAt: { _ in path }) else { return }
            // Exit 3: its first call returned, and the bot writes nothing in it (not signal 14: it never waited).
            #expect(run.lines == ["child \(run.child) exit 3"], "\(file): \(run.lines) \(run.errors)")
            #expect(
                run.errors == "ringside: bot pb: this forked child (pid \(run.child)) writes nothing: \(path) is no longer the "
                    + "file the parent attached: its registry is gone (it is now \(file.kind) owned by uid \(PlantedFile.owner))\n",
                "\(file): \(run.errors)")
            #expect(directory.ringNames() == ["pb"] && isStillPlanted(file, at: path), "\(file): nothing else made")
        }
    }
}
