import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideAggregation
@testable import RingsideCollector
import RingsideSnapshot
import RingsideTestSupport
import Testing

/// Issue 66, round four: a state that outgrew `--state-max-bytes` lost every folded total. Its
/// snapshot was not saved ("more than the collector reads"), its journals passed the bound by
/// their last line and were refused at the next start. The collector now never writes what it
/// would refuse to read: journals stay within the bound, the bots' figures are kept within it (a
/// fold past it refused, its worker's file kept), and the all-time histograms take the room left.
@Suite("The collector's state within its bound: never written larger than it is read")
struct CollectorStateBoundTests {
    private typealias Entry = CollectorState.Entry

    /// `content` written by a snapshot writer bounded at `limit` to `path`; what it left out.
    private func write(
        _ content: StateContent, present: Set<String> = [], limit: Int, to path: String
    ) throws
        -> StateSnapshotWriter.Written
    {
        let descriptor = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o600)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        var writer = StateSnapshotWriter(descriptor: descriptor, limit: limit)
        try writer.write(content, generation: 7, present: present)
        return writer.written
    }

    private func size(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : -1
    }

    private func readSnapshot(_ path: String) throws -> StateFiles.Snapshot {
        try JSONDecoder().decode(StateFiles.Snapshot.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// An all-time histogram of about `buckets` buckets.
    private func histogram(buckets: Int) -> PersistedHistogram {
        var histogram = Histogram()
        var value = 1.0
        for _ in 0..<buckets {
            histogram.record(UInt64(value))
            value = value * 1.002 + 1
        }
        return histogram.persisted
    }

    @Test(
        "a snapshot past its bound keeps every bot's figures and the all-time histograms that fit, those of bots here and seen last first; it reads back, never larger than the bound"
    )
    func snapshotKeepsFiguresFirst() throws {
        try withRingDirectory { directory in
            let now = UInt64(time(nil))
            var content = StateContent()
            for bot in 0..<40 {
                content.apply(
                    (0..<10).map { Entry(metric: "orders_\($0)", labels: "side=buy", total: UInt64(bot * 1_000 + $0), dropped: 1) },
                    for: "bot-\(bot)")
                content.seen["bot-\(bot)"] = now
            }
            var figuresOnly = content
            let kept = histogram(buckets: 2_000)
            for bot in 0..<12 {
                content.histograms["hist-\(bot)"] = [.init(metric: "fill", labels: "", histogram: kept)]
                content.seen["hist-\(bot)"] = now - UInt64(bot) * 3_600
            }
            // Here now, though seen last the longest ago.
            let present: Set<String> = ["hist-11", "hist-10", "hist-9"]
            let path = directory.path + "/snapshot"
            #expect(try write(figuresOnly, limit: 1 << 30, to: path).shed == 0)
            let figures = size(path)
            #expect(figures <= StateSnapshotWriter.frameBytes + figuresOnly.totalsBytes, "what the drain thread counts is enough")
            #expect(try write(content, present: present, limit: 1 << 30, to: path).shed == 0)
            let whole = size(path)

            // Room for seven and a half histograms beside the figures.
            let limit = figures + (whole - figures) * 15 / 24
            let written = try write(content, present: present, limit: limit, to: path)
            #expect(size(path) <= limit)
            #expect(written.fits && written.shed == 5 && written.shedBots == 5, "\(written)")
            let read = try readSnapshot(path)
            #expect(read.content.bots == content.bots, "every bot's figures")
            #expect(
                Set(read.histograms?.keys ?? [:].keys) == ["hist-11", "hist-10", "hist-9", "hist-0", "hist-1", "hist-2", "hist-3"],
                "those here, then those seen last: \(read.histograms?.keys.sorted() ?? [])")
            #expect(read.histograms?["hist-0"]?.first?.histogram == kept)
            #expect(read.seen?.keys.count == 47, "the dates of the bots written, only")

            // Figures that do not fit: nothing is written, and the caller keeps the files it would supersede.
            figuresOnly.histograms = [:]
            let none = try write(figuresOnly, limit: StateSnapshotWriter.frameBytes + figuresOnly.totalsBytes - 1, to: path)
            #expect(!none.fits && size(path) == 0)
        }
    }

    @Test(
        "3,000 folds of new series into a 1 MiB state: every journal stays within the bound as it rolls, a fold that would take the figures past it is refused, counted and said once, and what was folded reads back whole"
    )
    func foldsWithinBound() throws {
        try withRingDirectory { directory in
            var options = CollectorOptions(directory: directory)
            options.stateMaxBytes = 1 << 20
            try #require(FileManager.default.createFile(atPath: directory.filePath(for: "gone"), contents: Data()))
            let identity = try #require(directory.fileIdentity(of: "gone"))
            func journals() -> [Int] {
                ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".journal") }
                    .map { size(directory.path + "/" + $0) }
            }
            let captured = CapturedLog()
            var folded = StateContent()
            var refused = 0
            var largestJournal = 0
            var journalsSeen = 0
            do {
                let state = try CollectorState(options: options, log: captured.log)
                // Six bots, each worker a series of its own with 300 bytes of labels: 1.3 MB of figures.
                let padding = String(repeating: "x", count: 300)
                for worker in 0..<3_000 {
                    let bot = "bot-\(worker % 6)"
                    let entries = [Entry(metric: "orders", labels: "worker=\(worker)\npad=\(padding)", total: 20_480, dropped: 0)]
                    if state.recordFold(entries, bot: bot, worker: "\(bot)@\(100_000 + worker)", identity: identity) {
                        state.folded(entries, bot: bot)
                        folded.apply(entries, for: bot)
                    } else {
                        refused += 1
                    }
                    if worker % 50 == 0 {
                        let sizes = journals()
                        largestJournal = max(largestJournal, sizes.max() ?? 0)
                        journalsSeen = max(journalsSeen, sizes.count)
                    }
                }
                let stats = try #require(state.stats)
                #expect(refused > 0 && stats.foldsRefused == UInt64(refused), "\(refused) refused, \(stats.foldsRefused) counted")
                #expect(stats.totalsBytes <= 1 << 20 && stats.totalsBytes > 1 << 19, "\(stats.totalsBytes)")
                #expect(captured.all.count { $0.contains("cannot fold worker") } == 1, "said once: \(captured.all)")
                #expect(captured.contains("cannot fold worker", "more than the 1048576 a collector reads (--state-max-bytes)"))
                state.close(histograms: [:])
            }
            #expect(largestJournal > 1 << 19 && largestJournal <= 1 << 20, "the largest journal: \(largestJournal) bytes")
            let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter(StateFiles.isStateFile)
            #expect(files.allSatisfy { size(directory.path + "/" + $0) <= 1 << 20 }, "\(files)")
            let loaded = StateFiles.load(
                from: try LogDirectory(path: directory.path), rings: directory, limit: 1 << 20, expirySeconds: nil,
                nowSeconds: UInt64(time(nil)))
            #expect(loaded.unreadable.isEmpty, "\(loaded.unreadable)")
            #expect(loaded.content.bots == folded.bots, "every fold taken reads back")
            print(
                "3,000 folds into 1 MiB: \(3_000 - refused) taken, \(refused) refused; journals up to \(largestJournal) bytes, "
                    + "\(journalsSeen) at once")
        }
    }

    /// A figure of a bot's on `/metrics` (a sample line beginning `name{ring="bot"} `).
    private func figure(_ page: String, _ name: String, ring: String) -> UInt64? {
        let prefix = "\(name){ring=\"\(ring)\"} "
        return page.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { UInt64($0.dropFirst(prefix.count)) }
    }

    @Test(
        "the real collector at --state-max-bytes 1M, its state full of 12 earlier bots' histograms, as six bots fold their workers: the state saved at each stop holds every figure and the histograms that fit (the oldest left out, said), and after a stop and a kill every total and count reads as before"
    )
    func sixBotsOutgrowTheBound() throws {
        try withRingDirectory { directory in
            // 12 bots gone for 1 to 12 hours, each a total and an all-time histogram of 9,150 buckets: 0.96 MiB.
            let now = UInt64(time(nil))
            var planted = StateContent()
            for bot in 0..<12 {
                planted.apply([Entry(metric: "orders", labels: "", total: UInt64(1_000 + bot), dropped: 0)], for: "earlier-\(bot)")
                planted.histograms["earlier-\(bot)"] = [.init(metric: "fill", labels: "", histogram: histogram(buckets: 9_150))]
                planted.seen["earlier-\(bot)"] = now - UInt64(bot + 1) * 3_600
            }
            let path = directory.path + "/" + StateFiles.primaryName
            #expect(try write(planted, limit: 1 << 20, to: path).shed == 0)
            let plantedBytes = size(path)
            #expect(plantedBytes > 990_000 && plantedBytes < 1 << 20, "\(plantedBytes)")

            let arguments = ["--dir", directory.path, "--poll", "20ms", "--state-max-bytes", "1M"]
            let (first, port) = try startCollector(arguments)
            defer { first.kill() }
            // Six bots, each a pool of forked workers recording 1 ... 10,240 (3,400 buckets: 40 KB of histogram).
            let bots = (0..<6).map { "pool-\($0)" }
            for bot in bots {
                let pool = try runTestProducer(
                    "worker-pool", ring: bot, in: directory,
                    ["--workers", "2", "--count", "10240", "--rate", "1000000", "--seconds", "0.01"])
                try #require(pool.status == 0 && pool.output.contains("increments "), "\(pool.output) \(pool.errors)")
            }
            func figures(_ port: Int) throws -> [String: (total: UInt64, count: UInt64)]? {
                let page = try httpGet(port: port, path: "/metrics").body
                var read: [String: (UInt64, UInt64)] = [:]
                for bot in bots {
                    guard let total = figure(page, "pool_increments_total", ring: bot),
                        let count = figure(page, "pool_values_count", ring: bot)
                    else { return nil }
                    read[bot] = (total, count)
                }
                return read
            }
            // Every worker folded, its file gone: the figures are final.
            let before = try #require(
                try eventually(seconds: 60) { () -> [String: (total: UInt64, count: UInt64)]? in
                    guard !directory.ringNames().contains(where: { $0.contains("@") }) else { return nil }
                    return try figures(port)
                })
            #expect(before.values.allSatisfy { $0.total >= 20_480 && $0.count > 0 }, "\(before)")
            first.send(SIGTERM)
            let stopped = first.waitForExit()
            #expect(stopped.status == 0)
            #expect(
                stopped.standardError.contains("the collector's state leaves out the all-time histograms of"),
                "said: \(stopped.standardError)")
            #expect(!stopped.standardError.contains("cannot save the collector's state"), "\(stopped.standardError)")

            // What was saved: within the bound, every figure, the six bots' histograms, the oldest earlier ones left out.
            let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter(StateFiles.isStateFile)
            #expect(files.allSatisfy { size(directory.path + "/" + $0) <= 1 << 20 }, "\(files)")
            let saved = try readSnapshot(path)
            #expect(saved.generation ?? 0 > 7, "saved at the stop")
            for bot in 0..<12 { #expect(saved.bots["earlier-\(bot)"]?.first?.total == UInt64(1_000 + bot)) }
            for bot in bots {
                #expect(saved.bots[bot]?.first { $0.metric == "pool_increments" }?.total == before[bot]?.total, "\(bot)")
                #expect(saved.histograms?[bot]?.first?.histogram.count == before[bot]?.count, "\(bot)'s histogram kept")
            }
            let earlierKept = (0..<12).filter { saved.histograms?["earlier-\($0)"] != nil }
            #expect(earlierKept.count < 12 && earlierKept == Array(0..<earlierKept.count), "the latest seen kept: \(earlierKept)")

            // A stop, then a kill: each next collector reads the same.
            for life in 0..<2 {
                let (next, port) = try startCollector(arguments)
                defer { next.kill() }
                let after = try #require(try eventually(seconds: 30) { try figures(port) })
                for bot in bots {
                    #expect(after[bot]?.total == before[bot]?.total && after[bot]?.count == before[bot]?.count, "life \(life): \(bot)")
                }
                let page = try httpGet(port: port, path: "/metrics").body
                #expect(page.contains("ringside_collector_state_read_failures 0\n"), "every state file read")
                if life == 0 {
                    next.send(SIGTERM)
                    #expect(next.waitForExit().status == 0)
                }
            }
            print("six bots beside a full state: \(plantedBytes) bytes planted; \(12 - earlierKept.count) earlier histograms left out")
        }
    }

    @Test(
        "a worker whose fold would take a full state past its bound keeps its file, its total in it: counted, said, shown, the same after a restart; folded once the bound is raised"
    )
    func refusedFoldKeepsTheFile() throws {
        try withRingDirectory { directory in
            // Earlier bots seen a minute ago (kept), their figures filling 1 MiB but 5 bytes.
            let now = UInt64(time(nil))
            var planted = StateContent()
            var (count, bytes) = (0, StateSnapshotWriter.frameBytes)
            func plant(_ entry: Entry, _ bot: String) {
                planted.apply([entry], for: bot)
                planted.seen[bot] = now - 60
                bytes += StateSnapshotWriter.bytes(ofBot: bot) + StateSnapshotWriter.bytes(of: entry)
            }
            while true {
                let entry = Entry(metric: "orders", labels: "", total: UInt64(count + 1), dropped: 0)
                guard bytes + StateSnapshotWriter.bytes(ofBot: "earlier-\(count)") + StateSnapshotWriter.bytes(of: entry) <= (1 << 20) - 200
                else { break }
                plant(entry, "earlier-\(count)")
                count += 1
            }
            let short = Entry(metric: "orders", labels: "", total: 1, dropped: 0)
            let padding = (1 << 20) - 5 - bytes - StateSnapshotWriter.bytes(ofBot: "padded") - StateSnapshotWriter.bytes(of: short)
            plant(Entry(metric: "orders", labels: "pad=" + String(repeating: "x", count: padding - 4), total: 1, dropped: 0), "padded")
            #expect(bytes == (1 << 20) - 5)
            #expect(StateSnapshotWriter.frameBytes + planted.totalsBytes == bytes)
            let path = directory.path + "/" + StateFiles.primaryName
            #expect(try write(planted, limit: 1 << 20, to: path).fits)
            var options = CollectorOptions(directory: directory)
            options.stateMaxBytes = 1 << 20
            /// Steps a collector of `options` until its worker files are gone or 12 s passed; its last snapshot.
            func run(_ captured: CapturedLog, _ body: (Collector) throws -> Void = { _ in }) throws -> Snapshot {
                let collector = try Collector(options: options, log: captured.log)
                try body(collector)
                var snapshot = pass(collector)
                for step in 1...6 where directory.ringNames().contains(where: { $0.hasPrefix("late@") }) {
                    snapshot = pass(collector, offset: UInt64(step) * 2_000_000_000)
                }
                collector.start()
                collector.stop()
                return snapshot
            }

            // The bot's own process, alive throughout: its series stay shown while its workers come and go.
            let bot = try ChildProcess(testProducer: "hold", ring: "late", in: directory, ["--count", "1"])
            defer { bot.kill() }
            try #require(bot.readLine()?.hasPrefix("ready") == true)
            let captured = CapturedLog()
            let first = try run(captured) { _ in
                try #require(runTestProducer("worker", ring: "late", in: directory, ["--add", "7"]).status == 0)
            }
            #expect(directory.ringNames().contains { $0.hasPrefix("late@") }, "its file is kept")
            #expect(first.series("worker_total", ring: "late")?.cumulativeExactSum == 7)
            #expect((first.collector.state?.foldsRefused ?? 0) >= 1, "\(String(describing: first.collector.state))")
            #expect(captured.contains("cannot fold worker late@", "more than the 1048576 a collector reads (--state-max-bytes)"))
            let saved = try readSnapshot(path)
            #expect(size(path) <= 1 << 20 && saved.content.bots == planted.bots, "every earlier bot's figures, within the bound")

            // Restarted as it was: the kept file counts, once.
            let second = try run(CapturedLog())
            #expect(second.series("worker_total", ring: "late")?.cumulativeExactSum == 7)
            // The bound raised: folded, the file gone, the total kept across the next restart.
            options.stateMaxBytes = 2 << 20
            let third = try run(CapturedLog())
            #expect(!directory.ringNames().contains { $0.hasPrefix("late@") }, "folded now")
            #expect(third.series("worker_total", ring: "late")?.cumulativeExactSum == 7)
            let fourth = try run(CapturedLog()) { _ in
                try #require(runTestProducer("worker", ring: "late", in: directory, ["--add", "1"]).status == 0)
            }
            #expect(fourth.series("worker_total", ring: "late")?.cumulativeExactSum == 8)
        }
    }

    @Test("a date in a state file later than now is read as now: a bot's date in a snapshot takes the digits the bound counts")
    func futureDatesReadAsNow() throws {
        try withRingDirectory { directory in
            var planted = StateContent()
            planted.apply([Entry(metric: "orders", labels: "", total: 3, dropped: 0)], for: "later")
            planted.seen["later"] = UInt64.max
            try JSONEncoder().encode(StateFiles.Snapshot(planted, generation: 1))
                .write(to: URL(fileURLWithPath: directory.path + "/" + StateFiles.primaryName))
            let now = UInt64(time(nil))
            let loaded = StateFiles.load(
                from: try LogDirectory(path: directory.path), rings: directory, limit: 1 << 20, expirySeconds: 3_600, nowSeconds: now)
            #expect(loaded.content.seen["later"] == now && loaded.content.bots["later"]?.first?.total == 3)
            #expect(String(now).count <= StateSnapshotWriter.dateDigits)
        }
    }
}
