import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Synchronization
import Testing

/// A bot file held by the test as a hostile producer would hold it: its producer lock taken (so
/// the collector sees a live bot) and lane 0 mapped, to write records and move the write cursor.
private final class HostileLane: @unchecked Sendable {
    let fd: Int32
    let base: UnsafeMutableRawPointer
    let size: Int
    let capacity: UInt64
    private let records: UnsafeMutablePointer<rs_record>
    private let writeCursor: UnsafeMutablePointer<UInt64>
    private let readCursor: UnsafeMutablePointer<UInt64>
    /// A valid record of metric 0 (a histogram), as the real producer wrote it.
    private let template: rs_record

    init(path: String) throws {
        fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0, rs_lock_byte(fd, RS_LOCK_BYTE_PRODUCER) == 0 else { throw TestSupportError("cannot hold \(path)") }
        var info = stat()
        fstat(fd, &info)
        size = Int(info.st_size)
        guard let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), mapped != MAP_FAILED else {
            throw TestSupportError("mmap \(path): errno \(errno)")
        }
        base = mapped
        let header = base.load(as: rs_header.self)
        capacity = UInt64(1) << UInt64(header.capacity_log2)
        let lane = base + Int(header.lanes_offset)
        writeCursor = (lane + laneHeaderOffset(\.write_cursor)).assumingMemoryBound(to: UInt64.self)
        readCursor = (lane + laneHeaderOffset(\.read_cursor)).assumingMemoryBound(to: UInt64.self)
        records = (lane + Int(header.lane_records_offset)).assumingMemoryBound(to: rs_record.self)
        template = records[0]
    }

    deinit {
        munmap(base, size)
        close(fd)  // and the producer lock with it
    }

    var read: UInt64 { rs_load_acquire_u64(readCursor) }

    /// Fills the free slots, one valid record in `validEvery`, the rest naming no cursor they
    /// sit at (invalid), and publishes them; returns how many were valid.
    func fill(validEvery: UInt64) -> Int {
        let write = rs_load_relaxed_u64(writeCursor), end = read + capacity
        guard write < end else { return 0 }
        var valid = 0
        for cursor in write..<end {
            var record = template
            record.timestamp_ns = rs_clock_coarse_ns()
            record.sequence = cursor % validEvery == 0 ? cursor : cursor ^ (1 << 40)
            if record.sequence == cursor { valid += 1 }
            records[Int(cursor & (capacity - 1))] = record
        }
        rs_store_release_u64(writeCursor, end)  // release: the records above first
        return valid
    }

    /// Pushes the write cursor `count` past the read cursor, over records never written.
    func push(_ count: UInt64) {
        rs_store_release_u64(writeCursor, read + count)
    }
}

/// The ways a hostile producer slipped past the quarantine's first rule (judged per pass, 90 %
/// invalid of at least 4,096 records): a valid record among seven invalid ones, or 4,095 invalid
/// ones at a time. Rings are now served least-costly first, the ones that wrote invalid records
/// after every clean one, each pass within a time budget; invalid records are judged over a
/// second; lines about rings are rate-limited.
@Suite("Quarantine evasions: hostile rings beside an honest one", .serialized)
struct QuarantineEvasionTests {
    enum Attack: String, TestArgument {
        case oneValidInEight = "one valid record in eight"
        case pushes4095 = "4,095 invalid records at a time"
    }

    @Test(
        "300 hostile rings beside a paced 4,096-slot neighbour: the neighbour loses nothing, the hostile rings are quarantined, the log stays small",
        arguments: Attack.allCases)
    func evasion(attack: Attack) throws {
        try withRingDirectory { directory in
            let made = try runTestProducer("sequence", ring: "model", in: directory, ["--count", "1", "--capacity", "4096"])
            try #require(made.status == 0, "\(made.errors)")
            let model = try Data(contentsOf: URL(fileURLWithPath: directory.filePath(for: "model")))
            try directory.remove("model")
            var lanes: [HostileLane] = []
            for index in 0..<300 {
                let path = directory.filePath(for: String(format: "hostile-%03d", index))
                try model.write(to: URL(fileURLWithPath: path))
                lanes.append(try HostileLane(path: path))
            }
            let hostile = lanes
            let logPath = directory.path + "/collector.log"
            let collector = try ChildProcess(
                "/bin/sh",
                [
                    "-c", "exec \"$0\" --listen 127.0.0.1:0 --dir \"$1\" 2>\"$2\"",
                    try builtExecutable("ringside-collector"), directory.path, logPath,
                ])
            defer { collector.kill() }
            func log() -> [String] {
                ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
            }
            let port = try #require(
                eventually {
                    log().first { $0.contains("listening on http://") }
                        .flatMap { $0.components(separatedBy: "http://").last?.split(separator: " ").first?.split(separator: ":").last }
                        .flatMap { Int($0) }
                })
            let attached = eventually(seconds: 30) {
                (try? httpGet(port: port, path: "/metrics"))?.body.contains("\nringside_collector_rings 300\n") == true
            }
            try #require(attached, "the collector did not attach the 300 hostile rings")

            let stop = Atomic<Bool>(false)
            let rounds = Atomic<Int>(0)
            let attacker = Thread {
                while !stop.load(ordering: .relaxed) {
                    for lane in hostile {
                        switch attack {
                        case .oneValidInEight: _ = lane.fill(validEvery: 8)
                        case .pushes4095: lane.push(4_095)
                        }
                    }
                    rounds.add(1, ordering: .relaxed)
                    usleep(1_000)
                }
            }
            attacker.start()
            defer { stop.store(true, ordering: .relaxed) }
            let linesBefore = log().count
            let started = Date()

            // The honest neighbour: 20,000 records a second into 4,096 slots (205 ms of room) for 6 s.
            // It writes once the collector holds its ring: how soon a new file is found is not this test's.
            let honest = try ChildProcess(
                testProducer: "blast", ring: "honest", in: directory,
                ["--seconds", "6", "--rate", "20000", "--capacity", "4096", "--start", "on-input"], withInput: true)
            let hello = honest.readLine() ?? ""
            try #require(hello.hasPrefix("attached "), "the neighbour did not attach: \(hello)")
            let held = eventually(seconds: 30) {
                (try? httpGet(port: port, path: "/metrics"))?.body.contains("\nringside_collector_rings 301\n") == true
            }
            honest.write("go\n")
            try #require(held, "the collector did not take up the neighbour's ring")
            let line = honest.readLine() ?? ""
            _ = honest.waitForExit()
            let neighbour = try #require(BlastCounts(line), "\(line)")
            // The drain passes stay short beside the hostile rings: their median gap is well within
            // the neighbour's room. With 1,024 slots (51 ms) the neighbour dropped 376 to 2,136
            // records in 1 run of 4: it starts from idle at full rate, sampling off, and with no
            // ring filling the loop sleeps its --poll (100 ms) before it first drains it (see the
            // sizing row in docs/operations.md); 4,096 slots hold that. A drop is the machine's
            // only when the producer, or the drain, measured a stall of half the room.
            let gaps = try drainGaps(port: port)
            let room = 4096.0 / 20_000
            #expect(gaps.median < room / 2, "the drain's median gap \(gaps.median) s beside 300 hostile rings")
            let stalled = neighbour.producerStalled(rate: 20_000, capacity: 4096) || gaps.longest >= room / 2
            #expect(neighbour.attempts >= 100_000 && (neighbour.dropped == 0 || stalled), "the neighbour: \(neighbour), drain gaps \(gaps)")

            let metrics = try httpGet(port: port, path: "/metrics").body
            let quarantined = metrics.split(separator: "\n").filter {
                $0.hasPrefix("ringside_ring_quarantines_total{ring=\"hostile-") && !$0.hasSuffix(" 0")
            }.count
            #expect(quarantined == 300, "\(quarantined) of the 300 hostile rings were quarantined")
            #expect(metrics.contains("\nringside_collector_log_lines_suppressed_total "))
            // 300 quarantines (and as many lines when each ends) fit no budget of 20 lines a
            // second: what the log holds is the budget's, plus a line saying what was left out.
            let seconds = Date().timeIntervalSince(started)
            let lines = log().count - linesBefore
            #expect(Double(lines) <= 200 + 20 * (seconds + 1) + seconds / 10 + 2, "\(lines) log lines in \(seconds) s")
            #expect(log().contains { $0.contains("lines about rings were left out of this log lately") })
            stop.store(true, ordering: .relaxed)
            print(
                "\(attack): \(rounds.load(ordering: .relaxed)) rounds over 300 rings; neighbour \(neighbour), "
                    + "\(quarantined) rings quarantined; \(lines) log lines in \(String(format: "%.1f", seconds)) s; drain gaps \(gaps)")
        }
    }
}

/// The collector's drain gaps so far (`/latest`'s `drain_gap_seconds`): their median and the longest.
func drainGaps(port: Int) throws -> (median: Double, longest: Double) {
    let body = try httpGet(port: port, path: "/latest", timeoutSeconds: 30).body
    let document = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
    let gaps = (document?["collector"] as? [String: Any])?["drain_gap_seconds"] as? [String: Any]
    let median = try #require((gaps?["p50"] as? NSNumber)?.doubleValue, "no drain gaps in /latest")
    return (median, try #require((gaps?["max"] as? NSNumber)?.doubleValue))
}
