import CRingside
import RingsideSnapshot
import Ringside
import RingsideAggregation

/// The series of one bot (one per metric and label set, its lanes and its files merged): it
/// drains the bot's files into them, samples their cells, slides their windows, produces their
/// snapshots and answers the SLOs' queries. It alone sees the series.
///
/// A bot is written by one file, or by several: its own and its workers' (`<bot>@<pid>`, see
/// WORKERS in ringside.h). Each file is a source, with a registry of its own: its metrics are
/// routed to the bot's series by name and labels, never by index. Counter totals and drops are
/// the sum over the sources, plus what sources that are gone left (folded in when a source is
/// removed), so a worker's exit never takes from a total. A gauge merges by the policy it
/// declared (`GaugeMerge`): the value set last, as the cells' sampling saw it; the sum, largest
/// or smallest of the live sources' values; or a series per source, labelled with its pid, which
/// goes with it.
///
/// Series live in one array per kind, mutated in place, so the drain loop's per-record work is
/// an index, two checks and one windowed update, with no reference counting. Every record is
/// untrusted: a metric index, kind or sequence that does not fit is counted as rejected. Counters
/// write no records: their windows are fed by the growth of their exact totals between samples.
///
/// A value type, owned by the drain thread.
struct RingAggregator {
    /// Where a registered metric's series lives.
    fileprivate struct Route {
        var kind: UInt8
        var slot: Int
        /// Histogram counts per call: the metric's "1 in N" sampling (its gathered calls count as
        /// much: SAMPLING in ringside.h).
        var weight: UInt64
        /// A signed histogram's: its series is in `signedHistograms`, and its values are stored
        /// in offset binary (VALUES in ringside.h).
        var isSigned = false
    }

    /// One file of the bot: how its registry's indices map to series, and what its records cost.
    struct Source {
        fileprivate var routes: [Route] = []
        /// Records refused: unknown metric, wrong kind, or a sequence that disagrees with its cursor.
        var rejected: UInt64 = 0
        /// Histogram calls its lanes gathered rather than wrote while they filled (SAMPLING in
        /// ringside.h), counted from their gather cells.
        var sampled: UInt64 = 0
        /// This drain's gathered calls not placed in a bucket yet (see `drain`).
        var gathered = GatherPlacement()
        /// Its metrics given no series (a cap, or another kind under the same name and labels),
        /// and their records since (valid, but not aggregated).
        var refusedSeries = 0
        var refusedRecords: UInt64 = 0
        var inUse = true
        /// The pid of the process that writes it: a per-worker gauge's label.
        var pid: Int32 = 0
        /// Exemplars half read, by lane.
        var exemplars = ExemplarAssembler()
    }

    /// A source's cells of one series, what it counts toward the series' totals, and when the
    /// collector saw its cells change.
    fileprivate struct SourceCells {
        /// As last read.
        var cells: MetricCells
        /// What it counts: a counter's total and the records dropped grow by what the cells grew
        /// by, saturating, and a cell read lower than before (a wrap at 2^64, or a hostile writer)
        /// counts as a reset (its new value is growth), so no total ever goes back; the rest as read.
        var counted: MetricCells
        var changedNanos: UInt64

        /// What `cells`, read after `before`, count: `before`'s count grown by the cells' growth.
        init(_ cells: MetricCells, after before: SourceCells?, changedNanos: UInt64) {
            var counted = cells
            if let before {
                counted.total = before.counted.total.saturatingAdd(Self.growth(from: before.cells.total, to: cells.total))
                counted.dropped = before.counted.dropped.saturatingAdd(Self.growth(from: before.cells.dropped, to: cells.dropped))
            }
            self.cells = cells
            self.counted = counted
            self.changedNanos = changedNanos
        }

        /// How much a cell read `before`, then `now`, grew: a cell read lower was reset (its whole value is new).
        static func growth(from before: UInt64, to now: UInt64) -> UInt64 { now >= before ? now - before : now }
    }

    fileprivate struct Series<Windows> {
        let metric: MetricDescriptor
        /// A per-worker gauge's source: the series goes when it does.
        var owner: Int?
        /// Gauges merged by sum, max or min: each source's last recorded value, whose merge the
        /// windows take at each record.
        var recordedValues: [Double?] = []
        var windows: Windows
        /// Records arrived since the last snapshot of this series.
        var touched = true
        /// The last snapshot; a window of it is reused until records arrive or its slice rotates.
        var cached: SeriesSnapshot?
        /// Per window, the slice (`now / sliceNanos`) its cached statistics were computed in.
        var computedSlices: [UInt64] = []
        /// The cells merged over the sources: a counter's exact total, a gauge's last value, drops.
        var cells = MetricCells(total: 0, dropped: 0, lastValue: nil)
        /// Each source's cells (by source index), and what removed sources left: their totals
        /// and drops, and the last value one of them set (and when).
        var sourceCells: [SourceCells?] = []
        var folded = SourceCells(MetricCells(), after: nil, changedNanos: 0)
        /// Histograms: the bytes their counts held when last measured.
        var countsBytes = 0
        /// Histograms: the exemplars kept, from the first one recorded.
        var exemplars: WindowedExemplars?
        /// Histograms: calls gathered rather than written while a lane filled, since this
        /// collector started (counted, summed and placed all the same: SAMPLING in ringside.h).
        var sampled: UInt64 = 0
        /// A total of it reached its ceiling (see `noteSaturation`): counted once.
        var saturated = false

        /// Keeps `sampled`, source `source`'s cells as just read, and merges.
        /// - Returns: how much the source's total grew, and whether the merged cells changed.
        mutating func takeCells(_ sampled: MetricCells, from source: Int, nowNanos now: UInt64) -> (growth: UInt64, changed: Bool) {
            if sourceCells.count <= source { sourceCells += Array(repeating: nil, count: source + 1 - sourceCells.count) }
            let before = sourceCells[source]
            guard sampled != before?.cells else { return (0, false) }
            // A gauge that was never set is not newer than one that was.
            let changedNanos = before == nil && sampled.lastValue == nil ? 0 : now
            let taken = SourceCells(sampled, after: before, changedNanos: changedNanos)
            sourceCells[source] = taken
            return (taken.counted.total - (before?.counted.total ?? 0), merge())
        }

        /// Folds source `source`'s cells into what removed sources left: the merged cells stay.
        mutating func removeSource(_ source: Int) {
            guard source < sourceCells.count, let gone = sourceCells[source] else { return }
            folded.cells = Self.folding(gone, into: folded.cells)
            folded.cells.control = 0  // the switches are the live files' only
            if gone.cells.lastValue != nil, gone.changedNanos >= folded.changedNanos {
                folded.cells.lastValue = gone.cells.lastValue
                folded.changedNanos = gone.changedNanos
            }
            sourceCells[source] = nil
            if source < recordedValues.count { recordedValues[source] = nil }
            _ = merge()
        }

        /// `cells` with what `source` counts added (saturating; the dropped values' sum modulo
        /// 2^64, as the files keep it): its figures once it is folded in, or merged.
        static func folding(_ source: SourceCells, into cells: MetricCells) -> MetricCells {
            var result = cells
            result.total = cells.total.saturatingAdd(source.counted.total)
            result.dropped = cells.dropped.saturatingAdd(source.counted.dropped)
            result.droppedSum = cells.droppedSum &+ source.cells.droppedSum
            result.droppedMax = max(cells.droppedMax, source.cells.droppedMax)
            result.clamped = cells.clamped.saturatingAdd(source.cells.clamped)
            // The operator's tool writes every file of a bot alike; while it does, off wins, and the sparser sampling.
            let off = (cells.control | source.cells.control) & (RS_CONTROL_OFF | RS_CONTROL_BOT_OFF)
            result.control = off | max(cells.control & RS_CONTROL_SAMPLE, source.cells.control & RS_CONTROL_SAMPLE)
            return result
        }

        /// Takes what removed sources left before this collector started (see `CollectorState`):
        /// added to what this run folded already (nothing, as a rule), saturating.
        mutating func takeFolded(_ seed: MetricCells) {
            folded.cells.total = folded.cells.total.saturatingAdd(seed.total)
            folded.cells.dropped = folded.cells.dropped.saturatingAdd(seed.dropped)
            _ = merge()
        }

        /// What removed sources left once source `source` is folded in too, if it counted toward
        /// this series (nil when it did not): for `CollectorState`.
        func foldedEntry(folding source: Int) -> CollectorState.Entry? {
            guard source < sourceCells.count, let live = sourceCells[source], live.counted.total > 0 || live.counted.dropped > 0
            else { return nil }
            let cells = Self.folding(live, into: folded.cells)
            return CollectorState.Entry(metric: metric.name, labels: metric.encodedLabels, total: cells.total, dropped: cells.dropped)
        }

        /// The merged cells: sums, and a gauge's value by its policy: the value set last (the
        /// source seen to change it latest), or the sum, max or min of the live sources' values.
        private mutating func merge() -> Bool {
            var merged = folded.cells
            var latest = folded.changedNanos
            for case let source? in sourceCells {
                merged = Self.folding(source, into: merged)
                if let value = source.cells.lastValue, merged.lastValue == nil || source.changedNanos > latest {
                    merged.lastValue = value
                    latest = source.changedNanos
                }
            }
            if metric.gaugeMerge.combinesLiveSources {
                merged.lastValue = metric.gaugeMerge.combine(sourceCells.lazy.map { $0?.cells.lastValue })
            }
            let changed = merged != cells
            cells = merged
            if changed { touched = true }
            return changed
        }
    }

    /// The series a bot holds and the memory they are charged (see `SeriesCost`); also what
    /// the caps leave it room for.
    struct Usage {
        var series = 0
        var bytes = 0
    }

    /// Where a series is, by metric name and encoded labels.
    private struct SeriesKey: Hashable {
        let name: String
        let labels: String
    }

    /// The bot's name: its series' `ring`.
    let ring: String
    let layout: WindowLayout
    private let cost: SeriesCost
    private(set) var sources: [Source] = []
    private var slots: [SeriesKey: Route] = [:]
    /// Each gauge's policy, by the name and labels it was registered with: the first source's.
    private var gaugePolicies: [SeriesKey: GaugeMerge] = [:]
    /// What removed sources left before this collector started, for series not made yet: each is
    /// taken by its series when a source registers its metric.
    private var seeds: [SeriesKey: MetricCells] = [:]
    /// The all-time histograms of series not made yet, as the collector's last run left them (an
    /// unsigned series takes the side at or above zero).
    private var histogramSeeds: [SeriesKey: SignedHistogram] = [:]
    private var histograms: [Series<WindowedHistogram>] = []
    private var signedHistograms: [Series<WindowedSignedHistogram>] = []
    private var counters: [Series<WindowedCounter>] = []
    private var gauges: [Series<WindowedGauge>] = []
    /// Metrics given no series because a series cap was reached (over every source).
    private(set) var refusedSeries = 0
    /// The first metric refused, for the log, and whether the memory budget refused it (else a count).
    private(set) var firstRefused: MetricDescriptor?
    private(set) var firstRefusedForBytes = false
    /// What the series admitted were charged, and what histograms' counts hold (measured as
    /// they grow, when a snapshot is taken).
    private var chargedBytes = 0
    private var countsBytes = 0
    /// What the descriptors of refused metrics still hold (their strings let go).
    private var refusedBytes = 0
    /// The slot of a refused metric's route.
    private static let refusedSlot = -1
    /// Series with a total at its ceiling, and those not yet said in the log (`takeNewlySaturated`).
    private(set) var saturatedSeries = 0
    private var newlySaturated: [MetricDescriptor] = []
    /// The timestamp of the oldest record of the last batch: how far behind the drain runs.
    private(set) var oldestInLastBatchNanos: UInt64 = 0

    /// The native histograms' schema whose buckets each keep their latest exemplar (0 without
    /// `--native-histograms`: a bucket per power of two of the base unit).
    let exemplarSchema: Int

    init(ring: String, layout: WindowLayout, quantiles: Int, exemplarSchema: Int = 0) {
        self.ring = ring
        self.layout = layout
        self.exemplarSchema = exemplarSchema
        cost = SeriesCost(ring: ring, layout: layout, quantiles: quantiles)
    }

    /// Series it holds (metrics admitted).
    var seriesCount: Int { histograms.count + signedHistograms.count + counters.count + gauges.count }
    /// Its series, and the memory they take.
    var usage: Usage { Usage(series: seriesCount, bytes: chargedBytes + countsBytes + refusedBytes) }
    /// Sources in use: the files feeding it.
    var sourceCount: Int { sources.count { $0.inUse } }

    // MARK: - Sources

    /// A new source (a file of the bot, written by process `pid`), reusing the index of one removed.
    mutating func addSource(pid: Int32) -> Int {
        if let free = sources.firstIndex(where: { !$0.inUse }) {
            sources[free] = Source(pid: pid)
            return free
        }
        sources.append(Source(pid: pid))
        return sources.count - 1
    }

    /// Removes a source whose file is gone: its counters' totals, drops and gauges' last values
    /// set are folded into the series, which keep them (gauges merged over live sources let its
    /// value go); its per-worker gauges go; its index may be reused.
    mutating func removeSource(_ source: Int) {
        guard source < sources.count, sources[source].inUse else { return }
        for index in histograms.indices { histograms[index].removeSource(source) }
        for index in signedHistograms.indices { signedHistograms[index].removeSource(source) }
        for index in counters.indices { counters[index].removeSource(source) }
        for index in gauges.indices.reversed() {
            if gauges[index].owner == source { removeGauge(at: index) } else { gauges[index].removeSource(source) }
        }
        sources[source] = Source(inUse: false)
    }

    /// Removes a gauge series (a per-worker gauge whose worker is gone): the last series takes its
    /// slot, and the routes to it follow.
    private mutating func removeGauge(at slot: Int) {
        let gone = gauges[slot].metric
        if gauges[slot].saturated { saturatedSeries -= 1 }
        slots[SeriesKey(name: gone.name, labels: gone.encodedLabels)] = nil
        chargedBytes -= cost.bytes(of: gone)
        let last = gauges.count - 1
        if slot != last {
            gauges.swapAt(slot, last)
            let moved = gauges[slot].metric
            slots[SeriesKey(name: moved.name, labels: moved.encodedLabels)]?.slot = slot
            for source in sources.indices {
                for route in sources[source].routes.indices
                where sources[source].routes[route].kind == MetricKind.gauge.rawValue && sources[source].routes[route].slot == last {
                    sources[source].routes[route].slot = slot
                }
            }
        }
        gauges.removeLast()
    }

    /// Takes what the bot's removed sources left before this collector started.
    mutating func seed(_ entries: [CollectorState.Entry]) {
        for entry in entries {
            seeds[SeriesKey(name: entry.metric, labels: entry.labels)] = MetricCells(total: entry.total, dropped: entry.dropped)
        }
    }

    /// Takes the all-time histograms the collector's last run left the bot's series; one that
    /// does not hold together is left out.
    mutating func seedHistograms(_ entries: [CollectorState.HistogramEntry]) {
        for entry in entries {
            let persisted = PersistedSignedHistogram(nonNegative: entry.histogram, negative: entry.negative ?? Histogram().persisted)
            guard let histogram = SignedHistogram(persisted) else { continue }
            histogramSeeds[SeriesKey(name: entry.metric, labels: entry.labels)] = histogram
        }
    }

    /// Every histogram series' all-time histogram (with those no series took yet): what
    /// `CollectorState` keeps when the collector stops.
    var allTimeHistograms: [CollectorState.HistogramEntry] {
        let made = histograms.map { series in
            CollectorState.HistogramEntry(
                metric: series.metric.name, labels: series.metric.encodedLabels, histogram: series.windows.cumulative.persisted)
        }
        let madeSigned = signedHistograms.map { series in
            let cumulative = series.windows.cumulative
            return CollectorState.HistogramEntry(
                metric: series.metric.name, labels: series.metric.encodedLabels, histogram: cumulative.nonNegative.persisted,
                negative: cumulative.negative.persisted)
        }
        let waiting = histogramSeeds.map { key, histogram in
            CollectorState.HistogramEntry(
                metric: key.name, labels: key.labels, histogram: histogram.nonNegative.persisted,
                negative: histogram.negative.isEmpty ? nil : histogram.negative.persisted)
        }
        return (made + madeSigned + waiting).sorted { ($0.metric, $0.labels) < ($1.metric, $1.labels) }
    }

    /// The figures of the series source `source` counted toward (a total or drops), as they will
    /// be once it is folded in (`removeSource`): what `CollectorState` keeps of a worker whose
    /// file goes. Only those series: a fold's cost is the worker's, not the bot's.
    func foldedEntries(folding source: Int) -> [CollectorState.Entry] {
        histograms.compactMap { $0.foldedEntry(folding: source) } + signedHistograms.compactMap { $0.foldedEntry(folding: source) }
            + counters.compactMap { $0.foldedEntry(folding: source) }
            + gauges.compactMap { $0.owner == nil ? $0.foldedEntry(folding: source) : nil }
    }

    // MARK: - Metrics

    /// Routes `consumer`'s metrics not known yet (they arrive in index order) from source
    /// `source` to the bot's series: an existing series of the same name and labels, or a new
    /// one, as many as `allowance` (given what is held) leaves room for, in series and in bytes;
    /// the rest are refused (routed nowhere, their records counted, their descriptors' strings
    /// let go). A metric whose name and labels another source registered as another kind, or in
    /// another unit, is refused too.
    /// - Returns: how many series were added.
    @discardableResult
    mutating func addMetrics(of consumer: RingConsumer, source: Int, admitting allowance: (_ held: Usage) -> Usage) -> Int {
        let room = allowance(usage)
        var admitted = 0
        var charged = 0
        for declared in consumer.metrics[sources[source].routes.count...] where Int(declared.index) == sources[source].routes.count {
            var metric = declared
            if metric.kind == .gauge {
                // Every source must merge a gauge alike; a per-worker gauge's series is its source's.
                let declaredKey = SeriesKey(name: metric.name, labels: metric.encodedLabels)
                if let policy = gaugePolicies[declaredKey], policy != metric.gaugeMerge {
                    refuse(metric, in: consumer, source: source, forBytes: false)
                    continue
                }
                gaugePolicies[declaredKey] = metric.gaugeMerge
                if metric.gaugeMerge == .perWorker {
                    guard let labelled = metric.labelled(pid: sources[source].pid) else {
                        refuse(metric, in: consumer, source: source, forBytes: false)
                        continue
                    }
                    metric = labelled
                }
            }
            let key = SeriesKey(name: metric.name, labels: metric.encodedLabels)
            if let existing = slots[key] {
                // Records of another unit would merge wrongly scaled: only the same kind, unit and
                // gauge policy join; a per-worker series is its own source's only.
                // Nor do values of another form or step.
                if existing.kind == metric.kind.rawValue, unit(of: existing) == metric.unit, policy(of: existing) == metric.gaugeMerge,
                    metric.gaugeMerge != .perWorker, values(of: existing) == Values(metric)
                {
                    sources[source].routes.append(
                        Route(kind: existing.kind, slot: existing.slot, weight: UInt64(metric.sampleEvery), isSigned: existing.isSigned))
                } else {
                    refuse(metric, in: consumer, source: source, forBytes: false)
                }
                continue
            }
            let bytes = cost.bytes(of: metric)
            guard admitted < room.series, charged + bytes <= room.bytes else {
                refuse(metric, in: consumer, source: source, forBytes: admitted < room.series)
                refusedSeries += 1
                continue
            }
            admitted += 1
            charged += bytes
            let route: Route
            switch metric.kind {
            case .histogram where metric.isSigned:
                route = Route(kind: metric.kind.rawValue, slot: signedHistograms.count, weight: UInt64(metric.sampleEvery), isSigned: true)
                signedHistograms.append(Series(metric: metric, windows: WindowedSignedHistogram(layout: layout)))
            case .histogram:
                route = Route(kind: metric.kind.rawValue, slot: histograms.count, weight: UInt64(metric.sampleEvery))
                histograms.append(Series(metric: metric, windows: WindowedHistogram(layout: layout)))
            case .counter:
                route = Route(kind: metric.kind.rawValue, slot: counters.count, weight: 1)
                counters.append(Series(metric: metric, windows: WindowedCounter(layout: layout)))
            case .gauge:
                route = Route(kind: metric.kind.rawValue, slot: gauges.count, weight: 1)
                let owner = metric.gaugeMerge == .perWorker ? source : nil
                gauges.append(Series(metric: metric, owner: owner, windows: WindowedGauge(layout: layout)))
            }
            slots[key] = route
            sources[source].routes.append(route)
            if metric.kind == .histogram, let earlier = histogramSeeds.removeValue(forKey: key) {
                if route.isSigned {
                    signedHistograms[route.slot].windows.seedAllTime(earlier)
                } else {
                    histograms[route.slot].windows.seedAllTime(earlier.nonNegative)
                }
            }
            if let seed = seeds.removeValue(forKey: key) {
                switch metric.kind {
                case .histogram where route.isSigned: signedHistograms[route.slot].takeFolded(seed)
                case .histogram: histograms[route.slot].takeFolded(seed)
                case .counter: counters[route.slot].takeFolded(seed)
                case .gauge: gauges[route.slot].takeFolded(seed)
                }
            }
        }
        chargedBytes += charged
        return admitted
    }

    /// The gauge policy of the series a route leads to (`.last` for other kinds).
    private func policy(of route: Route) -> GaugeMerge {
        route.kind == MetricKind.gauge.rawValue ? gauges[route.slot].metric.gaugeMerge : .last
    }

    /// A series' values: signed or not, and their step.
    private struct Values: Equatable {
        let isSigned: Bool
        let scale: Int8
        init(_ metric: MetricDescriptor) { (isSigned, scale) = (metric.isSigned, metric.scale) }
    }

    /// The values of the series a route leads to.
    private func values(of route: Route) -> Values { Values(metric(of: route)) }

    /// The metric of the series a route leads to.
    private func metric(of route: Route) -> MetricDescriptor {
        switch route.kind {
        case MetricKind.histogram.rawValue: route.isSigned ? signedHistograms[route.slot].metric : histograms[route.slot].metric
        case MetricKind.counter.rawValue: counters[route.slot].metric
        default: gauges[route.slot].metric
        }
    }

    /// The unit of the series a route leads to.
    private func unit(of route: Route) -> MetricUnit { metric(of: route).unit }

    /// Routes a metric of `source` nowhere: its records are counted, its strings let go.
    private mutating func refuse(_ metric: MetricDescriptor, in consumer: RingConsumer, source: Int, forBytes: Bool) {
        sources[source].routes.append(Route(kind: metric.kind.rawValue, slot: Self.refusedSlot, weight: 0))
        sources[source].refusedSeries += 1
        refusedBytes += MemoryLayout<MetricDescriptor>.stride
        if firstRefused == nil {
            firstRefused = metric
            firstRefusedForBytes = forBytes
        }
        consumer.forgetStrings(ofMetric: Int(metric.index))
    }

    /// Reads the registry again and adds series for the metrics registered since (see `addMetrics`).
    /// - Returns: how many metrics the registry had that were not known.
    @discardableResult
    mutating func refreshMetrics(of consumer: RingConsumer, source: Int, admitting allowance: (_ held: Usage) -> Usage) -> Int {
        let added = (try? consumer.refreshMetrics()) ?? 0
        if added > 0 { addMetrics(of: consumer, source: source, admitting: allowance) }
        return added
    }

    // MARK: - Draining

    /// Drains `consumer`'s lanes (source `source`, at most `limitPerLane` records each) into the
    /// series; a record naming a metric registered since the last look has the registry read again.
    ///
    /// Calls its lanes gathered (SAMPLING in ringside.h) are taken first: each is counted, its sum
    /// and the largest exactly; a record that stands for gathered calls (k > 0) places up to
    /// 2^k - 1 of them in its value's bucket, and those left (the lane stopped sampling, or its
    /// thread went idle) are placed at their cell's latest value, so the counts and the buckets
    /// agree at every drain.
    /// - Parameters:
    ///   - allowance: how many more series may be added, given the series held (the caps).
    ///   - counted: told the records taken from each lane, for the fill rate.
    ///   - recorder: the flight recorder's feed for this file, which keeps the records raw,
    ///     from the lane's own buffers (nil: it is off).
    /// - Returns: the records drained.
    /// - Throws: the consumer's error when the ring's cursors turn out corrupt.
    mutating func drain(
        _ consumer: RingConsumer, source: Int, limitPerLane: Int, nowNanos now: UInt64,
        admitting allowance: (_ held: Usage) -> Usage,
        counted: (_ records: Int, _ lane: Int) -> Void,
        recorder: Recorder.Feed? = nil
    ) throws(RingError) -> Int {
        // The calls gathered are taken after the records, even when the drain fails: then every
        // record drained finds the calls it stands for (see `GatherPlacement`).
        defer { takeGathered(of: consumer, source: source, nowNanos: now) }
        return try consumer.drain(limitPerLane: limitPerLane) { records, first, lane in
            counted(records.count, lane)
            recorder?.take(records, lane: lane, of: consumer, nowNanos: now)
            var offset = 0
            while offset < records.count {
                let rest = UnsafeBufferPointer(rebasing: records[offset...])
                offset += consume(rest, source: source, lane: lane, of: consumer, firstCursor: first + UInt64(offset), nowNanos: now)
                guard offset < records.count else { break }
                // A metric registered after the last look: read the registry again.
                if refreshMetrics(of: consumer, source: source, admitting: allowance) == 0 {
                    sources[source].rejected += 1  // the registry has no such metric
                    offset += 1
                }
            }
        }
    }

    /// Takes the calls `consumer`'s lanes gathered since the last look (SAMPLING in ringside.h):
    /// their sum and largest into their series at `now`, exactly; their count as they are placed
    /// (`Source.gathered`): beside the records that stand for them, or, once a lane is drained and
    /// none can, at their cell's latest value, now.
    private mutating func takeGathered(of consumer: RingConsumer, source: Int, nowNanos now: UInt64) {
        let routes = sources[source].routes
        var gathered = GatherPlacement()
        swap(&gathered, &sources[source].gathered)  // moved out, not copied: the histograms change meanwhile
        defer { swap(&gathered, &sources[source].gathered) }
        consumer.takeGathered { metric, lane, calls in
            guard metric < routes.count, routes[metric].kind == MetricKind.histogram.rawValue, routes[metric].slot != Self.refusedSlot
            else { return }
            let route = routes[metric]
            // Saturating, as every total: hostile weights and cells must not wrap one back.
            let weighted = calls.calls.saturatingMultiply(route.weight)
            sources[source].sampled = sources[source].sampled.saturatingAdd(weighted)
            if route.isSigned {
                let sum = OffsetBinary.sum(calls.sum, count: calls.calls).saturatingMultiply(route.weight)
                signedHistograms[route.slot].windows.addSum(sum, raisingMaxTo: OffsetBinary.maximum(calls.max), atNanos: now)
                signedHistograms[route.slot].sampled = signedHistograms[route.slot].sampled.saturatingAdd(weighted)
                signedHistograms[route.slot].touched = true
            } else {
                histograms[route.slot].windows.addSum(calls.sum.saturatingMultiply(route.weight), raisingMaxTo: calls.max, atNanos: now)
                histograms[route.slot].sampled = histograms[route.slot].sampled.saturatingAdd(weighted)
                histograms[route.slot].touched = true
            }
            gathered.take(calls, metric: metric, lane: lane) { value, time, placed in
                place(value, count: placed, route: route, atNanos: time)
            }
        }
        guard !gathered.isEmpty else { return }
        gathered.placeUnclaimed(isDrained: consumer.isDrained(lane:)) { metric, value, calls in
            place(value, count: calls, route: routes[metric], atNanos: now)
        }
    }

    /// Places `count` gathered calls (weighted by the route) at `stored`, a value as its file stores it.
    private mutating func place(_ stored: UInt64, count: UInt64, route: Route, atNanos time: UInt64) {
        let weighted = count.saturatingMultiply(route.weight)
        if route.isSigned {
            signedHistograms[route.slot].windows.place(OffsetBinary.value(stored), count: weighted, atNanos: time)
            signedHistograms[route.slot].touched = true
        } else {
            histograms[route.slot].windows.place(stored, count: weighted, atNanos: time)
            histograms[route.slot].touched = true
        }
    }

    /// Aggregates records of `source` read at cursors `firstCursor...` of lane `lane`; stops
    /// before a record that names a metric not known yet and returns how many it took, so `drain`
    /// can read the registry again. A value's exemplar is put back together from the exemplar
    /// records after it (see `ExemplarAssembler`), and kept by its series.
    private mutating func consume(
        _ records: UnsafeBufferPointer<RingRecord>, source: Int, lane: Int, of consumer: RingConsumer, firstCursor: UInt64,
        nowNanos now: UInt64
    ) -> Int {
        // A timestamp from the future would hold the windows hostage: clamp it to now.
        let latest = now
        if let first = records.first { oldestInLastBatchNanos = min(first.timestamp_ns, now) }
        let routes = sources[source].routes
        var rejected: UInt64 = 0, refused: UInt64 = 0
        defer {
            sources[source].rejected &+= rejected
            sources[source].refusedRecords &+= refused
        }
        var assembling = sources[source].exemplars.isPending(lane: lane)
        for index in records.indices {
            let record = records[index]
            if record.kind == ExemplarAssembler.exemplarKind {
                let outcome = sources[source].exemplars.take(record, at: firstCursor &+ UInt64(index), lane: lane)
                switch outcome {
                case .part: break
                case .complete(let slot, let value, let time, let labels):
                    keepExemplar(
                        slot: slot, value: value, timeNanos: min(time, latest), labels: labels, source: source, lane: lane, of: consumer)
                case .unwanted: refused += 1
                case .stray: rejected += 1
                case .malformed(let parts): rejected += UInt64(parts)
                }
                assembling = outcome == .part
                continue
            }
            if assembling {
                // The rest of an exemplar never came: a producer writes them together.
                if sources[source].exemplars.abandon(lane: lane) { rejected += 1 }
                assembling = false
            }
            let metric = Int(record.metric)
            guard metric < routes.count else { return index }
            let route = routes[metric]
            if route.slot == Self.refusedSlot, record.kind == route.kind, route.kind != MetricKind.counter.rawValue,
                record.sequence == firstCursor &+ UInt64(index)
            {
                refused += 1  // a valid record of a series refused at the cap
                if record.flags & ExemplarAssembler.exemplarFlag != 0 {
                    assembling = sources[source].exemplars.begin(record, at: firstCursor &+ UInt64(index), lane: lane, slot: nil)
                }
                continue
            }
            // Counters live in cells and write no records: one that claims to be a counter's is invalid.
            guard record.kind == route.kind, route.kind != MetricKind.counter.rawValue,
                record.sequence == firstCursor &+ UInt64(index)
            else {
                rejected += 1
                continue
            }
            let time = min(record.timestamp_ns, latest)
            switch route.kind {
            case MetricKind.histogram.rawValue:
                if route.isSigned {
                    signedHistograms[route.slot].windows.record(OffsetBinary.value(record.value), count: route.weight, atNanos: time)
                    signedHistograms[route.slot].touched = true
                } else {
                    histograms[route.slot].windows.record(record.value, count: route.weight, atNanos: time)
                    histograms[route.slot].touched = true
                }
                // A record written while its lane filled stands, in its bucket, for the 2^k - 1
                // calls gathered before it, counted already (SAMPLING in ringside.h).
                if record.weightLog2 > 0 {
                    let placed = sources[source].gathered.placeBeside(record, lane: lane, timeNanos: time)
                    place(record.value, count: placed, route: route, atNanos: time)
                }
                // No producer writes an exemplar with a signed value: its records are rejected, one by one.
                if record.flags & ExemplarAssembler.exemplarFlag != 0, !route.isSigned {
                    assembling = sources[source].exemplars.begin(record, at: firstCursor &+ UInt64(index), lane: lane, slot: route.slot)
                    if !assembling { rejected += 1 }  // a length no producer writes
                }
            default:
                gauges[route.slot].set(Double(bitPattern: record.value), from: source, atNanos: time)
            }
        }
        return records.count
    }

    /// Keeps an exemplar put back together from lane `lane` of `source` in histogram `slot`'s
    /// exemplars, in the bucket its value falls in, if it is among the largest or its bucket's latest.
    private mutating func keepExemplar(
        slot: Int, value: UInt64, timeNanos: UInt64, labels: String, source: Int, lane: Int, of consumer: RingConsumer
    ) {
        let bucket = NativeBuckets.index(of: value, metric: histograms[slot].metric, schema: exemplarSchema)
        let thread = consumer.thread(lane: lane)
        // The record's monotonic time on the wall, by the clocks' offset now: the monotonic clock
        // read first, so that the offset errs late, never early (an exemplar never precedes its call).
        let monotonic = rs_clock_precise_ns()
        let wall = rs_clock_realtime_ns() &- monotonic &+ timeNanos
        let exemplar = KeptExemplar(
            value: value, timeNanos: timeNanos, wallTimeNanos: wall, labels: labels, pid: sources[source].pid,
            threadID: thread.id, threadName: thread.name)
        if histograms[slot].exemplars == nil { histograms[slot].exemplars = WindowedExemplars(layout: layout) }
        histograms[slot].exemplars?.record(exemplar, bucket: bucket)
    }

    /// Takes in source `source`'s cells. A counter's growth since the source's last sample is
    /// added to its windows at `now` (its rate's resolution is the sampling interval); with
    /// `isBaseline`, a source's first sample counts in totals but not in the windows (counters
    /// made before this collector started would show as a burst).
    /// - Returns: whether any merged cell changed.
    @discardableResult
    mutating func sampleCells(of consumer: RingConsumer, source: Int, nowNanos now: UInt64, isBaseline: Bool = false) -> Bool {
        var changed = false
        for (index, route) in sources[source].routes.enumerated() where route.slot != Self.refusedSlot {
            let cells = consumer.cells(of: consumer.metrics[index])
            switch route.kind {
            case MetricKind.counter.rawValue:
                let first = counters[route.slot].sourceCells.count <= source || counters[route.slot].sourceCells[source] == nil
                let (growth, merged) = counters[route.slot].takeCells(cells, from: source, nowNanos: now)
                if growth > 0, !(isBaseline && first) { counters[route.slot].windows.add(growth, atNanos: now) }
                changed = changed || merged
            case MetricKind.histogram.rawValue where route.isSigned:
                changed = signedHistograms[route.slot].takeCells(cells, from: source, nowNanos: now).changed || changed
            case MetricKind.histogram.rawValue:
                changed = histograms[route.slot].takeCells(cells, from: source, nowNanos: now).changed || changed
            default:
                changed = gauges[route.slot].takeCells(cells, from: source, nowNanos: now).changed || changed
            }
        }
        return changed
    }

    /// Moves every series' current tick into its windows once `now` has passed it.
    private mutating func advance(toNanos now: UInt64) {
        for index in histograms.indices {
            histograms[index].windows.advance(toNanos: now)
            histograms[index].exemplars?.advance(toNanos: now)
        }
        for index in signedHistograms.indices { signedHistograms[index].windows.advance(toNanos: now) }
        for index in counters.indices { counters[index].windows.advance(toNanos: now) }
        for index in gauges.indices { gauges[index].windows.advance(toNanos: now) }
    }

    // MARK: - Snapshots

    /// Slides every series' windows to `now` and returns their snapshots. A window's statistics
    /// are recomputed only when records arrived or the window slid (its slice rotated); otherwise
    /// the last ones are reused, so thousands of quiet series cost little to publish.
    mutating func snapshots(nowNanos now: UInt64, quantiles: [Double], versions: inout VersionCounter) -> [SeriesSnapshot] {
        advance(toNanos: now)
        var result: [SeriesSnapshot] = []
        result.reserveCapacity(seriesCount)
        for index in histograms.indices {
            defer {
                if !histograms[index].saturated, let last = result.last, Self.showsSaturation(last) {
                    histograms[index].saturated = true
                    noteSaturation(of: histograms[index].metric)
                }
            }
            if histograms[index].touched {
                // Counts grow with what is recorded: measured here, where a busy series is touched anyway.
                let bytes = histograms[index].windows.allocatedBytes
                countsBytes += bytes - histograms[index].countsBytes
                histograms[index].countsBytes = bytes
            }
            result.append(
                Self.refresh(
                    &histograms[index], ring: ring, layout: layout, now: now, versions: &versions,
                    window: { series, window, stats in
                        stats.take(
                            series.windows.snapshot(window: window, nowNanos: now), quantiles: quantiles,
                            coveredNanos: max(series.windows.coveredNanos(window: window, nowNanos: now), layout.tickNanos))
                        stats.exemplars = series.exemplars?.largest(window: window, nowNanos: now) ?? []
                    },
                    whole: { series, snapshot in
                        // Shared, not copied: the exporters compute their buckets from it when they render.
                        let cumulative = series.windows.cumulative
                        snapshot.cumulative = cumulative
                        snapshot.cumulativeCount = cumulative.count
                        snapshot.cumulativeSum = cumulative.sum
                        snapshot.cumulativeExactSum = cumulative.exactSum
                        snapshot.cumulativeMax = Int128(cumulative.max)
                        snapshot.droppedRecords = series.cells.dropped
                        snapshot.droppedSum = Int128(series.cells.droppedSum)
                        snapshot.droppedMax = Int128(series.cells.droppedMax)
                        snapshot.sampledRecords = series.sampled
                        snapshot.clampedValues = series.cells.clamped
                        snapshot.control = series.cells.control
                        snapshot.bucketExemplars = series.exemplars?.latestByBucket.values.sorted { $0.value < $1.value } ?? []
                    }))
        }
        for index in signedHistograms.indices {
            defer {
                if !signedHistograms[index].saturated, let last = result.last, Self.showsSaturation(last) {
                    signedHistograms[index].saturated = true
                    noteSaturation(of: signedHistograms[index].metric)
                }
            }
            if signedHistograms[index].touched {
                let bytes = signedHistograms[index].windows.allocatedBytes
                countsBytes += bytes - signedHistograms[index].countsBytes
                signedHistograms[index].countsBytes = bytes
            }
            result.append(
                Self.refresh(
                    &signedHistograms[index], ring: ring, layout: layout, now: now, versions: &versions,
                    window: { series, window, stats in
                        stats.take(
                            series.windows.snapshot(window: window, nowNanos: now), quantiles: quantiles,
                            coveredNanos: max(series.windows.coveredNanos(window: window, nowNanos: now), layout.tickNanos))
                    },
                    whole: { series, snapshot in
                        let cumulative = series.windows.cumulative
                        snapshot.signedCumulative = cumulative
                        snapshot.cumulativeCount = cumulative.count
                        snapshot.cumulativeSum = cumulative.sum
                        snapshot.cumulativeSignedSum = cumulative.exactSum
                        snapshot.cumulativeMax = cumulative.isEmpty ? 0 : Int128(cumulative.max)
                        snapshot.droppedRecords = series.cells.dropped
                        // Stored in offset binary, as the values are (VALUES in ringside.h).
                        snapshot.droppedSum = Int128(OffsetBinary.sum(series.cells.droppedSum, count: series.cells.dropped))
                        snapshot.droppedMax = OffsetBinary.maximum(series.cells.droppedMax).map { Int128($0) } ?? 0
                        snapshot.sampledRecords = series.sampled
                        snapshot.clampedValues = series.cells.clamped
                        snapshot.control = series.cells.control
                    }))
        }
        for index in counters.indices {
            defer {
                if !counters[index].saturated, let last = result.last, Self.showsSaturation(last) {
                    counters[index].saturated = true
                    noteSaturation(of: counters[index].metric)
                }
            }
            result.append(
                Self.refresh(
                    &counters[index], ring: ring, layout: layout, now: now, versions: &versions,
                    window: { series, window, stats in
                        stats.increase = series.windows.sum(window: window, nowNanos: now)
                        stats.rate = series.windows.rate(window: window, nowNanos: now)
                    },
                    whole: { series, snapshot in
                        snapshot.cumulativeSum = Double(series.cells.total)
                        snapshot.cumulativeExactSum = UInt128(series.cells.total)
                        snapshot.clampedValues = series.cells.clamped
                        snapshot.control = series.cells.control
                    }))
        }
        for index in gauges.indices {
            defer {
                if !gauges[index].saturated, let last = result.last, Self.showsSaturation(last) {
                    gauges[index].saturated = true
                    noteSaturation(of: gauges[index].metric)
                }
            }
            result.append(
                Self.refresh(
                    &gauges[index], ring: ring, layout: layout, now: now, versions: &versions,
                    window: { series, window, stats in
                        if let range = series.windows.range(window: window, nowNanos: now) {
                            stats.gaugeMin = range.min
                            stats.gaugeMax = range.max
                        }
                    },
                    whole: { series, snapshot in
                        // The cell holds the last value set by any thread, exact even when records dropped.
                        snapshot.lastValue = series.cells.lastValue ?? series.windows.last
                        snapshot.control = series.cells.control
                        snapshot.droppedRecords = series.cells.dropped
                    }))
        }
        return result
    }

    /// Whether a series' snapshot shows a total at its ceiling, where it stays (saturating
    /// arithmetic: it never wraps back): a histogram's count or sum, a counter's total, records
    /// dropped, calls gathered.
    static func showsSaturation(_ snapshot: SeriesSnapshot) -> Bool {
        let total: UInt128 = snapshot.metric.kind == .counter ? UInt128(UInt64.max) : .max
        return snapshot.cumulativeCount == .max || snapshot.cumulativeExactSum == total || snapshot.droppedRecords == .max
            || snapshot.sampledRecords == .max || snapshot.signedCumulative?.isSaturated == true
    }

    /// Counts a series whose total reached its ceiling, and keeps it for the log.
    private mutating func noteSaturation(of metric: MetricDescriptor) {
        saturatedSeries += 1
        newlySaturated.append(metric)
    }

    /// The series that reached a ceiling since the last call, for the log.
    mutating func takeNewlySaturated() -> [MetricDescriptor] {
        defer { newlySaturated.removeAll() }
        return newlySaturated
    }

    /// The series' snapshot, recomputing only the windows that may have changed (all of them,
    /// and the whole-series figures, when records arrived): `window` fills in the statistics of
    /// a window (an index into the layout's), starting from empty ones; `whole` sets the
    /// whole-series figures.
    private static func refresh<Windows>(
        _ series: inout Series<Windows>, ring: String, layout: WindowLayout, now: UInt64,
        versions: inout VersionCounter,
        window: (Series<Windows>, Int, inout WindowStats) -> Void,
        whole: (Series<Windows>, inout SeriesSnapshot) -> Void
    ) -> SeriesSnapshot {
        var snapshot = series.cached ?? SeriesSnapshot(ring: ring, metric: series.metric, id: versions.next(), windows: [])
        if series.computedSlices.count != layout.windowNanos.count {
            series.computedSlices = Array(repeating: .max, count: layout.windowNanos.count)
            snapshot.windows = Array(repeating: WindowStats(), count: layout.windowNanos.count)
        }
        var windowsChanged = series.touched || series.cached == nil
        for index in layout.windowNanos.indices {
            let slice = now / layout.sliceNanos[index]
            guard series.touched || slice != series.computedSlices[index] else { continue }
            series.computedSlices[index] = slice
            var stats = WindowStats()
            window(series, index, &stats)
            // An empty window that stays empty changes nothing.
            if stats.isEmpty && snapshot.windows[index].isEmpty && !series.touched { continue }
            snapshot.windows[index] = stats
            windowsChanged = true
        }
        if series.touched || series.cached == nil {
            whole(series, &snapshot)
            snapshot.wholeVersion = versions.next()
        }
        if windowsChanged { snapshot.version = versions.next() }
        series.cached = snapshot
        series.touched = false
        return snapshot
    }

    // MARK: - Queries

    /// Merges window `window` (an index into the layout's windows) of every histogram series of
    /// unsigned values `include` accepts, in registration order, into `merged`, for the SLOs (an
    /// SLO's threshold is a latency or a size: a signed series is never one of its series).
    /// - Returns: how many series it merged.
    func mergeHistograms(
        window: Int, nowNanos now: UInt64, into merged: inout Histogram,
        where include: (MetricDescriptor) -> Bool
    ) -> Int {
        var count = 0
        for series in histograms where include(series.metric) {
            merged.merge(series.windows.snapshot(window: window, nowNanos: now))
            count += 1
        }
        return count
    }

    /// Calls `body` with every counter series `include` accepts and its exact total, for the SLOs.
    func forEachCounter(where include: (MetricDescriptor) -> Bool, _ body: (MetricDescriptor, UInt64) -> Void) {
        for series in counters where include(series.metric) { body(series.metric, series.cells.total) }
    }
}

extension RingAggregator.Series where Windows == WindowedGauge {
    /// Takes a gauge's record from `source`: its windows see the value set, or, for a gauge merged
    /// by sum, max or min, that merge over the sources' last recorded values.
    mutating func set(_ value: Double, from source: Int, atNanos time: UInt64) {
        touched = true
        guard metric.gaugeMerge.combinesLiveSources else {
            windows.set(value, atNanos: time)
            return
        }
        if recordedValues.count <= source { recordedValues += Array(repeating: nil, count: source + 1 - recordedValues.count) }
        recordedValues[source] = value
        if let merged = metric.gaugeMerge.combine(recordedValues) { windows.set(merged, atNanos: time) }
    }
}

extension GaugeMerge {
    /// Whether the merged value is computed over the live sources' values (sum, max, min).
    var combinesLiveSources: Bool { self == .sum || self == .max || self == .min }

    /// The sum, max or min of the values present; nil when none is.
    func combine(_ values: some Sequence<Double?>) -> Double? {
        var result: Double?
        for case let value? in values {
            guard let soFar = result else {
                result = value
                continue
            }
            switch self {
            case .sum: result = soFar + value
            case .max: result = Swift.max(soFar, value)
            case .min: result = Swift.min(soFar, value)
            case .last, .perWorker: result = value
            }
        }
        return result
    }
}

extension MetricDescriptor {
    /// The descriptor with the label `pid="<pid>"` added, for a per-worker gauge's series; nil
    /// when the labels cannot take it (a `pid` of their own, or too long).
    func labelled(pid: Int32) -> MetricDescriptor? {
        var pairs = labelDictionary
        guard pairs["pid"] == nil else { return nil }
        pairs["pid"] = String(pid)
        guard case let .success(encoded) = MetricDescriptor.encode(labels: pairs) else { return nil }
        return MetricDescriptor(
            index: index, name: name, kind: kind, unit: unit, encodedLabels: encoded, help: help,
            sampleEvery: sampleEvery, gaugeMerge: gaugeMerge)
    }
}

/// Hands out series ids and versions: increasing across the whole collector.
struct VersionCounter {
    private(set) var last: UInt64 = 0
    mutating func next() -> UInt64 {
        last += 1
        return last
    }
}

extension WindowStats {
    /// Nothing fell in the window.
    var isEmpty: Bool { count == 0 && increase == 0 && gaugeMin == nil }

    /// A histogram window's figures, of unsigned or signed values alike, its rate over the
    /// `coveredNanos` it spans (as a counter's rate is, so both read alike).
    fileprivate mutating func take(_ histogram: some HistogramFigures, quantiles: [Double], coveredNanos: UInt64) {
        count = histogram.count
        sum = histogram.sum
        min = histogram.lowest
        max = histogram.highest
        mean = histogram.mean
        quantileValues = histogram.isEmpty ? quantiles.map { _ in 0 } : histogram.steps(atQuantiles: quantiles)
        rate = Double(histogram.count) * 1e9 / Double(coveredNanos)
    }
}

/// What a window's statistics take from a histogram: its values as `Int128` steps, unsigned or signed.
private protocol HistogramFigures {
    var count: UInt64 { get }
    var sum: Double { get }
    var mean: Double { get }
    var isEmpty: Bool { get }
    var lowest: Int128 { get }
    var highest: Int128 { get }
    func steps(atQuantiles quantiles: [Double]) -> [Int128]
}

extension Histogram: HistogramFigures {
    fileprivate var lowest: Int128 { Int128(min) }
    fileprivate var highest: Int128 { Int128(max) }
    fileprivate func steps(atQuantiles quantiles: [Double]) -> [Int128] { values(atQuantiles: quantiles).map { Int128($0) } }
}

extension SignedHistogram: HistogramFigures {
    fileprivate var lowest: Int128 { Int128(min) }
    fileprivate var highest: Int128 { Int128(max) }
    fileprivate func steps(atQuantiles quantiles: [Double]) -> [Int128] { values(atQuantiles: quantiles).map { Int128($0) } }
}
