import RingsideExport
import RingsideSnapshot
import CRingside
import Dispatch
import Foundation
import Ringside
import RingsideAggregation
import RingsideSystem
import Synchronization

/// Finds rings, drains them on a thread of its own, aggregates their records into windowed
/// series, judges the SLO rules, and publishes a `Snapshot` for the exporters.
///
/// Three parts, each with one duty, run in turn in each pass on the drain thread: the
/// `RingTracker` (which rings there are, their producers, quarantine, the series caps), the
/// `DrainScheduler` (which rings a pass drains, in what order, and how long to sleep) and the
/// `SnapshotPublisher` (snapshots and SLOs). `RingDiscovery` finds and opens ring files on a
/// thread of its own, below every other, and hands them to the tracker through a
/// `DiscoveryHandoff`: however many files the directory holds, the drain does not look at them.
/// Other threads read only what is published (`published`), so an HTTP client can never stall
/// a drain. `runPass` does one pass on the caller's thread, discovery's round with it, for tests
/// that want to step time themselves.
// @unchecked: the parts are touched by the drain thread only, or by the thread that calls
// `stop` once the drain thread has finished (`PartThread.stop` waits for it); discovery by its own
// thread, or in `runPass` when that is not started; what others read is `published`.
package final class Collector: @unchecked Sendable {
    package let options: CollectorOptions
    private let tracker: RingTracker
    private let scheduler: DrainScheduler
    private let publisher: SnapshotPublisher<RingTracker>
    private let discovery: RingDiscovery
    /// Reads the lane threads' scheduling from `/proc` on a thread of its own (nil with
    /// `--thread-sample-interval 0`); tests step it with `sampleRound()`.
    package let threadSampler: ThreadHealthSampler?
    /// Captures of the recorder's records (nil without `--capture-dir`): the drain thread's part,
    /// and the desk where any thread asks for one.
    private let capturer: Capturer?
    package var captureDesk: CaptureDesk? { capturer?.desk }
    var captureDirectory: LogDirectory? { capturer?.writer.directory }
    private var stats = CollectorStats()
    /// The drain rate's last mark: when, and the records drained until then.
    private var rateMark: (nanos: UInt64, drained: UInt64) = (0, 0)
    /// SLO rules and quantiles a reload gave, for the drain thread to take at its next pass.
    private let pendingSettings = Locked<(sloRules: [SLORule], quantiles: [Double])?>(nil)
    /// The drain thread.
    private let loop = PartThread(name: "ringside-drain")
    /// What the drain thread sleeps under besides its poll: the producers' doorbells.
    private let doorbells: Doorbells
    /// `stop` began: its last pass leaves discovery out.
    private var stopping = false
    /// Descriptors kept for the HTTP server's connections and the process's own files (the
    /// listening socket, inotify, logs): the open-file limit less the rings the tracker may open.
    package let descriptorReserve: Int

    /// Makes a collector of `options.directory`, taking the directory's lock (see `DirectoryLock`):
    /// one collector per ring directory, since whatever collects it folds its workers and keeps
    /// their totals in its state. The lock is let go at `stop`, or when the collector goes.
    /// - Throws: `CollectorError.directoryHeld` when another collector (of this process or
    ///   another) holds the directory.
    package init(options: CollectorOptions, log: CollectorLog = .standardError) throws(CollectorError) {
        self.options = options
        let layout = WindowLayout(windowNanos: options.windowNanos)
        let sampling = options.threadSampleIntervalNanos > 0
        let budget = Self.descriptorBudget(afterRaising: true, sampling: sampling)
        let ringLimit = budget.rings
        descriptorReserve = budget.reserve
        let wakeup = DrainWakeup()
        let ringLog = RingLog(log)
        // Discovery's watch: names created, moved in or out, removed, written or chmodded.
        let discoveryWatch = DirectoryWatch(
            events: UInt32(IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_MODIFY | IN_ATTRIB))
        let drainWatch = wakeup.watch
        let handoff = DiscoveryHandoff(wakeDrain: { drainWatch.signal() }, wakeDiscovery: { discoveryWatch.signal() })
        discovery = RingDiscovery(
            options: options, log: log, handoff: handoff, watch: discoveryWatch, drainWakeup: wakeup,
            ringLimit: ringLimit)
        do {
            tracker = try RingTracker(
                options: options,
                makeAggregator: { bot in
                    BotAggregator(
                        ring: bot, layout: BotAggregator.layout(layout, forBot: bot), quantiles: options.quantiles.count,
                        exemplarSchema: options.nativeHistogramSchema ?? 0, pageBytes: PrometheusExporter.pageBytes)
                },
                log: log, ringLog: ringLog, wakeup: wakeup, handoff: handoff, ringLimit: ringLimit)
        } catch {
            throw .directoryHeld(directory: options.directory.path, reason: "\(error)")
        }
        scheduler = DrainScheduler(tracker: tracker)
        doorbells = Doorbells(log: log, wakeDrain: { drainWatch.signal() })
        // Captures: the desk where any thread asks for one (the publisher's SLOs and bounds, the
        // tracker's dying bots, HTTP), the drain thread's part, and the directory they go to.
        var capture: (desk: CaptureDesk, writer: CaptureWriter)?
        if let path = options.captureDirectory {
            _ = try? System.mkdir(path, mode: 0o755)  // made if missing; if it cannot be, opening it says why
            let directory: LogDirectory
            do {
                directory = try LogDirectory(path: path)
                try CaptureWriter.checkWritable(directory)
            } catch {
                throw .captureDirectory(path: path, reason: "\(error)")
            }
            capture = (
                CaptureDesk(minIntervalNanos: options.captureMinIntervalNanos),
                CaptureWriter(directory: directory, maxRecords: options.captureMaxRecords, program: "ringside-collector")
            )
            tracker.captureDesk = capture?.desk
        }
        let publisher = SnapshotPublisher(options: options, layout: layout, log: log, feed: tracker, captureDesk: capture?.desk)
        self.publisher = publisher
        let published = publisher.published
        capturer = capture.map { desk, writer in
            Capturer(
                desk: desk, writer: writer, beforeNanos: options.recorderNanos, afterNanos: options.captureAfterNanos,
                pollNanos: options.pollNanos, log: log, threadSample: { published.threadSample })
        }
        threadSampler =
            sampling
            ? ThreadHealthSampler(
                intervalNanos: options.threadSampleIntervalNanos, keptDescriptorLimit: budget.sampler, log: log,
                source: { published.snapshot }, publish: { published.attach($0) }) : nil
        stats.startedRealtimeNanos = tracker.startedRealtimeNanos
        stats.uid = geteuid()
    }

    /// Raises the soft limit on open files to the hard limit (per-thread lanes live in one file
    /// per bot, but a host may run thousands of bots), and splits it: how many rings may be open,
    /// the `/proc` files the thread sampler may keep open when `sampling` (an eighth, at most
    /// 8,192: three a thread), and the reserve for the HTTP server's connections and the
    /// process's own files (an eighth, at least 64).
    static func descriptorBudget(afterRaising raise: Bool, sampling: Bool) -> (rings: Int, sampler: Int, reserve: Int) {
        guard var limit = try? System.getrlimit(RLIMIT_NOFILE) else { return (1_000, 0, 64) }
        if raise, limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if (try? System.setrlimit(RLIMIT_NOFILE, raised)) != nil { limit = raised }
        }
        let soft = Int(min(limit.rlim_cur, rlim_t(Int32.max)))
        let reserve = max(64, soft / 8)
        let sampler = sampling ? min(Self.maxKeptProcFiles, soft / 8) : 0
        return (max(0, soft - reserve - sampler), sampler, min(reserve, soft))
    }

    /// The most `/proc` files the thread sampler keeps open: 2,730 threads' (three each), the
    /// rest read by opening their files each time.
    static let maxKeptProcFiles = 8_192

    /// CLOCK_REALTIME when the collector was made.
    var startedRealtimeNanos: UInt64 { stats.startedRealtimeNanos }

    /// What other threads read: the latest snapshot and the drain loop's progress.
    package var published: PublishedSnapshot { publisher.published }

    /// The latest snapshot (a copy; cheap, its arrays are shared).
    package var snapshot: Snapshot { published.snapshot }

    /// Every file of the first listing of the ring directory was taken up or refused: the
    /// snapshots from here on show every bot found at the start. Safe from any thread.
    package var startSettled: Bool { tracker.handoff.heldAtStart() == .none }

    /// Heap trims started after series let their windows go (see `HeapTrim`).
    var heapTrims: Int { publisher.heapTrims }

    // MARK: - The drain thread

    /// The scheduler slice the drain thread asks for: EEVDF's shortest (0: the kernel's default;
    /// `ringside-bench gap` compares them). Set before `start`.
    package var drainSliceNanos: UInt64 = 100_000

    /// Starts the drain thread, and discovery's.
    package func start() {
        precondition(!loop.isRunning, "the collector is already running")
        threadSampler?.start()
        discovery.start()
        doorbells.start()
        loop.startOrExit { [self] in
            // A short slice: waking, the drain takes the CPU from a thread of the default slice at
            // once rather than after that one's slice or the next tick (docs/operations.md has the
            // gaps with and without). A kernel before 6.12 ignores it.
            if drainSliceNanos > 0 { try? System.setThreadSlice(nanoseconds: drainSliceNanos) }
            while !loop.isStopping {
                let drained = runPass(nowNanos: rs_clock_precise_ns())
                // Busy rings are drained again at once; idle ones are looked at every poll, or
                // sooner, as each part asks (see `sleepNanos`), or when a ring's file is opened,
                // closed or grows a lane (inotify), or discovery found a ring.
                // The producers' doorbells wake it at their first write (see `Doorbells`).
                let now = rs_clock_precise_ns()
                if drained > 0 {
                    doorbells.noteDrained(nowNanos: now)
                    continue
                }
                let lanesPace = scheduler.sleepNanos()
                let asked = partsSleepNanos(nowNanos: now, lanesPaceNanos: lanesPace)
                let planned = min(asked, options.pollNanos)
                if let most = doorbells.announceSleep(
                    watch: scheduler.laneWatch, nowNanos: now, plannedSleepNanos: planned, lanesPaceNanos: lanesPace)
                {
                    // Every ring watched: none waits for the poll, so the drain sleeps longer.
                    let longest = doorbells.everyRingWatched ? max(options.pollNanos, DrainTiming.watchedSleepNanos) : options.pollNanos
                    let sleep = min(asked, longest, most)
                    _ = tracker.wakeup.wait(timeoutNanos: sleep, holds: tracker.holds(name:))
                    doorbells.wokeUp()
                }
            }
        }
    }

    /// Stops the drain thread after one last pass, and releases every ring: records not yet
    /// drained stay in their rings for the next collector.
    package func stop() {
        guard loop.isRunning else { return }
        threadSampler?.stop()
        stopping = true
        discovery.stop()
        loop.stop(waking: tracker.wakeup.signal)
        doorbells.stop()
        runPass(nowNanos: rs_clock_precise_ns(), forcePublish: true)
        // Every capture asked for is written, those still waiting for their seconds after with what
        // came until now, before the collector goes.
        if let capturer, let recorder = tracker.recorder {
            _ = capturer.pass(nowNanos: rs_clock_precise_ns(), recorder: recorder, flushing: true)
            capturer.writer.finish()
            _ = capturer.pass(nowNanos: rs_clock_precise_ns(), recorder: recorder)  // says what was written
        }
        tracker.closeState()  // saves the state, and lets go of the directory's lock
        tracker.releaseAll()
        scheduler.followRings()  // the watch lets go of the rings too (it holds their consumers)
    }

    /// How long the drain thread may sleep as its parts ask (the poll, or the doorbells, bound it
    /// too): the scheduler before the fastest-filling lane can fill (or not at all, rings not
    /// reached), the tracker while a bot was just attached, the publisher when a snapshot is due
    /// or half built. `lanesPaceNanos` is the scheduler's.
    private func partsSleepNanos(nowNanos now: UInt64, lanesPaceNanos: UInt64) -> UInt64 {
        min(
            lanesPaceNanos, tracker.sleepNanos(nowNanos: now), publisher.sleepNanos(nowNanos: now),
            capturer?.sleepNanos(nowNanos: now) ?? .max)
    }

    /// Takes a reload's SLO rules and quantiles: the drain thread applies them at its next pass
    /// (the publisher is its own), keeping the state of every rule that stays (its violations,
    /// an availability's counts). The windows and counters go on as they were.
    package func reconfigure(sloRules: [SLORule], quantiles: [Double]) {
        pendingSettings.withLock { $0 = (sloRules, quantiles) }
        tracker.wakeup.signal()
    }

    // MARK: - One pass

    /// Discovers rings (now and then), drains the rings due, and publishes a snapshot when one is due.
    /// - Parameter forcePublish: visit every ring whole and publish now (at stop, or a test stepping time).
    /// - Returns: the number of records drained.
    @discardableResult
    package func runPass(nowNanos now: UInt64, forcePublish: Bool = false) -> Int {
        let passStart = rs_clock_precise_ns()
        if let settings = pendingSettings.withLock({ pending in
            defer { pending = nil }
            return pending
        }) {
            publisher.reconfigure(sloRules: settings.sloRules, quantiles: settings.quantiles)
        }
        // No discovery thread (a test stepping time): its round, whole, here.
        let inline = !discovery.isRunning && !stopping
        if inline { discovery.round(nowNanos: now, whole: true) }
        let findings = tracker.beginPass(nowNanos: now, whole: inline || forcePublish)
        let pass = scheduler.run(nowNanos: now, sweep: findings.sweep, touched: findings.touched, forced: forcePublish)
        tracker.releaseDueRings(nowNanos: now)
        scheduler.followRings()  // rebuilt now if rings were released: the watch lets go of their files too
        tracker.tellDiscovery()
        var capturesChanged = false
        if let capturer, let recorder = tracker.recorder {
            capturesChanged = capturer.pass(nowNanos: now, recorder: recorder)
            stats.captures = capturer.figures
        }
        count(pass, startedNanos: passStart, nowNanos: now)
        let changed = pass.drained > 0 || pass.changed || tracker.takeRingsChanged() || capturesChanged
        publisher.afterPass(
            nowNanos: now, changed: changed, mayBegin: scheduler.mayPublish(nowNanos: now),
            forced: forcePublish, stats: stats)
        return pass.drained
    }

    /// Each bot's recorded records that may fall in `from...to` (see `Recorder`); empty with the
    /// recorder off. On the drain thread only (or the thread that steps `runPass`).
    package func recordedRecords(fromNanos from: UInt64, toNanos to: UInt64) -> [RecordedBot] {
        tracker.recorder?.records(fromNanos: from, toNanos: to) ?? []
    }

    /// The recorder's figures now (nil with it off), its span as of its last sweep: for
    /// benchmarks, on the thread that steps `runPass`.
    package var recorderFigures: RecorderStats? { tracker.recorder?.figures }

    /// Every gap the drain measured since the start (see `DrainGapFigures`): for benchmarks, read
    /// once the collector has stopped (or from the thread that steps `runPass`).
    package var drainGapsSinceStart: Histogram { scheduler.gaps.sinceStart }

    /// The collector's own figures after a pass.
    private func count(_ pass: DrainScheduler.Pass, startedNanos: UInt64, nowNanos now: UInt64) {
        stats.recordsDrained += UInt64(pass.drained)
        stats.passes += 1
        stats.lastPassMonotonicNanos = rs_clock_precise_ns()
        published.passed(atNanos: stats.lastPassMonotonicNanos)  // /health reads it on another thread
        stats.lastPassSeconds = Double(stats.lastPassMonotonicNanos &- startedNanos) / 1e9
        stats.doorbell = doorbells.figures
        if now &- rateMark.nanos >= 1_000_000_000 {
            if rateMark.nanos != 0 {
                stats.drainRate = Double(stats.recordsDrained - rateMark.drained) / (Double(now &- rateMark.nanos) / 1e9)
            }
            rateMark = (now, stats.recordsDrained)
            stats.drainGap = scheduler.gaps.figures(nowNanos: now)
        }
        stats.lagSeconds = tracker.lagSeconds
        stats.logLinesSuppressed = tracker.ringLog.suppressedTotal + discovery.refusalLog.suppressedTotal
        let shown = tracker.handoff.shown
        stats.ringsWaitingForDescriptors = shown.waitingForDescriptors
        stats.ringFilesRefused = shown.filesRefused
        stats.discoveryRescans = shown.rescans
        stats.discoveryOpens = shown.opens
        stats.state = tracker.stateStats
        if let recorder = tracker.recorder {
            recorder.sweep(nowNanos: now)
            stats.recorder = recorder.figures
        }
    }
}

/// Why a collector cannot be made.
package enum CollectorError: Error, Equatable, CustomStringConvertible {
    /// Another collector holds the ring directory (its lock, `ringside-collector.lock`).
    case directoryHeld(directory: String, reason: String)
    /// `--capture-dir` cannot be made or used.
    case captureDirectory(path: String, reason: String)

    package var description: String {
        switch self {
        case let .directoryHeld(directory, reason): "ring directory \(directory): \(reason)"
        case let .captureDirectory(path, reason): "--capture-dir \(path): \(reason)"
        }
    }
}
