import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Synchronization
import Testing

/// Bytes of `path` the file system has allocated (`st_blocks`, in 512-byte units).
private func allocatedBytes(_ path: String) -> Int {
    var info = stat()
    guard stat(path, &info) == 0 else { return -1 }
    return Int(info.st_blocks) * 512
}

/// The header of the bot file at `path`, as its creator wrote it.
private func botHeader(_ path: String) throws -> rs_header {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw TestSupportError("open \(path): errno \(errno)") }
    defer { close(fd) }
    var header = rs_header()
    let count = withUnsafeMutableBytes(of: &header) { pread(fd, $0.baseAddress, $0.count, 0) }
    guard count == MemoryLayout<rs_header>.size else { throw TestSupportError("short header in \(path)") }
    return header
}

/// Turns the bot file at `path` (no lanes yet) into what a hostile or broken producer could
/// leave: one lane claimed by `ftruncate` alone (a hole of `lane_size` bytes), its write cursor
/// at the lane's capacity, as if every record were there to read.
private func claimSparseLane(_ path: String) throws {
    let header = try botHeader(path)
    let laneStart = Int(header.lanes_offset)
    guard truncate(path, off_t(laneStart + Int(header.lane_size))) == 0 else {
        throw TestSupportError("truncate \(path): errno \(errno)")
    }
    patch(path, at: laneStart + laneHeaderOffset(\.write_cursor), with: UInt64(1) << UInt64(header.capacity_log2))
    patch(path, at: headerOffset(\.lanes_allocated), with: UInt32(1))
}

/// Reads and writes a lane's cursors in a bot file with pread and pwrite, as another process could.
private struct LaneCursors {
    let fd: Int32
    let readOffset: Int, writeOffset: Int

    init(path: String, lane: Int) throws {
        let header = try botHeader(path)
        fd = open(path, O_RDWR)
        guard fd >= 0 else { throw TestSupportError("open \(path): errno \(errno)") }
        let base = Int(header.lanes_offset) + lane * Int(header.lane_size)
        readOffset = base + laneHeaderOffset(\.read_cursor)
        writeOffset = base + laneHeaderOffset(\.write_cursor)
    }

    var read: UInt64 {
        var value: UInt64 = 0
        _ = pread(fd, &value, 8, off_t(readOffset))
        return value
    }

    func setWrite(_ value: UInt64) {
        var value = value
        _ = pwrite(fd, &value, 8, off_t(writeOffset))
    }

    func close() { Glibc.close(fd) }
}

@Suite("Hostile producers: a file no honest producer writes costs the collector nothing")
struct HostileProducerTests {
    @Test("a lane pushed a full 2^22 records ahead, again and again, is capped and quarantined; an honest paced neighbour drops nothing")
    func junkFloodBesideAnHonestNeighbour() throws {
        try withRingDirectory { directory in
            // The hostile bot: one real lane of 2^22 records (128 MiB, allocated as a producer
            // allocates it), whose write cursor another thread keeps a whole lane ahead of the
            // collector's read cursor, over records that were never written (all invalid).
            let hostile = try Bot.attach("hostile", directory: directory.path, options: .init(laneCapacity: 1 << 22))
            let junk = try hostile.histogram("junk")
            junk.record(1)
            let capacity = UInt64(1) << 22
            let cursors = try LaneCursors(path: directory.filePath(for: "hostile"), lane: 0)
            defer { cursors.close() }

            let (collector, port) = try startCollector(["--dir", directory.path])
            defer { collector.kill() }
            let stop = Atomic<Bool>(false)
            let pushes = Atomic<Int>(0)
            let pusher = Thread {
                while !stop.load(ordering: .relaxed) {
                    cursors.setWrite(cursors.read + capacity)
                    pushes.add(1, ordering: .relaxed)
                    usleep(1_000)
                }
            }
            pusher.start()
            defer { stop.store(true, ordering: .relaxed) }

            // The honest neighbour: 20,000 records a second into 4,096 slots for 6 s.
            let blast = try ChildProcess(
                testProducer: "blast", ring: "honest", in: directory, ["--seconds", "6", "--rate", "20000", "--capacity", "4096"])
            let attached = blast.readLine() ?? ""
            try #require(attached.hasPrefix("attached "), "the neighbour did not attach: \(attached)")
            let counts = blast.readLine() ?? ""
            _ = blast.waitForExit()
            let neighbour = try #require(BlastCounts(counts), "\(counts)")
            // Drops after the neighbour itself stalled half its lane's room are the machine's.
            #expect(
                neighbour.attempts >= 110_000 && (neighbour.dropped == 0 || neighbour.producerStalled(rate: 20_000, capacity: 4096)),
                "the neighbour: \(neighbour)")

            let metrics = try httpGet(port: port, path: "/metrics").body
            let quarantines = metrics.split(separator: "\n").first { $0.hasPrefix("ringside_ring_quarantines_total{ring=\"hostile\"}") }
            let times = quarantines.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
            #expect(times >= 1, "the hostile ring was quarantined: \(quarantines.map(String.init) ?? "no such line")")
            stop.store(true, ordering: .relaxed)
            collector.send(SIGTERM)
            let log = collector.waitForExit().standardError
            #expect(log.contains("ring hostile: quarantined for 5 s: "), "the log says why")
            print(
                "junk flood: \(pushes.load(ordering: .relaxed)) pushes of a full 2^22-record lane; neighbour "
                    + "\(neighbour); hostile quarantined \(times) times")
        }
    }

    /// Six bots of 4,096 busy series each (24,576 series, every window full, so each snapshot
    /// computes them all: seconds in a debug build) beside a paced producer, 20,000 records a
    /// second into 4,096 slots (205 ms of them). Snapshots are built a slice of rings per pass,
    /// so the passes between drain the paced ring and keep /health at 200.
    @Test("a large snapshot is built in slices: /health stays 200 and a paced neighbour drops nothing meanwhile")
    func largePublish() throws {
        try withRingDirectory { directory in
            for bot in 0..<6 {
                let run = try runTestProducer(
                    "many-metrics", ring: "wide-\(bot)", in: directory, ["--count", "3", "--metrics", "4096", "--capacity", "65536"])
                try #require(run.status == 0, "\(run.errors)")
            }
            let (collector, port) = try startCollector(["--dir", directory.path])
            defer { collector.kill() }
            // Asked of /health, which answers at once: a debug build renders a /metrics page of
            // these series in seconds, more on a loaded machine (60 s of such pages were not enough).
            // Every series shown, not only kept: a bot's first figures are made whole, hundreds of
            // milliseconds for 4,096 series in a debug build; what is sliced is the snapshot after.
            let seriesCount = eventually(seconds: 180) { () -> Int? in
                let health = (try? httpGet(port: port, path: "/health", timeoutSeconds: 5))?.body ?? ""
                let document = try? jsonObject(health)
                guard let series = document?["series"] as? Int, document?["series_awaiting_figures"] as? Int == 0 else { return nil }
                return series >= 6 * 4096 ? series : nil
            }
            try #require(seriesCount != nil, "the collector did not show the 24,576 series")

            let waitedBefore = runQueueWaitNanos(of: collector.pid, thread: "ringside-drain") ?? 0
            let blast = try ChildProcess(
                testProducer: "blast", ring: "paced", in: directory, ["--seconds", "5", "--rate", "20000", "--capacity", "4096"])
            var statuses: [Int: Int] = [:]
            let end = Date().addingTimeInterval(5)
            while Date() < end {
                let status = (try? httpGet(port: port, path: "/health", timeoutSeconds: 5))?.status ?? 0
                statuses[status, default: 0] += 1
                usleep(50_000)
            }
            _ = blast.readLine()  // "attached PID"
            let counts = blast.readLine() ?? ""
            _ = blast.waitForExit()
            let neighbour = try #require(BlastCounts(counts), "\(counts)")
            // Drops while the machine kept the drain thread off a CPU it could use for half the
            // lane's time (another build beside the suite) are the machine's, not the snapshot's.
            let drainWaited = (runQueueWaitNanos(of: collector.pid, thread: "ringside-drain") ?? 0) &- waitedBefore
            let drainStarved = Double(drainWaited) / 1e9 * 20_000 >= 4096 / 2
            #expect(statuses.keys.sorted() == [200], "/health answers: \(statuses)")
            #expect(
                neighbour.dropped == 0 || neighbour.producerStalled(rate: 20_000, capacity: 4096) || drainStarved,
                "the paced neighbour: \(neighbour); the drain waited \(drainWaited / 1_000_000) ms for a CPU")
            print(
                "large publish: \(seriesCount ?? 0) series; /health \(statuses); paced neighbour: \(counts); "
                    + "the drain waited \(drainWaited / 1_000_000) ms for a CPU")
        }
    }

    @Test(
        "sparse bot files claiming 2^23-record lanes are refused unread: the pages stay unallocated, RSS flat, the reason logged and in /health"
    )
    func sparseBotFiles() throws {
        // An honest neighbour, whose records must keep arriving.
        try withBot("honest", options: .init(laneCapacity: 4096)) { directory, honest in
            let values = try honest.histogram("honest_values")
            for value in 1...100 { values.record(UInt64(value)) }

            // One sparse from birth: made aside, then renamed in, so the collector first sees it sparse.
            let aside = try TemporaryRingDirectory()
            defer { aside.remove() }
            do { _ = try Bot.attach("born-sparse", directory: aside.path, options: .init(laneCapacity: 1 << 23)) }
            try claimSparseLane(aside.ringDirectory.filePath(for: "born-sparse"))
            guard rename(aside.ringDirectory.filePath(for: "born-sparse"), directory.filePath(for: "born-sparse")) == 0 else {
                throw TestSupportError("rename: errno \(errno)")  // both under /dev/shm, or the same file system
            }
            // One honest when the collector attaches it, grown sparse afterwards.
            let grownPath = directory.filePath(for: "grown-sparse")
            let grownBot = try Bot.attach("grown-sparse", directory: directory.path, options: .init(laneCapacity: 1 << 23))
            _ = try grownBot.counter("grown_orders")

            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "10ms"])
            defer { collector.kill() }
            let attached = eventually { () -> Bool? in
                let body = (try? httpGet(port: port, path: "/latest"))?.body ?? ""
                return body.contains("honest_values") && body.contains("grown_orders") ? true : nil
            }
            try #require(attached == true, "the collector did not attach the honest bots")
            let baseline = try #require(residentKiB(of: collector.pid)?.total)

            try claimSparseLane(grownPath)
            let bornPath = directory.filePath(for: "born-sparse")
            let bornAllocated = allocatedBytes(bornPath), grownAllocated = allocatedBytes(grownPath)
            let refused = eventually { () -> String? in
                guard let health = try? httpGet(port: port, path: "/health").body,
                    let object = try? jsonObject(health),
                    let rings = object["rings"] as? [[String: Any]]
                else { return nil }
                let skipped = rings.filter {
                    ($0["state"] as? String) == "skipped" && ($0["problem"] as? String ?? "").contains("sparse: ")
                }
                return Set(skipped.compactMap { $0["name"] as? String }) == ["born-sparse", "grown-sparse"] ? health : nil
            }
            #expect(refused != nil, "both sparse bots skipped, with the reason, in /health")

            // The neighbour carries on.
            for value in 101...200 { values.record(UInt64(value)) }
            let carriedOn = eventually { () -> Bool? in
                let metrics = (try? httpGet(port: port, path: "/metrics"))?.body ?? ""
                return metrics.contains("honest_values_count{ring=\"honest\"} 200") ? true : nil
            }
            #expect(carriedOn == true, "the honest bot's 200 records are counted")

            usleep(300_000)  // a few more passes, with the lanes' claims still there to be read
            let lane = Int(try botHeader(bornPath).lane_size)
            #expect(
                allocatedBytes(bornPath) == bornAllocated && allocatedBytes(grownPath) == grownAllocated,
                "nothing allocated the holes")
            #expect(bornAllocated < lane / 100 && grownAllocated < lane / 100, "\(bornAllocated) and \(grownAllocated) of \(lane)")
            let rss = try #require(residentKiB(of: collector.pid)?.total)
            #expect(rss - baseline < 8 * 1024, "the collector's RSS went from \(baseline) kB to \(rss) kB")

            collector.send(SIGTERM)
            let log = collector.waitForExit().standardError
            for name in ["born-sparse", "grown-sparse"] {
                #expect(
                    log.split(separator: "\n").contains { $0.contains("ring \(name)") && $0.contains("sparse: ") },
                    "the log says why \(name) was refused")
            }
            print(
                "sparse bots: lanes of \(lane) bytes claimed, \(bornAllocated) and \(grownAllocated) bytes allocated; "
                    + "collector RSS \(baseline) -> \(rss) kB")
        }
    }
}
