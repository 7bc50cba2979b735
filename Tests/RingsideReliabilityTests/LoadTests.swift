import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

extension ReliabilityTests {
    @Suite("load")
    struct LoadTests {
        /// Eight producer processes record at full speed, each into a ring of its own, for 10 s
        /// (60 s with `RINGSIDE_LONG_TESTS=1`), into the real `ringside-collector`.
        ///
        /// Drops are counted exactly: per ring, the producer's own count of calls equals what the
        /// ring's counters say was written plus dropped, and the collector reports the same
        /// written and dropped and, once the producers stop, has drained every written record.
        /// Memory stays flat: the collector's VmRSS and RssAnon (from /proc) are measured 2 s in,
        /// when every ring page has been touched and every series exists, and at the end; the
        /// anonymous memory may not grow by more than 50 % + 16 MiB (a generous bound: a leak of a
        /// few bytes a record would add gigabytes). The producers run at nice 10 so that the suites
        /// running beside this one keep their CPU: they still write as fast as they are scheduled.
        @Test("eight producers at full speed into one collector: no crash, drops counted exactly, RSS flat")
        func eightProducersAtFullSpeed() throws {
            let seconds = longTests ? 60.0 : 10.0
            try withRingDirectory { directory in
                let dump = directory.path + "/load.json"
                let collector = try startCollectorProcess([
                    "--dir", directory.path, "--json-dump", dump, "--dump-interval", "100ms",
                ])
                let names = (0..<8).map { "load-\($0)" }
                let producers = try names.map { try startBlast(directory, ring: $0, seconds: seconds, capacity: 65536, nice: 10) }
                let started = Date()
                usleep(2_000_000)
                let rssStart = try #require(residentKiB(of: collector.pid))
                let cpuStart = cpuSeconds(of: collector.pid) ?? 0

                var results: [String: BlastCounts] = [:]
                for (name, producer) in zip(names, producers) {
                    let line = producer.readLine()
                    let exit = producer.waitForExit()
                    #expect(exit.status == 0, "\(name): \(exit.standardError)")
                    let counts = BlastCounts(line)
                    #expect(counts != nil, "\(name) printed \(line ?? "nothing")")
                    results[name] = counts
                }
                let elapsed = Date().timeIntervalSince(started)
                let rssEnd = try #require(residentKiB(of: collector.pid), "the collector is gone")
                let cpuEnd = cpuSeconds(of: collector.pid) ?? 0

                // The collector drains everything that was written, and reports the rings' counts.
                let document = eventually(seconds: 20) { () -> [String: Any]? in
                    let document = readJSON(dump)
                    return names.allSatisfy { name in
                        let ring = ringEntry(document, name)
                        return uint(ring?["drained_total"]) == results[name]?.written && uint(ring?["backlog"]) == 0
                    } ? document : nil
                }
                #expect(document != nil, "the collector did not drain every ring")
                var attempts: UInt64 = 0, written: UInt64 = 0, dropped: UInt64 = 0
                for name in names {
                    let counts = try #require(results[name])
                    let ring = try RingInspector(name, directory: directory).status()
                    #expect(counts.attempts == counts.written + counts.dropped, "\(name): attempts == written + dropped")
                    #expect(ring.writeCursor == counts.written && ring.dropped == counts.dropped, "\(name): the ring's counters")
                    let reported = ringEntry(document, name)
                    #expect(uint(reported?["records_total"]) == counts.written && uint(reported?["dropped_total"]) == counts.dropped
                            && uint(reported?["rejected_total"]) == 0, "\(name): the collector's counts")
                    attempts += counts.attempts
                    written += counts.written
                    dropped += counts.dropped
                }
                #expect(rssEnd.anonymous <= rssStart.anonymous * 3 / 2 + 16 * 1024,
                        "the collector's anonymous memory grew from \(rssStart.anonymous) KiB to \(rssEnd.anonymous) KiB")
                collector.send(SIGTERM)
                #expect(collector.waitForExit().status == 0)
                func millions(_ value: UInt64) -> String { String(format: "%.1f M", Double(value) / 1e6) }
                print("load: 8 producers x \(Int(seconds)) s: \(millions(attempts)) attempts = \(millions(written)) written "
                    + "+ \(millions(dropped)) dropped, all written drained; collector VmRSS \(rssStart.total / 1024) -> "
                    + "\(rssEnd.total / 1024) MiB, RssAnon \(rssStart.anonymous / 1024) -> \(rssEnd.anonymous / 1024) MiB, "
                    + String(format: "CPU %.0f %% of a core over %.0f s", (cpuEnd - cpuStart) / max(0.1, elapsed - 2) * 100, elapsed - 2))
            }
        }
    }
}
