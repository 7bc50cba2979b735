import RingsideSystem
import Ringside
import RingsideCommandLine
import RingsideSnapshot
import Synchronization

/// Renders a snapshot in the Prometheus text format 0.0.4.
///
/// Per metric, in base units (latencies recorded in ns are exported in seconds), each family named
/// from the metric's base name (`baseName(of:)`: its name without `_total` for a counter and
/// without a suffix its unit matches, `_us` for one in us) and the base unit's suffix, once:
/// - histogram `NAME_seconds`: cumulative `_bucket{le}`, `_sum`, `_count` over all time, so
///   Prometheus can merge bots and hosts with `histogram_quantile`;
///   summary `NAME_windowed_seconds{window,quantile}` with per-window `_sum` and `_count`;
///   gauge `NAME_window_max_seconds{window}`; in OpenMetrics, which forbids a histogram's `_sum`
///   beside negative buckets and a summary's negative quantiles and sums, a signed histogram has
///   no `_sum` and `_count` (its `+Inf` bucket is the count) and its windows are the same series
///   as three gauges (`NAME_windowed`, `NAME_windowed_sum`, `NAME_windowed_count`);
/// - counter `NAME_total` (scaled by sampling) and gauge `NAME_rate{window}` per second (with a
///   unit: `NAME_bytes_total`, `NAME_bytes_rate`);
/// - gauge `NAME` (last value) and `NAME_window_min` / `NAME_window_max{window}`;
/// plus the `ringside_ring_*`, `ringside_collector_*` and `ringside_slo_*` self-metrics,
/// `ringside_build_info`, and the `process_*` families of the client libraries.
/// Every series carries `ring`; metric labels named `ring`, `window`, `quantile`, `le` or `slo`
/// are exported as `exported_<name>`. A family name two metrics claim (with different types, or
/// two names for one exported name: `lat_us` in us and `lat` in ns are both `lat_seconds`) goes to
/// the first; the others are left out (and counted in `ringside_collector_series_conflicts`).
package enum PrometheusExporter {
    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The page for a snapshot, with the `process_*` families of `process` when given.
    package static func render(_ snapshot: Snapshot, process: ProcessMetrics? = nil) -> [UInt8] {
        PrometheusRenderer().render(snapshot, process: process)
    }

    /// `ringside_build_info`: the version and the git revision, as node_exporter's `node_exporter_build_info`.
    static let buildInfo = FixedFamily(
        "ringside_build_info", "gauge",
        "A metric with a constant '1' value labeled by version and revision from which ringside-collector was built",
        [([("version", RingsideVersion.version), ("revision", RingsideVersion.revision)], 1)])

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
    static let bucketLabels: [MetricUnit: [[UInt8]]] = Dictionary(
        uniqueKeysWithValues: MetricUnit.allCases.map { unit in
            (unit, ExportBuckets.upperBounds(for: unit).map { Array("le=\"\(formatLe($0, unit: unit))\"".utf8) })
        })
    static let infiniteBucketLabel = Array("le=\"+Inf\"".utf8)

    /// The `le` labels of a metric with steps (`ExportBuckets.stepBounds`), in base units: made
    /// once per form and step.
    static func stepBucketLabels(_ metric: MetricDescriptor) -> [[UInt8]] {
        let key = StepLabelsKey(isSigned: metric.isSigned, exponent: metric.baseUnitExponent)
        return stepLabels.withLock { cache in
            if let labels = cache[key] { return labels }
            let labels = ExportBuckets.stepBounds(signed: key.isSigned).map {
                Array("le=\"\(ExactDecimal.text(Int128($0), exponent: key.exponent))\"".utf8)
            }
            cache[key] = labels
            return labels
        }
    }
    private struct StepLabelsKey: Hashable {
        let isSigned: Bool
        let exponent: Int
    }
    private static let stepLabels = Locked<[StepLabelsKey: [[UInt8]]]>([:])

    /// The family and sample names a metric exports, computed once per metric name and unit.
    /// A class: every series of the metric shares one, without copying its arrays.
    final class FamilyNames: Sendable {
        let main: String, windowed: String, windowMax: String, windowMin: String, rate: String
        let bucket: [UInt8], sum: [UInt8], count: [UInt8]
        let windowedSum: [UInt8], windowedCount: [UInt8]
        /// Whether the histogram holds values below zero: its OpenMetrics page has no `_sum` and `_count`.
        let isSigned: Bool
        let mainBytes: [UInt8], windowedBytes: [UInt8], windowMaxBytes: [UInt8], windowMinBytes: [UInt8], rateBytes: [UInt8]
        /// The families, in the order they are written, with their types: in the text and
        /// protobuf formats, and in OpenMetrics.
        let parts: [(part: PrometheusPage.Part, family: String, type: String)]
        let openMetricsParts: [(part: PrometheusPage.Part, family: String, type: String)]

        init(_ metric: MetricDescriptor) {
            let families = Families(metric)
            (main, windowed, windowMax, windowMin, rate) = (
                families.main, families.windowed, families.windowMax, families.windowMin, families.rate
            )
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
            isSigned = metric.kind == .histogram && metric.isSigned
            parts = families.parts(openMetrics: false)
            openMetricsParts = families.parts(openMetrics: true)
        }
    }

    /// The names of the families a metric exports, and those it writes, in order, with their types.
    struct Families {
        let main: String, windowed: String, windowMax: String, windowMin: String, rate: String
        private let kind: MetricKind
        private let isSigned: Bool

        init(_ metric: MetricDescriptor) {
            let base = String(baseName(of: metric))
            let suffix = unitSuffix(metric.unit)
            main = base + suffix + (metric.kind == .counter ? "_total" : "")
            rate = base + suffix + "_rate"
            windowed = base + "_windowed" + suffix
            windowMax = base + "_window_max" + suffix
            windowMin = base + "_window_min" + suffix
            kind = metric.kind
            isSigned = metric.isSigned
        }

        func parts(openMetrics: Bool) -> [(part: PrometheusPage.Part, family: String, type: String)] {
            switch kind {
            case .histogram where isSigned && openMetrics:
                [
                    (.whole, main, "histogram"), (.windowedQuantiles, windowed, "gauge"), (.windowedSum, windowed + "_sum", "gauge"),
                    (.windowedCount, windowed + "_count", "gauge"), (.windowMax, windowMax, "gauge"),
                ]
            case .histogram: [(.whole, main, "histogram"), (.windowed, windowed, "summary"), (.windowMax, windowMax, "gauge")]
            case .counter: [(.whole, main, "counter"), (.rate, rate, "gauge")]
            case .gauge: [(.whole, main, "gauge"), (.windowMin, windowMin, "gauge"), (.windowMax, windowMax, "gauge")]
            }
        }
    }

    /// About the bytes a series of `metric` in ring `ring` takes on the text page, for the
    /// collector's memory budget: each of its lines repeats its family's name and its labels
    /// (`{ring="...",key="value",le="..."} value\n`, the value and `le` taken at 40 bytes).
    /// Asked for each series the collector admits (a million at once, at scale): nothing is made,
    /// the family names counted (``familyNameBytes(_:)``) and the labels counted in their encoding.
    package static func pageBytes(of metric: MetricDescriptor, ring: String, windows: Int, quantiles: Int) -> Int {
        let line = ring.utf8.count + 8 + labelBytes(metric.encodedLabels) + 40
        let names = familyNameBytes(metric)
        func bytes(_ part: PrometheusPage.Part, _ name: Int) -> Int {
            PrometheusPage.lines(of: part, metric: metric, windows: windows, quantiles: quantiles) * (name + line)
        }
        // The parts `Families.parts` lists for each kind.
        switch metric.kind {
        case .histogram: return bytes(.whole, names.main) + bytes(.windowed, names.windowed) + bytes(.windowMax, names.windowExtreme)
        case .counter: return bytes(.whole, names.main) + bytes(.rate, names.rate)
        case .gauge: return bytes(.whole, names.main) + bytes(.windowMin, names.windowExtreme) + bytes(.windowMax, names.windowExtreme)
        }
    }

    /// The lengths of the names `Families` gives, counted by its rules without making them
    /// (a name past 15 bytes is a heap allocation: four a series, 6 % of the drain thread while
    /// a million registered).
    static func familyNameBytes(_ metric: MetricDescriptor) -> (main: Int, windowed: Int, windowExtreme: Int, rate: Int) {
        let stem = baseName(of: metric).utf8.count + unitSuffix(metric.unit).utf8.count
        return (stem + (metric.kind == .counter ? 6 : 0), stem + 9, stem + 11, stem + 5)
    }

    /// A key's and value's bytes and 4 more for each label (`,key=""`), from the labels'
    /// encoding (`key=value` lines, as `MetricDescriptor.encodedLabels` holds them).
    static func labelBytes(_ encoded: String) -> Int {
        guard !encoded.isEmpty else { return 0 }
        var total = 4
        var inKey = true
        for byte in encoded.utf8 {
            if byte == UInt8(ascii: "\n") {
                total += 4
                inKey = true
            } else if inKey, byte == UInt8(ascii: "=") {
                inKey = false
            } else {
                total += 1
            }
        }
        return total
    }

    /// The HELP text of a family a metric exports.
    static func help(_ role: HelpRole, of metric: MetricDescriptor) -> String {
        // A time recorded in another unit than seconds is exported in seconds: said, and with the
        // name it was recorded under when the export dropped its unit (`_us`, `_ms`, `_ns`).
        let converted = metric.unit.nanoseconds != nil && metric.unit != .seconds
        let renamed = converted && !metric.name.hasSuffix("_seconds") && baseName(of: metric).utf8.count < metric.name.utf8.count
        let own =
            metric.help.isEmpty
            ? "\(metric.name) (\(metric.kind), recorded in \(metric.unit)\(converted ? ", exported in seconds" : "")) from Ringside producers"
            : metric.help + (renamed ? " (recorded as \(metric.name) in \(metric.unit), exported in seconds)" : "")
        switch role {
        case .metric: return own
        case .windowed: return own + " (sliding windows)"
        case .windowedSum: return "The sum of \(metric.name) in each sliding window"
        case .windowedCount: return "The count of \(metric.name) in each sliding window"
        case .windowMax: return "The largest \(metric.name) in each sliding window"
        case .windowMin: return "The smallest \(metric.name) set in each sliding window"
        case .rate: return "\(metric.name) per second over each sliding window"
        }
    }

    // MARK: - Names and units

    /// The suffix of the base unit a metric is exported in (times in seconds, sizes in bytes).
    static func unitSuffix(_ unit: MetricUnit) -> String {
        unit.nanoseconds != nil ? "_seconds" : unit == .bytes ? "_bytes" : ""
    }

    /// The suffixes a metric's name may end in that say its unit: dropped from the name before
    /// the base unit's suffix is added, so the unit appears once (`data_freshness_seconds`,
    /// `order_submission_latency_us` in us: `order_submission_latency_seconds`). `_seconds` is
    /// one of every time unit's (it is what the values are exported in); a unitless metric
    /// keeps its name whatever it ends in.
    static func unitSuffixes(_ unit: MetricUnit) -> [String] {
        switch unit {
        case .none: []
        case .seconds: ["_seconds"]
        case .milliseconds: ["_milliseconds", "_ms", "_seconds"]
        case .microseconds: ["_microseconds", "_us", "_seconds"]
        case .nanoseconds: ["_nanoseconds", "_ns", "_seconds"]
        case .bytes: ["_bytes"]
        }
    }

    /// The name every family of `metric` starts with: its name without a counter's `_total`,
    /// then without a suffix its unit matches (`unitSuffixes`); the whole name if that would
    /// leave nothing.
    package static func baseName(of metric: MetricDescriptor) -> Substring {
        var name = metric.name[...]
        if metric.kind == .counter, name.hasSuffix("_total"), name.utf8.count > 6 { name = name.dropLast(6) }
        for suffix in unitSuffixes(metric.unit) where name.hasSuffix(suffix) && name.utf8.count > suffix.utf8.count {
            return name.dropLast(suffix.utf8.count)
        }
        return name
    }

    /// Label names of the exporter's own, which a metric's labels are renamed away from.
    static let reservedLabelNames: [[UInt8]] = ["ring", "window", "quantile", "le", "slo"].map { Array($0.utf8) }

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

extension ProcessMetrics {
    /// The families, with HELP and TYPE as the Prometheus client libraries write them (and in their order).
    func families() -> [PrometheusExporter.FixedFamily] {
        typealias Family = PrometheusExporter.FixedFamily
        return [
            Family(
                "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
                [([], cpuSeconds)]),
            Family("process_max_fds", "gauge", "Maximum number of open file descriptors.", [([], maxFDs)]),
            Family("process_open_fds", "gauge", "Number of open file descriptors.", [([], openFDs)]),
            Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", [([], residentMemoryBytes)]),
            Family(
                "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
                [([], startTimeSeconds)]),
            Family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", [([], virtualMemoryBytes)]),
        ]
    }
}

/// Which HELP text a family gets: derived from its metric once, when the family is first claimed.
enum HelpRole: Sendable {
    case metric, windowed, windowedSum, windowedCount, windowMax, windowMin, rate
}
