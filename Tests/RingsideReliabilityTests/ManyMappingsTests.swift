import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

extension ReliabilityTests {
    /// The SIGBUS guard takes every mapping, however many: a collector with more than 4,096
    /// mapped ranges (once the guard's whole table) survives a truncation of the last one.
    @Suite("more mapped ranges than the guard's first table")
    struct ManyMappingsTests {
        /// 64 live bots of 64 lanes each (4,160 ranges with their headers), then the last one cut
        /// to one page: the collector used to die of SIGBUS in its lane watch; now it lets that
        /// ring go with a reason and goes on serving.
        @Test("64 bots of 64 lanes, the last truncated to 4096 bytes: the collector survives and says why")
        func truncationPastTheFirstTable() throws {
            try withRingDirectory { directory in
                // One file of 64 lanes, made by a real producer (64 threads, a lane each) ...
                let made = try runTestProducer(
                    "lanes", ring: "model", in: directory, ["--threads", "64", "--count", "1", "--capacity", "16"])
                try #require(made.status == 0 && made.output.contains("lanes 64"), "\(made.output) \(made.errors)")
                let model = try Data(contentsOf: URL(fileURLWithPath: directory.filePath(for: "model")))
                try directory.remove("model")
                // ... copied 64 times, each held live by the producer lock this test takes on it.
                let names = (0..<64).map { String(format: "wide-%02d", $0) }
                var held: [Int32] = []
                defer { for fd in held { close(fd) } }
                for name in names {
                    let path = directory.filePath(for: name)
                    try model.write(to: URL(fileURLWithPath: path))
                    let fd = open(path, O_RDWR | O_CLOEXEC)
                    try #require(fd >= 0 && rs_lock_byte(fd, RS_LOCK_BYTE_PRODUCER) == 0, "cannot lock \(path)")
                    held.append(fd)
                }
                let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "10ms"])
                defer { collector.kill() }
                let attached = eventually(seconds: 30) { () -> Bool? in
                    guard let latest = try? httpGet(port: port, path: "/latest"), latest.status == 200,
                        let rings = (try? jsonObject(latest.body))?["rings"] as? [[String: Any]]
                    else { return nil }
                    let wide = rings.filter { ($0["lanes"] as? [Any])?.count == 64 && $0["state"] as? String == "live" }
                    return wide.count == 64 ? true : nil
                }
                try #require(attached == true, "the collector did not map 64 lanes of each of the 64 bots")
                // 64 x 64 lanes and 64 headers: 4,160 ranges registered with the guard (the kernel
                // merges neighbouring ranges of a file in /proc/PID/maps, so that shows fewer).

                try truncateFile(directory.filePath(for: names.last!), to: 4096)
                let problem = eventually { skippedProblem(port, names.last!) }
                #expect(problem?.contains("truncated") == true, "\(problem ?? "not let go")")
                // Alive and serving, the others still live.
                let health = try httpGet(port: port, path: "/health")
                #expect(health.status == 200, "\(health.body)")
                #expect(kill(collector.pid, 0) == 0, "the collector died")
                let others = eventually { () -> Bool? in
                    guard let latest = try? jsonObject(try httpGet(port: port, path: "/latest").body),
                        let rings = latest["rings"] as? [[String: Any]]
                    else { return nil }
                    let live = rings.filter { $0["state"] as? String == "live" }.compactMap { $0["name"] as? String }
                    return live == Array(names.dropLast()) ? true : nil
                }
                #expect(others == true, "the other 63 bots are not all live")
            }
        }
    }
}
