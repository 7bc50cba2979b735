import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

// The operator's tools open paths in a shared ring directory and paths given on their command
// line: another user's FIFO, device, directory or socket there is refused at once, said as what
// it is and whose, and never waited on. Each tool runs with a deadline: one that waited would be
// killed, and fail.
@Suite("ringside-dump and ringside-emit never wait on what another user planted")
struct PlantedPathTests {
    @Test(
        "nobody's FIFO, device, directory or socket at a ring's name: ringside-dump info, records and check and ringside-emit refuse it at once, naming what it is and its owner",
        arguments: PlantedFile.allCases)
    func atARingsName(file: PlantedFile) throws {
        try withPlantedRing(file, named: "taken", purpose: "planting files as user nobody in the ring directory") { directory, path in
            let said = "\(path): \(file.kind) owned by uid \(PlantedFile.owner), not a regular file"
            for command in [["info", "taken"], ["records", "taken"], ["check", "taken"]] {
                let run = try runProcess("ringside-dump", command + ["--dir", directory.path], timeoutSeconds: 20)
                #expect(
                    run.status == 1 && (run.output + run.errors).contains(said), "ringside-dump \(command): \(run.output) \(run.errors)")
            }
            let emit = try runProcess(
                "ringside-emit", ["--ring", "taken", "--dir", directory.path, "m", "1"], timeoutSeconds: 20)
            #expect(emit.status == 1 && emit.errors.contains(said), "ringside-emit: \(emit.errors)")
            #expect(isStillPlanted(file, at: path))
        }
    }

    @Test("ringside-dump capture's --password-file at nobody's FIFO is refused at once, said as a FIFO and whose, before any request")
    func passwordFileFIFO() throws {
        guard try requiredRoot("planting a FIFO as user nobody") else { return }
        let files = try TemporaryDirectory("ringside-password-fifo")
        defer { files.remove() }
        try #require(chmod(files.path, 0o1777) == 0, "shared, as /tmp is")
        let fifo = files.path + "/password"
        guard try plantAsNobody(.fifo, at: fifo) else { return }
        // Port 1: nothing is asked of it; the file is refused first.
        let run = try runProcess(
            "ringside-dump", ["capture", "--collector", "127.0.0.1:1", "--user", "ops", "--password-file", fifo], timeoutSeconds: 20)
        #expect(run.status == 1, "hung (killed at the deadline), or went on: \(run.output) \(run.errors)")
        #expect(
            run.errors == "ringside-dump capture: --password-file \(fifo): a FIFO (named pipe) owned by uid 65534, not a regular file\n",
            "\(run.errors)")
    }
}
