import CRingside
import CRingsideBench
import Foundation
import Ringside
import RingsideCollector
import RingsideCommandLine
import RingsideExport
import RingsideSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `ringside-bench collector`: how fast the collector drains and aggregates, how soon a record
/// is visible in its snapshot, and what it costs to run at a million records a second.
package enum CollectorBenchmark {
    /// The groups of rows `--row` may name: the drain rows, the live run's (e2e, cpu, rss), the
    /// thread sampler's, the per-second history's.
    package static let rowGroups = ["drain", "live", "sampler", "history"]

    /// Runs the groups of rows named in `only` (every group when it names none of them).
    package static func run(
        _ settings: BenchSettings, only: Set<String> = [], progress: (String) -> Void = { _ in }
    ) throws(BenchError) -> CollectorReport {
        let groups = only.isDisjoint(with: rowGroups) ? Set(rowGroups) : only
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let cpus = (producer: rsb_allowed_cpu(0), collector: rsb_allowed_cpu(1))
        var machine = Machine.current(pinned: false)
        let pinned = cpus.collector >= 0 && rsb_pin_current_thread(cpus.collector) == 0
        defer { rsb_unpin_current_thread() }

        var live = LiveResult()
        if groups.contains("live") {
            progress("live run at 1 M records/s")
            live = try liveRun(settings, directory: try scratch.subdirectory("live"), producerCPU: pinned ? cpus.producer : -1)
        }
        var drains: [CollectorReport.Drain] = []
        if groups.contains("drain") {
            drains = try DrainBenchmark.run(
                seconds: settings.seconds, minimumRounds: settings.rounds, scratch: scratch,
                producerCPU: pinned ? cpus.producer : -1, progress: progress)
        }
        // Unpinned from here: the sampler and the 2,000 threads run where the scheduler puts them,
        // as a collector's and its bots' do.
        rsb_unpin_current_thread()
        var sampling: [CollectorReport.ThreadSampling] = []
        for waking in [false, true] where groups.contains("sampler") {
            progress("thread sampler at \(ThreadSamplerBenchmark.lanes) lanes, \(waking ? "waking" : "idle") threads")
            sampling.append(
                try ThreadSamplerBenchmark.run(
                    settings, directory: try scratch.subdirectory(waking ? "sample-waking" : "sample-idle"), waking: waking,
                    progress: progress))
        }
        let history = groups.contains("history") ? HistoryBenchmark.run(settings, progress: progress) : []
        let placement =
            pinned
            ? "The collector on CPU \(cpus.collector), producers on CPU \(cpus.producer)"
            : "Threads not pinned (pinning unavailable)"
        let method =
            "Drain: a producer thread fills every ring until full (1,048,576 records in all, spread evenly over "
            + "1, 8 or 64 rings; calls a mix of 60 % histograms, 30 % counters, 10 % gauges over 7 metrics a ring, "
            + "counters writing no records), then Collector.runPass drains and aggregates them on one thread, the "
            + "passes timed by that thread's CPU time (CLOCK_THREAD_CPUTIME_ID; wall time beside it); before the fill an untimed forced pass publishes the last round "
            + "and moves the windows to its time, at which the timed passes see the clock stand (no publish, window "
            + "rotation or liveness look in them: they cost per second, not per record), except in the .clock rows, whose "
            + "timed passes are given the time and do what falls due; in the .narrow rows each histogram's values come "
            + "from 64 buckets, not some 800 (x1ring against 1 ring drained alike); the .recorder rows drain with the "
            + "flight recorder on at its defaults (10 s, 256 MiB; every other row without it), xnorec their figure over the "
            + "same rings' without it, round by round (the recorder fills its budget within the first rounds, then lets "
            + "chunks go as it takes new ones); 64rings.floor = the least a drain of those rings must do: 64 rings filled "
            + "alike, each record read through a RingConsumer into a series of its ring and metric found by index (a "
            + "histogram's value recorded into a WindowedHistogram, a gauge's set into a WindowedGauge), no check, registry or "
            + "cap (its consumers read no gather cells, so its rings are never sampled); baseline = as many values "
            + "recorded into one WindowedHistogram in a loop, and baseline.unspecialized the same loop through generic "
            + "code the optimizer may not specialize (what recording costs the collector if it could not specialize the "
            + "windows' inlinable code: its xbaseline is what the specialization saves). Interleaved rounds (at least --rounds, until each row "
            + "had --duration), a row's ns/record the median of its rounds', x1ring and xbaseline the medians of "
            + "the rounds' ratios. Live run: Collector.start() with --poll "
            + formatDuration(settings.collectorPollNanos) + " (a snapshot at most every "
            + formatDuration(publishIntervalNanos(poll: settings.collectorPollNanos)) + "), a producer paced to "
            + "1 M records/s in bursts every ~100 µs; cpu = the drain thread's run time "
            + "(/proc/self/task/TID/schedstat) over wall time; e2e.KIND = from just before a histogram's record, "
            + "a counter's increment or a gauge's set (in turn) in a second ring to the first snapshot (Collector.snapshot, "
            + "polled every 20 µs) that shows it, calls 0-2 ms apart at random (so their phase against publishing is uniform); "
            + "rss = VmRSS of the whole benchmark process (rings mapped by both producer and collector count twice), anon_mb = its RssAnon. "
            + "Thread sampler: 20 bots of 100 lanes, each held by a thread of this process (idle: blocked once it holds its lane; "
            + "waking: sleeps 250 ms and records, so every thread ran between rounds), Collector.start() at the default "
            + "--thread-sample-interval 1s; percent = the sampler thread's run time (its schedstat) over wall time, past its first rounds. "
            + HistoryBenchmark.method + placement + "."
        machine.pinned = pinned
        return CollectorReport(
            machine: machine, method: method, drains: drains,
            endToEnd: live.endToEnd,
            cpuPercent: live.cpuPercent, loadRecordsPerSecond: live.loadRate, loadDropped: live.loadDropped,
            rssMegabytes: live.rss, rssAnonMegabytes: live.rssAnon, threadSampling: sampling, liveRun: groups.contains("live"),
            history: history)
    }

    /// The kinds the e2e probe times in turn, and its metric of each.
    static let endToEndKinds = ["histogram", "counter", "gauge"]
    static let endToEndMetrics = ["e2e_probe_latency", "e2e_probe", "e2e_probe_level"]

    /// The collector's publish interval for a poll interval (see `Collector.runPass`).
    static func publishIntervalNanos(poll: UInt64) -> UInt64 { min(max(poll, 10_000_000), 100_000_000) }

    /// The rows' options: the flight recorder off but in the `.recorder` rows (at its defaults
    /// there), so that the other rows keep measuring what they did before it came.
    static func options(directory: String, pollNanos: UInt64 = CollectorOptions().pollNanos, recorder: Bool = false) -> CollectorOptions {
        var options = CollectorOptions()
        options.directory = RingDirectory(directory)
        options.pollNanos = pollNanos
        if !recorder { options.recorderNanos = 0 }
        return options
    }

    static let quietLog = CollectorLog { _ in }

    /// A collector of `options`, quiet (another collector holding the directory is the benchmark's error).
    static func collector(_ options: CollectorOptions) throws(BenchError) -> Collector {
        do { return try Collector(options: options, log: quietLog) } catch { throw BenchError("\(error)") }
    }

    // MARK: - The live run

    /// The live run's figures (zero when it did not run).
    struct LiveResult {
        var endToEnd: [CollectorReport.EndToEnd] = []
        var cpuPercent: Double = 0
        var loadRate: Double = 0
        var loadDropped: UInt64 = 0
        var rss: Double = 0
        var rssAnon: Double = 0
    }

    static func liveRun(_ settings: BenchSettings, directory: String, producerCPU: Int32) throws(BenchError) -> LiveResult {
        let stop = StopFlag()
        let load = try BackgroundThread(name: "bench-load", cpu: producerCPU) {
            () throws(BenchError) -> (() -> (rate: Double, dropped: UInt64)) in
            let ring: Bot
            let handles: MetricMix
            do {
                // The size docs/benchmarks.md's figures used.
                ring = try Bot.attach("load", directory: directory, options: .init(laneCapacity: 1 << 17))
                handles = try MetricMix(ring)
            } catch { throw BenchError("attaching ring load in \(directory): \(error)") }
            return {
                // Paced: every wake-up writes what 1 M/s owes since the start.
                let start = rs_clock_precise_ns()
                var written: UInt64 = 0
                while !stop.isSet {
                    let owed = (rs_clock_precise_ns() &- start) / 1000
                    while written < owed {
                        handles.write(Int(truncatingIfNeeded: written))
                        written &+= 1
                    }
                    System.nanosleep(100_000)
                }
                return (Double(written) / (Double(rs_clock_precise_ns() &- start) / 1e9), ring.currentThreadLane.recordsDropped)
            }
        }
        let collector = try CollectorBenchmark.collector(options(directory: directory, pollNanos: settings.collectorPollNanos))
        let probe = try BackgroundThread(name: "bench-probe", cpu: -1) { () throws(BenchError) -> (() -> [[UInt64]]) in
            let ring: Bot
            let latency: Bot.Histogram, counter: Bot.Counter, gauge: Bot.Gauge
            do {
                // The size docs/benchmarks.md's figures used.
                ring = try Bot.attach("probe", directory: directory, options: .init(laneCapacity: 1 << 17))
                latency = try ring.histogram("e2e_probe_latency")
                counter = try ring.counter("e2e_probe")
                gauge = try ring.gauge("e2e_probe_level")
            } catch { throw BenchError("attaching ring probe in \(directory): \(error)") }
            return {
                // A record, an increment or a set in turn, at random moments (0 to 2 ms apart, so
                // their phase against the publishing is uniform), while watching the snapshot: when
                // a kind's figure grows from a to b, its calls a+1...b became visible now. The
                // gauge is set to how many sets it has had.
                let kinds = Self.endToEndKinds
                var samples = [[UInt64]](repeating: [], count: kinds.count)
                var sentAt = [[UInt64]](repeating: [], count: kinds.count)
                var random: UInt64 = 0x2545_F491_4F6C_DD1D
                func figure(_ kind: Int) -> Double? {
                    let series = collector.snapshot.series.first { $0.ring == "probe" && $0.metric.name == Self.endToEndMetrics[kind] }
                    guard let series else { return nil }
                    switch kind {
                    case 0: return Double(series.cumulativeCount)
                    case 1: return series.cumulativeSum
                    default: return series.lastValue ?? 0
                    }
                }
                // Until the collector has found the ring and its metrics.
                latency.record(1)
                gauge.set(0)
                while kinds.indices.contains(where: { figure($0) == nil }) && !stop.isSet { System.nanosleep(20_000) }
                let base = kinds.indices.map { Int(figure($0) ?? 0) }  // the figures before the first timed call
                var seen = [Int](repeating: 0, count: kinds.count)
                var turn = 0
                var nextSend = rs_clock_precise_ns()
                while !stop.isSet {
                    let now = rs_clock_precise_ns()
                    if now >= nextSend {
                        let kind = turn % kinds.count
                        turn += 1
                        sentAt[kind].append(rs_clock_precise_ns())
                        switch kind {
                        case 0: latency.record(2)
                        case 1: counter.increment()
                        default: gauge.set(Double(sentAt[kind].count))
                        }
                        random ^= random << 13
                        random ^= random >> 7
                        random ^= random << 17
                        nextSend = now + random % 2_000_000
                    }
                    for kind in kinds.indices {
                        let visible = min(Int(figure(kind) ?? 0) - base[kind], sentAt[kind].count)
                        if visible > seen[kind] {
                            let at = rs_clock_precise_ns()
                            for index in seen[kind]..<visible { samples[kind].append(at &- sentAt[kind][index]) }
                            seen[kind] = visible
                        }
                    }
                    System.nanosleep(20_000)
                }
                _ = ring
                return samples
            }
        }
        let threadsBefore = ProcessInfoReader.threadIDs()
        collector.start()
        defer { collector.stop() }
        load.start()
        probe.start()
        // Let the collector find the rings and settle.
        System.nanosleep(300_000_000)
        // The drain thread by name if the platform names threads, else the busiest thread that
        // Collector.start() made.
        let drainThread =
            ProcessInfoReader.threadID(named: "ringside-drain")
            ?? ProcessInfoReader.threadIDs().subtracting(threadsBefore)
            .max { (ProcessInfoReader.threadCPUNanos($0) ?? 0) < (ProcessInfoReader.threadCPUNanos($1) ?? 0) }
        guard let drainThread else {
            stop.set()
            _ = try? load.join()
            _ = try? probe.join()
            throw BenchError("could not find the collector's drain thread in /proc/self/task")
        }
        let cpuBefore = ProcessInfoReader.threadCPUNanos(drainThread) ?? 0
        let wallBefore = rs_clock_precise_ns()
        let liveNanos = UInt64(max(1.5, settings.seconds * 2) * 1e9)
        System.nanosleep(liveNanos)
        let cpuAfter = ProcessInfoReader.threadCPUNanos(drainThread) ?? 0
        let wallAfter = rs_clock_precise_ns()
        let rss = ProcessInfoReader.statusMegabytes("VmRSS")
        let rssAnon = ProcessInfoReader.statusMegabytes("RssAnon")
        stop.set()
        let loaded = try load.join()
        let samples = try probe.join().map { $0.sorted() }
        return LiveResult(
            endToEnd: zip(endToEndKinds, samples).map { kind, sorted in
                CollectorReport.EndToEnd(
                    kind: kind, p50Micros: Double(Percentiles.value(at: 0.5, sorted: sorted)) / 1000,
                    p99Micros: Double(Percentiles.value(at: 0.99, sorted: sorted)) / 1000, samples: sorted.count)
            },
            cpuPercent: Double(cpuAfter &- cpuBefore) / Double(wallAfter &- wallBefore) * 100,
            loadRate: loaded.rate, loadDropped: loaded.dropped, rss: rss, rssAnon: rssAnon)
    }
}

/// The metrics a benchmark producer writes: 4 histograms, 2 counters and a gauge, mixed
/// 60 / 30 / 10 by `write(i)`.
struct MetricMix {
    let histograms: [Bot.Histogram]
    let counters: [Bot.Counter]
    let gauge: Bot.Gauge
    let values = LatencyValues()
    /// Which of the values are written (`values[i & valueMask]`): all 4,096 (about 800 buckets
    /// a histogram), or with `narrowValueMask` the first 256 (64 a histogram, each its own bucket
    /// at most: a narrow distribution).
    let valueMask: Int
    static let narrowValueMask = 255

    init(_ ring: Bot, valueMask: Int = LatencyValues.count - 1) throws(RingError) {
        self.valueMask = valueMask
        var histograms: [Bot.Histogram] = []
        for symbol in ["AAPL", "MSFT", "NVDA", "TSLA"] {
            histograms.append(try ring.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": symbol]))
        }
        self.histograms = histograms
        counters = [try ring.counter("orders", labels: ["side": "buy"]), try ring.counter("orders", labels: ["side": "sell"])]
        gauge = try ring.gauge("gross_exposure")
    }

    @inline(__always)
    func write(_ i: Int) {
        switch i % 10 {
        case 0..<6: histograms[i & 3].record(values[i & valueMask])
        case 6..<9: counters[i & 1].increment()
        default: gauge.set(Double(values[i]))
        }
    }
}

/// A thread that sets itself up (which may fail), runs a body on `start()`, and hands its
/// result back on `join()`.
final class BackgroundThread<Result>: @unchecked Sendable {
    // @unchecked: `result` and `failure` are written by the thread before it signals, read after.
    private let go = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private var result: Result?
    private var failure: BenchError?

    init(name: String, cpu: Int32, _ setUp: @escaping @Sendable () throws(BenchError) -> (() -> Result)) throws(BenchError) {
        let thread = Thread { [self] in
            if cpu >= 0 { _ = rsb_pin_current_thread(cpu) }
            let body: () -> Result
            do throws(BenchError) { body = try setUp() } catch {
                failure = error
                done.signal()
                return
            }
            done.signal()
            go.wait()
            result = body()
            done.signal()
        }
        thread.name = name
        thread.start()
        done.wait()
        if let failure { throw failure }
    }

    func start() { go.signal() }

    func join() throws(BenchError) -> Result {
        done.wait()
        if let failure { throw failure }
        return result!
    }
}

/// A flag one thread sets and others poll.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .acquiring) }
    func set() { flag.store(true, ordering: .releasing) }
}
