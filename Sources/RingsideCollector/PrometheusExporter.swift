import Ringside
import Synchronization

/// Renders a snapshot in the Prometheus text format 0.0.4.
///
/// Per metric, in base units (latencies recorded in ns are exported in seconds):
/// - histogram `NAME_seconds`: cumulative `_bucket{le}`, `_sum`, `_count` over all time, so
///   Prometheus can merge bots and hosts with `histogram_quantile`;
///   summary `NAME_windowed_seconds{window,quantile}` with per-window `_sum` and `_count`;
///   gauge `NAME_window_max_seconds{window}`;
/// - counter `NAME_total` (scaled by sampling) and gauge `NAME_rate{window}` per second;
/// - gauge `NAME` (last value) and `NAME_window_min` / `NAME_window_max{window}`;
/// plus the `ringside_ring_*`, `ringside_collector_*` and `ringside_slo_*` self-metrics.
/// Every series carries `ring`; metric labels named `ring`, `window`, `quantile`, `le` or `slo`
/// are exported as `exported_<name>`. A family name two metrics claim with different types goes
/// to the first; the others are left out (and counted in `ringside_collector_series_conflicts`).
public enum PrometheusExporter {
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Renders a snapshot from scratch.
    public static func render(_ snapshot: Snapshot) -> [UInt8] {
        PrometheusRenderer().render(snapshot)
    }

    /// Label text shared by every series of one render: `window="1s"`, `window="1s",quantile="0.5"`.
    struct SharedLabels {
        let windows: [[UInt8]]
        let windowQuantiles: [[[UInt8]]]

        init(windows: [String], quantiles: [Double]) {
            self.windows = windows.map { Array("window=\"\($0)\"".utf8) }
            windowQuantiles = windows.map { window in
                quantiles.map { Array("window=\"\(window)\",quantile=\"\($0.formatted6)\"".utf8) }
            }
        }
    }

    /// `le="..."` for every export bucket bound, per unit: the same for every render.
    static let bucketLabels: [MetricUnit: [[UInt8]]] = Dictionary(uniqueKeysWithValues: MetricUnit.allCases.map { unit in
        (unit, ExportBuckets.upperBounds(for: unit).map { Array("le=\"\(formatLe($0, unit: unit))\"".utf8) })
    })
    static let infiniteBucketLabel = Array("le=\"+Inf\"".utf8)

    /// The family and sample names a metric exports, computed once per metric name and unit.
    struct FamilyNames: Sendable {
        let main: String, windowed: String, windowMax: String, windowMin: String, rate: String
        let bucket: [UInt8], sum: [UInt8], count: [UInt8]
        let windowedSum: [UInt8], windowedCount: [UInt8]
        let mainBytes: [UInt8], windowedBytes: [UInt8], windowMaxBytes: [UInt8], windowMinBytes: [UInt8], rateBytes: [UInt8]

        init(_ metric: MetricDescriptor) {
            let suffix = exportUnit(metric.unit).suffix
            if metric.kind == .counter {
                let stem = metric.name.hasSuffix("_total") ? String(metric.name.dropLast(6)) : metric.name
                main = withUnitSuffix(stem, suffix) + "_total"
                rate = stem + "_rate"
            } else {
                main = withUnitSuffix(metric.name, suffix)
                rate = metric.name + "_rate"
            }
            windowed = withUnitSuffix(metric.name + "_windowed", suffix)
            windowMax = withUnitSuffix(metric.name + "_window_max", suffix)
            windowMin = withUnitSuffix(metric.name + "_window_min", suffix)
            bucket = Array((main + "_bucket").utf8)
            sum = Array((main + "_sum").utf8)
            count = Array((main + "_count").utf8)
            windowedSum = Array((windowed + "_sum").utf8)
            windowedCount = Array((windowed + "_count").utf8)
            mainBytes = Array(main.utf8)
            windowedBytes = Array(windowed.utf8)
            windowMaxBytes = Array(windowMax.utf8)
            windowMinBytes = Array(windowMin.utf8)
            rateBytes = Array(rate.utf8)
        }
    }

    /// The series' own labels, rendered once for all of its lines and kept for its whole life.
    static func labels(of series: SeriesSnapshot) -> [UInt8] {
        var text = SampleLines()
        text.appendLabels([("ring", series.ring)] + series.metric.labels.map { (exportedLabelName($0.key), $0.value) })
        return text.text.bytes
    }

    /// The whole-series part: cumulative buckets, sum and count; a counter's total; a gauge's value.
    static func renderWhole(_ series: SeriesSnapshot, names: FamilyNames, labels: [UInt8]) -> RenderedPiece {
        let metric = series.metric
        let scale = exportUnit(metric.unit).scale
        var lines = SampleLines(text: TextBuffer(capacity: metric.kind == .histogram ? 2048 : 256))
        var piece = RenderedPiece()
        switch metric.kind {
        case .histogram:
            for (le, count) in zip(bucketLabels[metric.unit] ?? [], series.cumulativeBuckets) {
                lines.add(names.bucket, labels, le, Double(count))
            }
            lines.add(names.bucket, labels, infiniteBucketLabel, Double(series.cumulativeCount))
            lines.add(names.sum, labels, [], series.cumulativeSum * scale)
            lines.add(names.count, labels, [], Double(series.cumulativeCount))
            piece.close(names.main, "histogram", .metric, at: lines)
        case .counter:
            lines.add(names.mainBytes, labels, [], series.cumulativeSum * scale)
            piece.close(names.main, "counter", .metric, at: lines)
        case .gauge:
            if let last = series.lastValue { lines.add(names.mainBytes, labels, [], last * scale) }
            piece.close(names.main, "gauge", .metric, at: lines)
        }
        piece.text = lines.text.bytes
        return piece
    }

    /// The windowed part: quantiles, sums, counts and maxima per window; rates; gauge extremes.
    static func renderWindows(_ series: SeriesSnapshot, names: FamilyNames, shared: SharedLabels,
                              labels: [UInt8]) -> RenderedPiece {
        let metric = series.metric
        let scale = exportUnit(metric.unit).scale
        var lines = SampleLines(text: TextBuffer(capacity: metric.kind == .histogram ? 2048 : 512))
        var piece = RenderedPiece()
        let windows = series.windows.indices.filter { $0 < shared.windows.count }
        // Histogram values are whole numbers of the unit: times print as exact decimal seconds.
        let nanosPerUnit = metric.unit.nanoseconds
        func addValue(_ name: [UInt8], _ extra: [UInt8], _ value: UInt64) {
            if let nanosPerUnit {
                lines.add(name, labels, extra, seconds: value &* nanosPerUnit)
            } else {
                lines.add(name, labels, extra, Double(value))
            }
        }
        switch metric.kind {
        case .histogram:
            for window in windows {
                let stats = series.windows[window]
                for (quantile, value) in zip(shared.windowQuantiles[window], stats.quantileValues) {
                    addValue(names.windowedBytes, quantile, value)
                }
                lines.add(names.windowedSum, labels, shared.windows[window], stats.sum * scale)
                lines.add(names.windowedCount, labels, shared.windows[window], Double(stats.count))
            }
            piece.close(names.windowed, "summary", .windowed, at: lines)
            for window in windows { addValue(names.windowMaxBytes, shared.windows[window], series.windows[window].max) }
            piece.close(names.windowMax, "gauge", .windowMax, at: lines)
        case .counter:
            for window in windows {
                lines.add(names.rateBytes, labels, shared.windows[window], series.windows[window].rate * scale)
            }
            piece.close(names.rate, "gauge", .rate, at: lines)
        case .gauge:
            for window in windows {
                if let low = series.windows[window].gaugeMin {
                    lines.add(names.windowMinBytes, labels, shared.windows[window], low * scale)
                }
            }
            piece.close(names.windowMin, "gauge", .windowMin, at: lines)
            for window in windows {
                if let high = series.windows[window].gaugeMax {
                    lines.add(names.windowMaxBytes, labels, shared.windows[window], high * scale)
                }
            }
            piece.close(names.windowMax, "gauge", .windowMax, at: lines)
        }
        piece.text = lines.text.bytes
        return piece
    }

    /// The HELP text of a family a metric exports.
    static func help(_ role: HelpRole, of metric: MetricDescriptor?) -> String {
        guard let metric else { if case let .fixed(text) = role { return text }; return "" }
        let own = metric.help.isEmpty ? "\(metric.name) (\(metric.kind), recorded in \(metric.unit)) from Ringside producers"
                                      : metric.help
        switch role {
        case .metric: return own
        case .windowed: return own + " (sliding windows)"
        case .windowMax: return "The largest \(metric.name) in each sliding window"
        case .windowMin: return "The smallest \(metric.name) set in each sliding window"
        case .rate: return "\(metric.name) per second over each sliding window"
        case let .fixed(text): return text
        }
    }

    // MARK: - Self-metrics

    /// A family of the collector's own, as one rendered "series".
    static func selfFamily(_ name: String, _ type: String, _ help: String,
                           _ samples: [([(String, String)], Double)]) -> RenderedPiece {
        var lines = SampleLines()
        let nameBytes = Array(name.utf8)
        for (labels, value) in samples {
            var rendered = SampleLines(text: TextBuffer(capacity: 64))
            rendered.appendLabels(labels)
            lines.add(nameBytes, rendered.text.bytes, [], value)
        }
        var piece = RenderedPiece()
        piece.close(name, type, .fixed(help), at: lines)
        piece.text = lines.text.bytes
        return piece
    }

    static func selfMetrics(_ snapshot: Snapshot) -> [RenderedPiece] {
        var result: [RenderedPiece] = []
        func family(_ name: String, _ type: String, _ help: String, _ samples: [([(String, String)], Double)]) {
            result.append(selfFamily(name, type, help, samples))
        }
        let attached = snapshot.rings.filter { $0.state != .skipped }
        func perRing(_ value: (RingSnapshot) -> Double) -> [([(String, String)], Double)] {
            attached.map { ([("ring", $0.name)], value($0)) }
        }
        family("ringside_ring_producer_alive", "gauge", "1 while the ring's producer process holds its lock",
               perRing { $0.state == .live ? 1 : 0 })
        family("ringside_ring_producer_heartbeat_age_seconds", "gauge", "Seconds since the producer last wrote or attached",
               perRing { $0.heartbeatAgeSeconds })
        family("ringside_ring_capacity_records", "gauge", "Records the ring holds", perRing { Double($0.capacity) })
        family("ringside_ring_backlog_records", "gauge", "Records published and not yet drained", perRing { Double($0.backlog) })
        family("ringside_ring_records_written_total", "counter", "Records the producers published into the ring",
               perRing { Double($0.recordsTotal) })
        family("ringside_ring_records_dropped_total", "counter", "Records producers dropped because the ring was full",
               perRing { Double($0.droppedTotal) })
        family("ringside_ring_records_drained_total", "counter", "Records this collector drained from the ring",
               perRing { Double($0.drainedTotal) })
        family("ringside_ring_records_rejected_total", "counter",
               "Drained records refused as invalid (unknown metric, kind or sequence)", perRing { Double($0.rejectedTotal) })
        family("ringside_ring_skipped", "gauge", "1 for a ring the collector cannot read (see its log and /health)",
               snapshot.rings.filter { $0.state == .skipped }.map { ([("ring", $0.name)], 1) })

        let stats = snapshot.collector
        family("ringside_collector_records_drained_total", "counter", "Records drained from every ring",
               [([], Double(stats.recordsDrained))])
        family("ringside_collector_drain_records_per_second", "gauge", "Records drained per second, over the last second",
               [([], stats.drainRate)])
        family("ringside_collector_lag_seconds", "gauge", "Age of the oldest record drained in the last busy pass",
               [([], stats.lagSeconds)])
        family("ringside_collector_pass_duration_seconds", "gauge", "How long the last drain pass took",
               [([], stats.lastPassSeconds)])
        family("ringside_collector_rings", "gauge", "Rings attached", [([], Double(attached.count))])
        family("ringside_collector_start_time_seconds", "gauge", "When the collector started, in Unix seconds",
               [([], Double(stats.startedRealtimeNanos) / 1e9)])

        let slos = snapshot.slos
        family("ringside_slo_violated", "gauge", "1 while the SLO is broken over its window",
               slos.map { ([("slo", $0.rule)], $0.violated ? 1 : 0) })
        family("ringside_slo_violations_total", "counter", "Times the SLO went from met to broken",
               slos.map { ([("slo", $0.rule)], Double($0.violations)) })
        family("ringside_slo_compliance_ratio", "gauge", "Fraction of the window's events within the SLO's threshold",
               slos.map { ([("slo", $0.rule)], $0.compliance) })
        family("ringside_slo_window_events", "gauge", "Events in the SLO's window across its matching series",
               slos.map { ([("slo", $0.rule)], Double($0.events)) })
        return result
    }

    // MARK: - Names and units

    /// The base unit a metric is exported in, and the factor from its own unit.
    static func exportUnit(_ unit: MetricUnit) -> (suffix: String, scale: Double) {
        if let nanos = unit.nanoseconds { return ("_seconds", Double(nanos) / 1e9) }
        return unit == .bytes ? ("_bytes", 1) : ("", 1)
    }

    static func withUnitSuffix(_ name: String, _ suffix: String) -> String {
        suffix.isEmpty || name.hasSuffix(suffix) ? name : name + suffix
    }

    private static func exportedLabelName(_ key: String) -> String {
        ["ring", "window", "quantile", "le", "slo"].contains(key) ? "exported_" + key : key
    }

    /// A bucket bound in base units, exactly: 100 ns is `0.0000001`, never `1.0000000000000001e-07`.
    static func formatLe(_ bound: UInt64, unit: MetricUnit) -> String {
        guard let nanosPerUnit = unit.nanoseconds else { return String(bound) }
        let nanos = bound * nanosPerUnit
        var fraction = String(nanos % 1_000_000_000)
        fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        return String(nanos / 1_000_000_000) + (fraction.isEmpty ? "" : "." + fraction)
    }
}

/// Which HELP text a family gets: derived from its metric once, when the family is first claimed.
enum HelpRole: Sendable {
    case metric, windowed, windowMax, windowMin, rate
    case fixed(String)
}

/// Lines for one or more families: `text` holds them all, family after family; each part ends
/// at `end`.
struct RenderedPiece: Sendable {
    struct Part: Sendable {
        let family: String
        let type: String
        let help: HelpRole
        let end: Int
    }

    var text: [UInt8] = []
    var parts: [Part] = []

    mutating func close(_ family: String, _ type: String, _ help: HelpRole, at lines: SampleLines) {
        parts.append(Part(family: family, type: type, help: help, end: lines.text.count))
    }
}

/// Renders snapshots, keeping each series' text while its versions stay the same: a scrape
/// formats only the parts that changed since the last one (a window sliding re-renders the
/// windowed lines, not the cumulative buckets). Safe to call from any thread.
public final class PrometheusRenderer: Sendable {
    private struct Cached: Sendable {
        var labels: [UInt8]
        var wholeVersion: UInt64
        var whole: RenderedPiece
        var version: UInt64
        var windows: RenderedPiece
    }

    private let cache = Mutex<[UInt64: Cached]>([:])

    public init() {}

    public func render(_ snapshot: Snapshot) -> [UInt8] {
        let shared = PrometheusExporter.SharedLabels(windows: snapshot.windowNanos.map(formatDuration),
                                                     quantiles: snapshot.quantiles)
        let previous = cache.withLock { $0 }
        var current: [UInt64: Cached] = [:]
        current.reserveCapacity(snapshot.series.count)
        var names: [NameKey: PrometheusExporter.FamilyNames] = [:]
        var families = FamilySet()
        for series in snapshot.series {
            let old = previous[series.id]
            var familyNames: PrometheusExporter.FamilyNames {
                let key = NameKey(name: series.metric.name, unit: series.metric.unit, kind: series.metric.kind)
                if let known = names[key] { return known }
                let made = PrometheusExporter.FamilyNames(series.metric)
                names[key] = made
                return made
            }
            let labels = old?.labels ?? PrometheusExporter.labels(of: series)
            let whole = old.flatMap { $0.wholeVersion == series.wholeVersion ? $0.whole : nil }
                ?? PrometheusExporter.renderWhole(series, names: familyNames, labels: labels)
            let windows = old.flatMap { $0.version == series.version ? $0.windows : nil }
                ?? PrometheusExporter.renderWindows(series, names: familyNames, shared: shared, labels: labels)
            current[series.id] = Cached(labels: labels, wholeVersion: series.wholeVersion, whole: whole,
                                        version: series.version, windows: windows)
            families.add([whole, windows], metric: series.metric)
        }
        for piece in PrometheusExporter.selfMetrics(snapshot) { families.add([piece], metric: nil) }
        families.addConflictsFamily()
        cache.withLock { $0 = current }
        return families.write()
    }

    private struct NameKey: Hashable {
        let name: String
        let unit: MetricUnit
        let kind: MetricKind
    }
}

/// Sample lines, rendered as they are added.
struct SampleLines {
    var text = TextBuffer(capacity: 512)

    /// A sample whose labels are already rendered: the series' own, then `extra` (window, le ...).
    mutating func add(_ name: [UInt8], _ labels: [UInt8], _ extra: [UInt8], _ value: Double) {
        appendHead(name, labels, extra)
        text.appendNumber(value)
        text.append(UInt8(ascii: "\n"))
    }

    /// A sample of a time, given in nanoseconds and printed as exact decimal seconds.
    mutating func add(_ name: [UInt8], _ labels: [UInt8], _ extra: [UInt8], seconds nanoseconds: UInt64) {
        appendHead(name, labels, extra)
        text.appendSeconds(nanoseconds: nanoseconds)
        text.append(UInt8(ascii: "\n"))
    }

    private mutating func appendHead(_ name: [UInt8], _ labels: [UInt8], _ extra: [UInt8]) {
        text.append(bytes: name)
        if !labels.isEmpty || !extra.isEmpty {
            text.append(UInt8(ascii: "{"))
            text.append(bytes: labels)
            if !labels.isEmpty && !extra.isEmpty { text.append(UInt8(ascii: ",")) }
            text.append(bytes: extra)
            text.append(UInt8(ascii: "}"))
        }
        text.append(UInt8(ascii: " "))
    }

    /// `key="value",...` with values escaped.
    mutating func appendLabels(_ labels: [(String, String)]) {
        for (index, (key, value)) in labels.enumerated() {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            text.append(key)
            text.append("=\"")
            appendEscaped(value, inLabel: true)
            text.append(UInt8(ascii: "\""))
        }
    }

    /// Escapes `\`, newlines and (in label values) `"`, as the text format requires.
    mutating func appendEscaped(_ value: String, inLabel: Bool) {
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): text.append("\\\\")
            case UInt8(ascii: "\n"): text.append("\\n")
            case UInt8(ascii: "\"") where inLabel: text.append("\\\"")
            default: text.append(byte)
            }
        }
    }
}

/// Families in the order they were first claimed, each with its HELP, TYPE and its members'
/// lines (ranges of the pieces' texts, copied once when written).
struct FamilySet {
    private struct Family {
        let name: String
        let type: String
        let help: String
        /// (piece, start, end) into `pieces[...].text`.
        var members: [(Int, Int, Int)] = []
    }

    private var families: [Family] = []
    private var index: [String: Int] = [:]
    private var pieces: [RenderedPiece] = []
    private(set) var conflicts = 0

    /// Adds a series' pieces if it can claim every one of their families, else none of them.
    mutating func add(_ seriesPieces: [RenderedPiece], metric: MetricDescriptor?) {
        for piece in seriesPieces {
            for part in piece.parts {
                if let existing = index[part.family], families[existing].type != part.type {
                    conflicts += 1
                    return
                }
            }
        }
        for piece in seriesPieces {
            let number = pieces.count
            pieces.append(piece)
            var start = 0
            for part in piece.parts {
                let position: Int
                if let existing = index[part.family] {
                    position = existing
                } else {
                    position = families.count
                    index[part.family] = position
                    families.append(Family(name: part.family, type: part.type,
                                           help: PrometheusExporter.help(part.help, of: metric)))
                }
                if part.end > start { families[position].members.append((number, start, part.end)) }
                start = part.end
            }
        }
    }

    /// Adds the family that counts conflicts, now that they are all known.
    mutating func addConflictsFamily() {
        add([PrometheusExporter.selfFamily("ringside_collector_series_conflicts", "gauge",
                                           "Series left out because another metric claimed their family name with another type",
                                           [([], Double(conflicts))])], metric: nil)
    }

    /// The page: every family's HELP, TYPE and lines, copied once into the result.
    func write() -> [UInt8] {
        var page: [UInt8] = []
        page.reserveCapacity(pieces.reduce(0) { $0 + $1.text.count } + families.count * 200)
        pieces.withUnsafeBufferPointer { pieces in
            for family in families {
                var head = SampleLines(text: TextBuffer(capacity: 256))
                head.text.append("# HELP \(family.name) ")
                head.appendEscaped(family.help, inLabel: false)
                head.text.append("\n# TYPE \(family.name) \(family.type)\n")
                page += head.text.bytes
                for (member, start, end) in family.members {
                    pieces[member].text.withUnsafeBufferPointer { page.append(contentsOf: $0[start..<end]) }
                }
            }
        }
        return page
    }
}
