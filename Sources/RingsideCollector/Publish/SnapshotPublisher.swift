import RingsideSnapshot
import CRingside
import Ringside
import RingsideAggregation

/// The collector's part that builds snapshots of every ring's series, judges the SLOs and
/// publishes them: as often as records arrive (at most every poll), a slice at a time so the
/// drain goes on meanwhile, and rarely when every ring is quiet. It reads the rings through
/// the feed the series offer (`SeriesFeed`), never the drain itself.
///
/// Touched by the drain thread only.
final class SnapshotPublisher<Feed: SeriesFeed> {
    private var options: CollectorOptions
    private let layout: WindowLayout
    private let log: CollectorLog
    /// What the log said of series: those that reached a ceiling, and each one's operator switches.
    private var logged = LoggedSeries()
    /// Gives the heap's free pages back once many series' windows were let go.
    private var heapTrim = HeapTrim()
    private let feed: Feed
    let published = PublishedSnapshot()
    private var pending: SnapshotBuild<Feed.Ring>?
    private var generation: UInt64 = 0
    private var seriesVersions = VersionCounter()
    private var judge: SLOJudge
    /// Something changed since the last snapshot began.
    private var hasChanges = false
    /// When the publisher last began, and what that took.
    private var pace = PublishPace()
    /// Whether the last publish found every ring quiet (all windows empty, nothing drained, no cell changed).
    private var everyRingWasQuiet = false

    /// Heap trims started (see `HeapTrim`).
    var heapTrims: Int { heapTrim.trims }

    /// The most time one pass spends building a snapshot.
    static var sliceNanos: UInt64 { 10_000_000 }
    /// Windows slide even when nothing arrives: publish at least this often.
    static var idleRefreshNanos: UInt64 { 250_000_000 }
    /// With every ring quiet (all windows empty, nothing drained, no cell changed), a full publish
    /// is made this often (ages move on), which samples the rings' cells and registries (or as
    /// `CellSamplingPace` allows). Any change (records, cells, a producer's death or stop)
    /// publishes at once. A counter's increment moves its lane's `cell_writes` and rings (the
    /// drain looks at its cells then): this sampling is for what moves neither (an increment by a
    /// thread without a lane, a clamp, an operator's switch, a metric registered but not yet
    /// written), seen within it. Over 2,000 idle bots each publish costs as much as the drain's
    /// wakes between; sampling them every 5 s besides cost a sixth of the idle drain.
    static var quietRefreshNanos: UInt64 { 10_000_000_000 }

    init(options: CollectorOptions, layout: WindowLayout, log: CollectorLog, feed: Feed, captureDesk: CaptureDesk? = nil) {
        self.options = options
        self.layout = layout
        self.log = log
        self.feed = feed
        judge = SLOJudge(options: options, layout: layout, log: log, captureDesk: captureDesk)
    }

    /// Takes a reload's SLO rules and quantiles from the next snapshot on: a rule that stays
    /// keeps its state (its violations, an availability's counts), a new one starts afresh.
    func reconfigure(sloRules: [SLORule], quantiles: [Double]) {
        judge.reconfigure(sloRules: sloRules)
        options.sloRules = sloRules
        options.quantiles = quantiles
        hasChanges = true
    }

    /// Snapshots are published at most this often while records arrive (publishing costs a
    /// pass over every series): at most one poll interval, so a record is visible within one;
    /// but never sooner than the pace's spacing (`PublishPace.spacingNanos`).
    private var intervalNanos: UInt64 {
        max(min(max(options.pollNanos, 10_000_000), 100_000_000), pace.spacingNanos)
    }

    /// How long the drain loop may sleep for the publisher's sake: not at all with a snapshot
    /// half built; else until the next is due when something changed.
    func sleepNanos(nowNanos now: UInt64) -> UInt64 {
        if pending != nil { return 0 }
        guard hasChanges else { return .max }
        let due = pace.begunNanos &+ intervalNanos
        return due > now ? due - now : 0
    }

    /// After each pass: begins a snapshot when one is due (`changed`: the pass found something
    /// new; `mayBegin`: the pass reached every ring it meant to), and builds a slice of the one
    /// pending. A `forced` publish (at stop, or a test stepping time) begins afresh and finishes now.
    func afterPass(nowNanos now: UInt64, changed: Bool, mayBegin: Bool, forced: Bool, stats: CollectorStats) {
        if changed { hasChanges = true }
        let sinceLast = now &- pace.begunNanos
        if forced
            || (mayBegin
                && (pace.begunNanos == 0 || (hasChanges && sinceLast >= intervalNanos)
                    || sinceLast >= max(Self.idleRefreshNanos, pace.spacingNanos)))
        {
            if !forced, !hasChanges, everyRingWasQuiet, sinceLast < Self.quietRefreshNanos {
                // Every ring quiet, nothing new: windows have nothing to slide, so only the
                // collector's own figures (the pass /health looks at) are brought up to date.
                published.update(stats, currentRealtimeNanos: rs_clock_realtime_ns())
            } else if forced || pending == nil {
                pending = SnapshotBuild(
                    snapshot: startSnapshot(), rings: feed.everyRing,
                    showing: RingShowing(forced: forced, cellSampleNanos: feed.cellSampleIntervalNanos()))
                pace.begunNanos = now
                hasChanges = false  // what changes from now on goes in the next one
            }
        }
        if pending != nil {
            // A slice at a time, so the passes between drain every ring and keep /health fresh.
            continuePublish(nowNanos: now, until: forced ? .max : rs_clock_precise_ns() &+ Self.sliceNanos, stats: stats)
        }
        heapTrim.note(letGo: 0, nowNanos: now)
    }

    /// A new, empty snapshot with the next generation.
    private func startSnapshot() -> Snapshot {
        var snapshot = Snapshot()
        generation += 1
        snapshot.generation = generation
        snapshot.generatedRealtimeNanos = rs_clock_realtime_ns()
        snapshot.currentRealtimeNanos = snapshot.generatedRealtimeNanos
        snapshot.windowNanos = options.windowNanos
        snapshot.quantiles = options.quantiles
        snapshot.nativeHistogramSchema = options.nativeHistogramSchema
        return snapshot
    }

    /// Adds rings to the pending snapshot until `deadline` (CLOCK_MONOTONIC), then their bots'
    /// series, and publishes it once every one is in.
    private func continuePublish(nowNanos now: UInt64, until deadline: UInt64, stats: CollectorStats) {
        guard var building = pending else { return }
        pending = nil
        let sliceStart = rs_clock_precise_ns()
        while let ring = building.nextRing() {
            // A ring let go since the snapshot began is left out.
            if feed.holds(ring) { show(ring, in: &building, nowNanos: now) }
            if building.ringsDone { building.showBots(feed.botsToShow(of: building.rings)) }
            if rs_clock_precise_ns() >= deadline { break }
        }
        while rs_clock_precise_ns() < deadline, let bot = building.nextBot() {
            let quiet = addSeries(of: bot, to: &building, nowNanos: now)
            building.everyRingQuiet = building.everyRingQuiet && quiet  // a bot is the unit: it may hold 4,096 series
        }
        building.costNanos &+= rs_clock_precise_ns() &- sliceStart
        guard building.isComplete else {
            pending = building
            return
        }
        publish(building, nowNanos: now, stats: stats)
    }

    /// Shows one ring in the snapshot `building`: its figures, its cells and registry sampled
    /// when due (admitting new metrics while the snapshot's budget for them lasts).
    private func show(_ ring: Feed.Ring, in building: inout SnapshotBuild<Feed.Ring>, nowNanos now: UInt64) {
        let start = rs_clock_precise_ns()
        var showing = building.showing
        showing.admitting = building.newSeries.mayAdmit(within: options.newSeriesNanos)
        let shown = feed.show(ring, nowNanos: now, showing)
        building.snapshot.rings.append(shown.snapshot)
        building.newSeries.shownRing(admitting: showing.admitting, added: shown.added, nanos: rs_clock_precise_ns() &- start)
        building.everyRingQuiet = building.everyRingQuiet && shown.quiet
    }

    /// Publishes the snapshot `building`, complete: the refused files, the SLOs judged, the
    /// collector's own figures.
    private func publish(_ building: SnapshotBuild<Feed.Ring>, nowNanos now: UInt64, stats: CollectorStats) {
        var snapshot = building.snapshot
        (snapshot.monotonicNanos, snapshot.tickNanos) = (now, layout.tickNanos)  // a histogram's rate is read at that time
        // The files discovery refused (as it last showed them), within its limit.
        snapshot.rings += feed.refusedFiles
        // Where other users' files are read, each file's series say whose it is.
        if !options.allowedUIDs.isEmpty {
            for index in snapshot.rings.indices { snapshot.rings[index].showsOwner = true }
        }
        everyRingWasQuiet = building.everyRingQuiet
        // Series left out, and registries not read, are the next snapshot's, due as any change is.
        let awaiting = building.newSeries.awaitingFigures
        if awaiting > 0 || building.newSeries.registriesUnread { hasChanges = true }
        let (bots, startSettled) = feed.botsToJudge()
        snapshot.slos = judge.judge(bots: bots, startSettled: startSettled, nowNanos: now)
        var stats = stats
        // Kept: those on the page and those whose first figures wait for the next snapshot.
        stats.snapshotBuild.series = snapshot.series.count + awaiting
        stats.snapshotBuild.seriesAwaitingFigures = awaiting
        stats.snapshotBuild.seriesLimit = options.maxSeries
        stats.snapshotBuild.seriesLimitPerRing = options.maxSeriesPerRing
        (stats.snapshotBuild.seriesBytes, stats.snapshotBuild.seriesSaturated) = feed.seriesFigures()
        stats.snapshotBuild.seriesBytesLimit = options.maxSeriesBytes
        stats.snapshotBuild.seconds = Double(building.costNanos) / 1e9
        snapshot.collector = stats
        pace.published(nowNanos: now, costNanos: building.costNanos)
        published.publish(&snapshot)
        heapTrim.note(letGo: building.windowsLetGo, nowNanos: now)
    }

    /// Adds a bot's series to the snapshot `building`: what it showed, when nothing changed
    /// since and none of its series' figures moved yet (`Shown.untilNanos`: a million series
    /// whose values wait to leave the minute window cost little meanwhile); returns whether the bot
    /// is quiet (every window empty). Its series never shown are left out when the snapshot has
    /// spent its time on new series (`mayShowFirst`); a bot whose only change is such series then
    /// shows what it showed, not walked again to leave them out again.
    private func addSeries(of bot: BotSeries, to building: inout SnapshotBuild<Feed.Ring>, nowNanos now: UInt64) -> Bool {
        if !bot.changedSincePublish, let shown = bot.shown, now < shown.untilNanos,
            shown.awaitingFigures == 0 || !building.newSeries.mayShowFirst(within: options.newSeriesNanos)
        {
            building.snapshot.series.append(part: shown.series)
            building.newSeries.madeSeries(shownFirst: 0, nanos: 0, leftOut: shown.awaitingFigures)
            return shown.isQuiet
        }
        let start = rs_clock_precise_ns()
        let series = bot.aggregator.snapshots(
            nowNanos: now, quantiles: options.quantiles, versions: &seriesVersions,
            firstFigures: building.newSeries.mayShowFirst(within: options.newSeriesNanos))
        let leftOut = bot.aggregator.seriesAwaitingFigures
        building.newSeries.madeSeries(
            shownFirst: bot.aggregator.seriesShownFirst, nanos: rs_clock_precise_ns() &- start, leftOut: leftOut)
        building.windowsLetGo += bot.aggregator.takeWindowsLetGo()
        building.snapshot.series.append(part: series)
        for metric in bot.aggregator.takeNewlySaturated() { saySaturated(metric, of: bot.name) }
        for one in series where one.control != logged.control(of: one.id) { sayControl(of: one, bot: bot.name) }
        bot.shown = BotSeries.Shown(series: series, untilNanos: bot.aggregator.seriesUnchangedUntilNanos, awaitingFigures: leftOut)
        bot.changedSincePublish = false
        return false
    }

    /// Says that the operator's switches of a series changed (CONTROL in ringside.h): off, on, or sampled.
    private func sayControl(of series: SeriesSnapshot, bot: String) {
        logged.controls[series.id] = series.control
        let labels = series.metric.labels.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
        let name = series.metric.name + (labels.isEmpty ? "" : "{" + labels + "}")
        let state =
            series.control & RS_CONTROL_BOT_OFF != 0
            ? "off (the bot is switched off)"
            : series.control & RS_CONTROL_OFF != 0
                ? "off (switched off)"
                : series.metric.kind == .histogram && series.controlSampleEvery > 1
                    ? "recording, 1 call in \(series.controlSampleEvery) written (the others counted, summed and their largest kept)"
                    : "recording as registered"
        log("bot \(bot): series \(name): \(state), by the operator's control (ringside-dump control)")
    }

    /// Says once that a series' total reached its ceiling (once a run: its bot may go and come again).
    private func saySaturated(_ metric: MetricDescriptor, of bot: String) {
        guard logged.saturated.insert([bot, metric.name, metric.encodedLabels]).inserted else { return }
        let labels = metric.labels.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
        log(
            "bot \(bot): series \(metric.name)\(labels.isEmpty ? "" : "{" + labels + "}") reached its ceiling (a count or total "
                + "of 2^64 - 1, or a sum of 2^128 - 1) and stays there: it never goes back, and what comes beyond is not added "
                + "to it (counted in ringside_collector_series_saturated)", level: .warn)
    }
}

/// What the publisher said of series in the log, so it says each thing once: the series that
/// reached a ceiling (bot, metric, labels), and each series's operator switches as last said, by
/// series id (none: as registered).
struct LoggedSeries {
    var saturated: Set<[String]> = []
    var controls: [UInt64: UInt32] = [:]

    /// The switches last said of series `id` (0, as registered, when none was said).
    func control(of id: UInt64) -> UInt32 { controls.isEmpty ? 0 : controls[id] ?? 0 }
}
