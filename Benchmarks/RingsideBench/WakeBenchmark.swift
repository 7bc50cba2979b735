import CRingside
import Foundation
import Ringside
import RingsideCommandLine
import RingsideSystem
import RingsideTestSupport

/// `ringside-bench wake`: what the doorbell (DOORBELL in ringside.h) changes against the poll, each
/// row measured with it and without it in one run, beside a real `ringside-collector` at its
/// defaults (built beside the benchmark):
/// - `wake.*`: from an idle collector, one record written at a random moment after it fell asleep,
///   timed until the drain has it and until `/latest` shows it;
/// - `idle.2000bots`: the collector's CPU, thread by thread, with 2,000 attached bots that write
///   nothing (`WakeBenchmark+Idle.swift`);
/// - `start.*`: a lane that starts writing after an idle spell, sampling off: what each start
///   drops (`WakeBenchmark+Starts.swift`).
/// A producer that does not ring is played by a bot that stores 0 in its file's `rings_doorbell`
/// (`Bot.sayDoesNotRing`), as a process that could not register for the barrier does.
package enum WakeBenchmark {
    /// The histogram every row's bots write.
    static let metric = "wake_probe"
    /// The tries of each `wake.*` row, the idle row's measured seconds, the starts of each `start.*` row.
    static func tries(_ settings: BenchSettings) -> Int { max(10, Int(settings.seconds * 100)) }
    static func idleSeconds(_ settings: BenchSettings) -> Double { max(2, settings.seconds * 5) }
    static func starts(_ settings: BenchSettings) -> Int { max(4, Int(settings.seconds * 12)) }

    /// The groups of rows `--row` may name.
    package static let rowGroups = ["wake", "idle", "start"]

    /// Runs the groups of rows named in `only` (every group when it names none of them).
    package static func run(
        _ settings: BenchSettings, only: Set<String> = [], progress: (String) -> Void = { _ in }
    ) throws(BenchError) -> WakeReport {
        let groups = only.isDisjoint(with: rowGroups) ? Set(rowGroups) : only
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let loadBefore = GapBenchmark.loadAverage()
        var wakes: [WakeReport.WakeRow] = []
        var starts: [WakeReport.StartRow] = []
        var idle: [WakeReport.IdleRow] = []
        if groups.contains("wake") {
            progress("wake: \(tries(settings)) records from an idle collector, with the doorbell and with the poll")
            wakes = try wakeRows(settings, directory: try scratch.subdirectory("wake"), scratch: scratch)
        }
        if groups.contains("start") {
            progress("wake: lanes starting after an idle spell, \(Self.starts(settings)) starts each")
            starts = try startRows(settings, directory: try scratch.subdirectory("starts"), scratch: scratch)
        }
        if groups.contains("idle") {
            progress("wake: 2,000 idle bots, \(Int(idleSeconds(settings))) s")
            idle = try idleRow(settings, directory: try scratch.subdirectory("idle"), scratch: scratch)
        }
        let collectorText =
            "A ringside-collector process at its defaults (--poll \(formatDuration(settings.collectorPollNanos)), "
            + "the thread sampler, the history), its bots attached by this process; `poll` rows: the bot stores 0 in "
            + "its file's rings_doorbell after attaching (as a producer that could not register for the barrier, or of "
            + "an earlier revision: the collector sets no doorbell for it and drains it at its poll), `doorbell` rows: "
            + "it rings. "
        let wakeText =
            "wake.*: one record at a time, each row \(tries(settings)) tries, the two rows in turn; before each a pause "
            + "of 0 to 100 ms at random after the last was shown (its phase against the poll uniform), and for the "
            + "doorbell row until the bot's doorbell word is set and the drain thread has just begun a sleep (waits in ppoll, and ran since: the collector announced its sleep and sleeps), then the record; "
            + "drained = until the lane's read cursor passes it (the drain stores it once the record is aggregated "
            + "into its series: the cheapest honest point, read by this process every 20 µs, sleeping between: a spinning reader would take one of the CPUs the collector's threads wake on); "
            + "/latest = from then, until GET /latest (asked again a ms after each answer) shows the series' total_count moved (the answer's arrival), timed from the record. "
        let loadText = "Load average (1 min) \(loadBefore) before, \(GapBenchmark.loadAverage()) after: other processes shared the machine."
        let method: String =
            collectorText + wakeText + WakeReport.latestPace(settings.collectorPollNanos) + idleMethod(settings)
            + startsMethod(settings) + loadText
        return WakeReport(machine: Machine.current(pinned: false), method: method, wakes: wakes, idle: idle, starts: starts)
    }

    /// Starts a ringside-collector over `directory` at its defaults, killed with `scratch`.
    static func startDaemon(
        _ settings: BenchSettings, directory: String, scratch: ScratchDirectory
    ) throws(BenchError) -> WakeCollector {
        let collector: WakeCollector
        do {
            let (process, port) = try startCollector(["--dir", directory, "--poll", "\(settings.collectorPollNanos / 1_000_000)ms"])
            collector = WakeCollector(process: process, port: port)
        } catch {
            throw BenchError("starting ringside-collector (build it beside ringside-bench: swift build -c release): \(error)")
        }
        ScaleBenchmark.keep(collector.process, in: scratch)
        return collector
    }

    // MARK: - wake.*

    static func wakeRows(
        _ settings: BenchSettings, directory: String, scratch: ScratchDirectory
    ) throws(BenchError) -> [WakeReport.WakeRow] {
        let collector = try startDaemon(settings, directory: directory, scratch: scratch)
        defer { ScaleBenchmark.stop(collector.process, in: scratch) }
        let bots = try attachPair(["bell", "poll"], directory: directory, options: .init(laneCapacity: 1_024))
        var rows = [WakeReport.WakeRow(name: "wake.doorbell"), WakeReport.WakeRow(name: "wake.poll")]
        var shown = [0, 0]
        for index in bots.indices {
            bots[index].histogram.record(1)  // the thread's lane
            shown[index] = 1
            try collector.waitForCount(ring: index == 0 ? "bell" : "poll", atLeast: 1)
        }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<tries(settings) {
            for index in bots.indices {
                System.nanosleep(UInt64.random(in: 0..<100_000_000, using: &random))
                let (bot, histogram) = bots[index]
                if index == 0 { try waitForSleep(bot, collector: collector) }
                shown[index] += 1
                rows[index].tries.append(
                    try timeOneRecord(histogram, lane: bot.currentThreadLane, ring: bot.name, count: shown[index], collector: collector))
            }
        }
        return rows
    }

    /// Two bots with `metric`'s histogram: the first rings, the second says it does not.
    static func attachPair(
        _ names: [String], directory: String, options: Bot.Options
    ) throws(BenchError) -> [(bot: Bot, histogram: Bot.Histogram)] {
        var bots: [(bot: Bot, histogram: Bot.Histogram)] = []
        for name in names {
            do {
                let bot = try Bot.attach(name, directory: directory, options: options)
                bots.append((bot, try bot.histogram(metric)))
            } catch { throw BenchError("attaching bot \(name) in \(directory): \(error)") }
        }
        bots[1].bot.sayDoesNotRing()
        return bots
    }

    /// Until the bot's doorbell is set and the drain thread has just begun a sleep (it waits in
    /// `ppoll`, and has run since this began): the record comes as an idle collector's first. A
    /// doorbell stays set across the drain's wakes, so the word alone would let it come at any
    /// moment, mid-pass or mid-publish too, and wait for them (`wake.doorbell.drained`'s tail).
    static func waitForSleep(_ bot: Bot, collector: WakeCollector) throws(BenchError) {
        let deadline = rs_clock_precise_ns() + 10_000_000_000
        let ranBefore = collector.drainSleep()?.timeslices
        while !bot.doorbellIsSet || collector.drainSleep().map({ !$0.inPoll || $0.timeslices == ranBefore }) ?? true {
            guard rs_clock_precise_ns() < deadline else {
                throw BenchError("the collector set no doorbell for bot \(bot.name) within 10 s (does the kernel have membarrier?)")
            }
            System.nanosleep(50_000)
        }
    }

    /// Writes one record and times it until the drain has it, then until /latest shows it. The two
    /// are watched one after the other: a GET of /latest takes most of a millisecond, and the
    /// cursor, looked at only between two, would be seen that much late.
    static func timeOneRecord(
        _ histogram: Bot.Histogram, lane: Bot.Lane, ring: String, count: Int, collector: WakeCollector
    ) throws(BenchError) -> WakeReport.Try {
        let capacity = lane.freeSlots  // the lane is drained: every slot free
        let start = rs_clock_precise_ns()
        histogram.record(UInt64(count))
        let deadline = start + 10_000_000_000
        while lane.freeSlots != capacity {
            guard rs_clock_precise_ns() < deadline else { throw BenchError("bot \(ring)'s record \(count) was not drained within 10 s") }
            System.nanosleep(20_000)
        }
        let drained = rs_clock_precise_ns() &- start
        while try collector.totalCount(ring: ring) ?? 0 < count {
            guard rs_clock_precise_ns() < deadline else { throw BenchError("bot \(ring)'s record \(count) was not shown within 10 s") }
            System.nanosleep(1_000_000)
        }
        return WakeReport.Try(drainedNanos: drained, latestNanos: rs_clock_precise_ns() &- start)
    }
}

/// A ringside-collector process of the benchmark's, asked `/latest` and read in `/proc`.
struct WakeCollector {
    let process: ChildProcess
    let port: Int

    /// `/latest` parsed.
    func latest() throws(BenchError) -> [String: Any] {
        let answer: (status: Int, body: String)
        do { answer = try httpGet(port: port, path: "/latest", timeoutSeconds: 10) } catch { throw BenchError("GET /latest: \(error)") }
        guard answer.status == 200, let json = try? jsonObject(answer.body) else {
            throw BenchError("GET /latest: \(answer.status) \(answer.body.prefix(200))")
        }
        return json
    }

    /// `/latest`'s total_count of ring's `WakeBenchmark.metric` (nil: not shown yet).
    func totalCount(ring: String) throws(BenchError) -> Int? {
        let series = try latest()["series"] as? [[String: Any]] ?? []
        let found = series.first { $0["ring"] as? String == ring && $0["metric"] as? String == WakeBenchmark.metric }
        return found?["total_count"] as? Int
    }

    func waitForCount(ring: String, atLeast count: Int, seconds: Double = 30) throws(BenchError) {
        let deadline = rs_clock_precise_ns() + UInt64(seconds * 1e9)
        while try totalCount(ring: ring) ?? 0 < count {
            guard rs_clock_precise_ns() < deadline else { throw BenchError("bot \(ring) was not shown within \(Int(seconds)) s") }
            System.nanosleep(10_000_000)
        }
    }

    /// Whether the drain thread (`ringside-drain`) waits in `ppoll` (`/proc/PID/task/TID/syscall`,
    /// readable by its parent: the number of the system call it is blocked in), and the times it
    /// was given a CPU (`schedstat`'s third field); nil when they cannot be read.
    func drainSleep() -> (inPoll: Bool, timeslices: UInt64)? {
        guard let drain = threadCPU().first(where: { $0.name == "ringside-drain" }) else { return nil }
        let task = "/proc/\(process.pid)/task/\(drain.tid)"
        guard let syscall = try? String(contentsOfFile: "\(task)/syscall", encoding: .utf8),
            let stat = try? String(contentsOfFile: "\(task)/schedstat", encoding: .utf8),
            let third = stat.split(separator: " ").dropFirst(2).first,
            let timeslices = UInt64(third.trimmingCharacters(in: .whitespacesAndNewlines))
        else { return nil }
        #if arch(x86_64)
        let ppoll = 271
        #else
        let ppoll = 73  // the generic table's (arm64)
        #endif
        return (syscall.hasPrefix("\(ppoll) "), timeslices)
    }

    /// Each thread's id, name (`comm`) and CPU time (`schedstat`'s first field, in ns).
    func threadCPU() -> [(tid: Int, name: String, nanos: UInt64)] {
        let base = "/proc/\(process.pid)/task"
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []
        return tasks.compactMap { task in
            guard let tid = Int(task), let comm = try? String(contentsOfFile: "\(base)/\(task)/comm", encoding: .utf8),
                let stat = try? String(contentsOfFile: "\(base)/\(task)/schedstat", encoding: .utf8),
                let nanos = stat.split(separator: " ").first.flatMap({ UInt64($0) })
            else { return nil }
            return (tid, comm.trimmingCharacters(in: .whitespacesAndNewlines), nanos)
        }
    }
}
