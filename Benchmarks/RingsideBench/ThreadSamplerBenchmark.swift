import CRingside
import Dispatch
import Foundation
import Ringside
import RingsideCollector
import RingsideSystem
import Synchronization

/// `ringside-bench collector`'s thread-sampler rows: what the collector's `ThreadHealthSampler`
/// costs, in CPU a second, with 2,000 lanes held by live threads (20 bots of 100 threads, in this
/// process), sampled at the default interval. Two kinds of threads: idle ones, which block once
/// they hold their lane (only their schedstat is read), and waking ones, which sleep 250 ms and
/// record, so every thread ran since each round (stat and status are read too, within the
/// sampler's budget).
enum ThreadSamplerBenchmark {
    static let bots = 20
    static let threadsPerBot = 100
    static var lanes: Int { bots * threadsPerBot }

    static func run(
        _ settings: BenchSettings, directory: String, waking: Bool, progress: (String) -> Void
    ) throws(BenchError) -> CollectorReport.ThreadSampling {
        let threads = try LaneThreads(bots: bots, threadsPerBot: threadsPerBot, directory: directory, waking: waking)
        defer { threads.stop() }
        var options = CollectorBenchmark.options(directory: directory)
        options.threadSampleIntervalNanos = 1_000_000_000
        let collector = try CollectorBenchmark.collector(options)
        collector.start()
        defer { collector.stop() }
        // Until every lane is in a snapshot and a round has read every thread once (which opens
        // their files: the steady state is what is measured).
        let settled = rs_clock_precise_ns() + 60_000_000_000
        var sampledAll = false
        while !sampledAll && rs_clock_precise_ns() < settled {
            System.nanosleep(100_000_000)
            let snapshot = collector.snapshot
            let active = snapshot.rings.reduce(0) { $0 + $1.lanes.count { $0.state == .active } }
            sampledAll = active == lanes && (snapshot.threadHealth?.figures.threads ?? 0) == lanes
        }
        guard sampledAll else {
            throw BenchError(
                "the sampler did not read \(lanes) lane threads within 60 s: \(collector.snapshot.threadHealth?.figures.threads ?? 0)")
        }
        System.nanosleep(1_500_000_000)  // a round past the first
        guard let sampler = ProcessInfoReader.threadID(named: "ringside-sample") else {
            throw BenchError("could not find the sampler's thread (ringside-sample) in /proc/self/task")
        }
        progress("thread sampler, \(waking ? "waking" : "idle") threads: measuring")
        let cpuBefore = ProcessInfoReader.threadCPUNanos(sampler) ?? 0
        let roundsBefore = collector.snapshot.threadHealth?.sequence ?? 0
        let wallBefore = rs_clock_precise_ns()
        var deferredMost = 0
        let measureNanos = UInt64(max(5, settings.seconds * 3) * 1e9)
        while rs_clock_precise_ns() &- wallBefore < measureNanos {
            System.nanosleep(250_000_000)
            deferredMost = max(deferredMost, collector.snapshot.threadHealth?.figures.deferred ?? 0)
        }
        let cpuAfter = ProcessInfoReader.threadCPUNanos(sampler) ?? 0
        let wallAfter = rs_clock_precise_ns()
        let last = collector.snapshot.threadHealth
        return CollectorReport.ThreadSampling(
            name: "thread_sampler.\(lanes)lanes.\(waking ? "waking" : "idle")", lanes: lanes, processes: last?.figures.processes ?? 0,
            cpuPercent: Double(cpuAfter &- cpuBefore) / Double(wallAfter &- wallBefore) * 100,
            rounds: Int((last?.sequence ?? 0) &- roundsBefore), deferredMost: deferredMost,
            keptDescriptors: last?.figures.keptDescriptors ?? 0, keptDescriptorLimit: last?.figures.keptDescriptorLimit ?? 0)
    }
}

/// `bots` bots with `threadsPerBot` threads each, every thread holding a lane (it recorded
/// once): blocked until `stop`, or, `waking`, recording every 250 ms.
private final class LaneThreads: Sendable {
    private let stopFlag = StopFlag()
    private let release = DispatchSemaphore(value: 0)
    private let finished = DispatchGroup()
    private let count: Int
    private let waking: Bool

    init(bots: Int, threadsPerBot: Int, directory: String, waking: Bool) throws(BenchError) {
        count = bots * threadsPerBot
        self.waking = waking
        var histograms: [Bot.Histogram] = []
        do {
            for index in 0..<bots {
                let bot = try Bot.attach(
                    "threads-\(index)", directory: directory, options: .init(laneCapacity: 1024, maxLanes: threadsPerBot))
                histograms.append(try bot.histogram("wake_count"))
            }
        } catch { throw BenchError("attaching \(bots) bots of \(threadsPerBot) lanes in \(directory): \(error)") }
        let holding = DispatchGroup()
        for index in 0..<count {
            let values = histograms[index / threadsPerBot]
            holding.enter()
            finished.enter()
            let thread = Thread { [self] in
                values.record(1)  // holds a lane from now on
                holding.leave()
                if waking {
                    var wakes: UInt64 = 1
                    while !stopFlag.isSet {
                        System.nanosleep(250_000_000)
                        wakes += 1
                        values.record(wakes)
                    }
                } else {
                    release.wait()
                }
                finished.leave()
            }
            thread.name = "lane-\(index)"
            thread.stackSize = 256 << 10
            thread.start()
        }
        holding.wait()
    }

    /// Ends every thread (their lanes retire as they exit).
    func stop() {
        stopFlag.set()
        for _ in 0..<count { release.signal() }
        finished.wait()
    }
}
