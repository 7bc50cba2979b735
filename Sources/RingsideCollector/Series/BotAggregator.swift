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
/// mapped to the bot's series by name and labels, never by index. Counter totals and drops are
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
/// A value type, owned by the drain thread. Its parts, in their own files: the series types
/// (`+Series`), mapping a source's registry to series (`+Metrics`), draining records and
/// sampling cells (`+Draining`), snapshots (`+Snapshots`) and the SLOs' queries (`+Queries`).
/// Only they write its state; the rest of the collector reads it.
struct BotAggregator {
    /// The bot's name: its series' `ring`.
    let ring: String
    let layout: WindowLayout
    /// The native histograms' schema whose buckets each keep their latest exemplar (0 without
    /// `--native-histograms`: a bucket per power of two of the base unit).
    let exemplarSchema: Int
    /// Its files, by source index (written by the aggregator's own extensions only).
    var sources: [Source] = []
    /// Its series, one table per kind.
    var tables = SeriesTables()
    /// Where each series is, by metric name and encoded labels.
    var index = SeriesIndex()
    /// Each gauge's policy, by the name and labels it was registered with: the first source's.
    var gaugePolicies: [SeriesKey: GaugeMerge] = [:]
    /// What the collector's last run left series not made yet (restored from its state).
    var restored = RestoredFigures()
    /// The memory its series are charged.
    var memory: SeriesMemory
    /// The metrics a cap refused.
    var refusals = SeriesRefusals()
    /// The series whose totals reached their ceiling.
    var saturation = SaturationLog()
    /// The timestamp of the oldest record of the last batch: how far behind the drain runs.
    var oldestInLastBatchNanos: UInt64 = 0
    /// What its snapshot passes leave for the publisher and for the next pass.
    var snapshotPass = SnapshotPassState()
    /// The windows of a series with nothing in any: one array every such series shows (a
    /// histogram's quantiles 0), so an idle series holds none of its own.
    var emptyWindows: [WindowStats] = []

    /// The slot of a refused metric's address.
    static let refusedSlot = -1

    /// Metrics given no series because a series cap was reached (over every source).
    var refusedSeries: Int { refusals.count }
    /// The first metric refused, for the log, and whether the memory budget refused it (else a count).
    var firstRefused: MetricDescriptor? { refusals.first }
    var firstRefusedForBytes: Bool { refusals.firstForBytes }
    /// Series with a total at its ceiling.
    var saturatedSeries: Int { saturation.count }

    init(ring: String, layout: WindowLayout, quantiles: Int, exemplarSchema: Int = 0, pageBytes: @escaping SeriesCost.PageBytes) {
        self.ring = ring
        self.layout = layout
        self.exemplarSchema = exemplarSchema
        memory = SeriesMemory(cost: SeriesCost(ring: ring, layout: layout, quantiles: quantiles, pageBytes: pageBytes))
    }

    /// The windows of bot `ring`'s series: `layout`, its slices starting a number of ticks
    /// earlier that the bot's name picks (the same in every run), less than its longest slice.
    /// Bots' windows then move to their next slice at different times: when a minute window
    /// moves, every series holding values in it changes, and a million series whose minute
    /// windows all moved at once made one snapshot of a million new figures every 15 s.
    static func layout(_ layout: WindowLayout, forBot ring: String) -> WindowLayout {
        // FNV-1a, then a finalizer so that names alike (bot-1, bot-2) land far apart.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in ring.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        hash = (hash ^ (hash >> 33)) &* 0xff51_afd7_ed55_8ccd
        hash ^= hash >> 33
        let ticks = (layout.sliceNanos.max() ?? 0) / layout.tickNanos
        return layout.phased(byNanos: hash % ticks * layout.tickNanos)
    }

    /// Series it holds (metrics admitted).
    var seriesCount: Int { tables.histograms.count + tables.signedHistograms.count + tables.counters.count + tables.gauges.count }
    /// Its series, and the memory they take.
    var usage: Usage { Usage(series: seriesCount, bytes: memory.total) }
    /// The metrics of source `source`, whose cells are looked at (but those refused a series).
    func metricCount(of source: Int) -> Int {
        source < sources.count ? sources[source].addresses.count : 0
    }
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
        for index in tables.histograms.indices { tables.histograms[index].removeSource(source) }
        for index in tables.signedHistograms.indices { tables.signedHistograms[index].removeSource(source) }
        for index in tables.counters.indices { tables.counters[index].removeSource(source) }
        for index in tables.gauges.indices.reversed() {
            if tables.gauges[index].owner == source { removeGauge(at: index) } else { tables.gauges[index].removeSource(source) }
        }
        sources[source] = Source(inUse: false)
    }

    /// Removes a gauge series (a per-worker gauge whose worker is gone): the last series takes its
    /// slot, and the addresses that lead to it follow.
    private mutating func removeGauge(at slot: Int) {
        let gone = tables.gauges[slot].metric
        if tables.gauges[slot].saturated { saturation.count -= 1 }
        if tables.gauges[slot].cached.isPacked { snapshotPass.removedFromABlock = true }
        index.set(nil, for: SeriesKey(name: gone.name, labels: gone.encodedLabels), in: tables)
        memory.charged -= memory.cost.bytes(of: gone)
        let last = tables.gauges.count - 1
        if slot != last {
            // The index checks an address against the series it leads to: moved before the series is.
            let moved = tables.gauges[last].metric
            let movedKey = SeriesKey(name: moved.name, labels: moved.encodedLabels)
            if var address = index.address(for: movedKey, in: tables) {
                address.slot = slot
                index.set(address, for: movedKey, in: tables)
            }
            tables.gauges.swapAt(slot, last)
            for source in sources.indices {
                for metric in sources[source].addresses.indices
                where sources[source].addresses[metric].kind == MetricKind.gauge.rawValue && sources[source].addresses[metric].slot == last
                {
                    sources[source].addresses[metric].slot = slot
                }
            }
        }
        tables.gauges.removeLast()
    }

    /// Takes what the bot's removed sources left before this collector started.
    mutating func seed(_ entries: [CollectorState.Entry]) {
        for entry in entries {
            restored.totals[SeriesKey(name: entry.metric, labels: entry.labels)] = MetricCells(total: entry.total, dropped: entry.dropped)
        }
    }

    /// Takes the all-time histograms the collector's last run left the bot's series; one that
    /// does not hold together is left out.
    mutating func seedHistograms(_ entries: [CollectorState.HistogramEntry]) {
        for entry in entries {
            let persisted = PersistedSignedHistogram(nonNegative: entry.histogram, negative: entry.negative ?? Histogram().persisted)
            guard let histogram = SignedHistogram(persisted) else { continue }
            restored.histograms[SeriesKey(name: entry.metric, labels: entry.labels)] = histogram
        }
    }

    /// Every histogram series' all-time histogram (with those no series took yet): what
    /// `CollectorState` keeps when the collector stops.
    var allTimeHistograms: [CollectorState.HistogramEntry] {
        let made = tables.histograms.map { series in
            CollectorState.HistogramEntry(
                metric: series.metric.name, labels: series.metric.encodedLabels, histogram: series.windows.cumulative.persisted)
        }
        let madeSigned = tables.signedHistograms.map { series in
            let cumulative = series.windows.cumulative
            return CollectorState.HistogramEntry(
                metric: series.metric.name, labels: series.metric.encodedLabels, histogram: cumulative.nonNegative.persisted,
                negative: cumulative.negative.persisted)
        }
        let waiting = restored.histograms.map { key, histogram in
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
        tables.histograms.compactMap { $0.foldedEntry(folding: source) }
            + tables.signedHistograms.compactMap { $0.foldedEntry(folding: source) }
            + tables.counters.compactMap { $0.foldedEntry(folding: source) }
            + tables.gauges.compactMap { $0.owner == nil ? $0.foldedEntry(folding: source) : nil }
    }
}

/// A bot's series, one array per kind, mutated in place (see `BotAggregator`).
struct SeriesTables {
    var histograms: [BotAggregator.Series<WindowedHistogram>] = []
    var signedHistograms: [BotAggregator.Series<WindowedSignedHistogram>] = []
    var counters: [BotAggregator.Series<WindowedCounter>] = []
    var gauges: [BotAggregator.Series<WindowedGauge>] = []

    /// The metric of the series an address leads to.
    func metric(of address: BotAggregator.SeriesAddress) -> MetricDescriptor {
        switch address.kind {
        case MetricKind.histogram.rawValue:
            address.isSigned ? signedHistograms[address.slot].metric : histograms[address.slot].metric
        case MetricKind.counter.rawValue: counters[address.slot].metric
        default: gauges[address.slot].metric
        }
    }
}

/// What the collector's last run left a bot's series not made yet, restored from its state (see
/// `CollectorState`): each is taken by its series when a source registers its metric.
struct RestoredFigures {
    /// What removed sources left: totals and drops.
    var totals: [BotAggregator.SeriesKey: MetricCells] = [:]
    /// The all-time histograms (an unsigned series takes the side at or above zero).
    var histograms: [BotAggregator.SeriesKey: SignedHistogram] = [:]
}

/// The memory a bot's series are charged (see `SeriesCost`).
struct SeriesMemory {
    let cost: SeriesCost
    /// What the series admitted were charged.
    var charged = 0
    /// What histograms' counts hold (measured as they grow, when a snapshot is taken).
    var counts = 0
    /// What the descriptors of refused metrics still hold (their strings let go).
    var refused = 0

    var total: Int { charged + counts + refused }
}

/// The metrics a bot's series caps refused.
struct SeriesRefusals {
    /// Metrics given no series because a series cap was reached (over every source).
    var count = 0
    /// The first metric refused, for the log, and whether the memory budget refused it (else a count).
    var first: MetricDescriptor?
    var firstForBytes = false
}

/// The series whose totals reached their ceiling, and those not yet said in the log.
struct SaturationLog {
    var count = 0
    var newly: [MetricDescriptor] = []
}
