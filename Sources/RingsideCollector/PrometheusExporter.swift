import Ringside

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
/// Every series carries `ring`; metric labels named `ring`, `window`, `quantile` or `le` are
/// exported as `exported_<name>`. A family name two metrics claim with different types goes to
/// the first; the others are left out (and counted in `ringside_collector_series_conflicts`).
public enum PrometheusExporter {
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    public static func render(_ snapshot: Snapshot) -> [UInt8] {
        var families = FamilySet()
        let windows = snapshot.windowNanos.map(formatDuration)
        for series in snapshot.series {
            addSeries(series, windows: windows, quantiles: snapshot.quantiles, to: &families)
        }
        addSelfMetrics(snapshot, to: &families)
        var text = TextBuffer(capacity: 256 * (snapshot.series.count + 16))
        families.write(to: &text)
        return text.bytes
    }

    // MARK: - Metric series

    private static func addSeries(_ series: SeriesSnapshot, windows: [String], quantiles: [Double],
                                  to families: inout FamilySet) {
        let metric = series.metric
        let labels = [("ring", series.ring)] + metric.labels.map { (exportedLabelName($0.key), $0.value) }
        let unit = exportUnit(metric.unit)
        let help = metric.help.isEmpty ? "\(metric.name) (\(metric.kind), recorded in \(metric.unit)) from Ringside producers"
                                       : metric.help
        switch metric.kind {
        case .histogram:
            let base = withUnitSuffix(metric.name, unit.suffix)
            guard families.claim(base, type: "histogram", help: help),
                  families.claim(withUnitSuffix(metric.name + "_windowed", unit.suffix), type: "summary",
                                 help: help + " (sliding windows)"),
                  families.claim(withUnitSuffix(metric.name + "_window_max", unit.suffix), type: "gauge",
                                 help: "The largest \(metric.name) in each sliding window")
            else { return }
            var lines = SampleLines()
            let bounds = ExportBuckets.upperBounds(for: metric.unit)
            for (bound, count) in zip(bounds, series.cumulativeBuckets) {
                lines.add(base + "_bucket", labels + [("le", formatLe(bound, unit: metric.unit))], Double(count))
            }
            lines.add(base + "_bucket", labels + [("le", "+Inf")], Double(series.cumulativeCount))
            lines.add(base + "_sum", labels, series.cumulativeSum * unit.scale)
            lines.add(base + "_count", labels, Double(series.cumulativeCount))
            families.append(lines, to: base)

            let windowed = withUnitSuffix(metric.name + "_windowed", unit.suffix)
            var summary = SampleLines()
            var maxima = SampleLines()
            for (window, stats) in zip(windows, series.windows) {
                let windowLabels = labels + [("window", window)]
                for (quantile, value) in zip(quantiles, stats.quantileValues) {
                    summary.add(windowed, windowLabels + [("quantile", quantile.formatted6)], Double(value) * unit.scale)
                }
                summary.add(windowed + "_sum", windowLabels, stats.sum * unit.scale)
                summary.add(windowed + "_count", windowLabels, Double(stats.count))
                maxima.add(withUnitSuffix(metric.name + "_window_max", unit.suffix), windowLabels, Double(stats.max) * unit.scale)
            }
            families.append(summary, to: windowed)
            families.append(maxima, to: withUnitSuffix(metric.name + "_window_max", unit.suffix))
        case .counter:
            let stem = metric.name.hasSuffix("_total") ? String(metric.name.dropLast(6)) : metric.name
            let total = withUnitSuffix(stem, unit.suffix) + "_total"
            let rate = stem + "_rate"
            guard families.claim(total, type: "counter", help: help),
                  families.claim(rate, type: "gauge", help: "\(stem) per second over each sliding window")
            else { return }
            var lines = SampleLines()
            lines.add(total, labels, series.cumulativeSum * unit.scale)
            families.append(lines, to: total)
            var rates = SampleLines()
            for (window, stats) in zip(windows, series.windows) {
                rates.add(rate, labels + [("window", window)], stats.rate * unit.scale)
            }
            families.append(rates, to: rate)
        case .gauge:
            let name = withUnitSuffix(metric.name, unit.suffix)
            let minName = withUnitSuffix(metric.name + "_window_min", unit.suffix)
            let maxName = withUnitSuffix(metric.name + "_window_max", unit.suffix)
            guard families.claim(name, type: "gauge", help: help),
                  families.claim(minName, type: "gauge", help: "The smallest \(metric.name) set in each sliding window"),
                  families.claim(maxName, type: "gauge", help: "The largest \(metric.name) set in each sliding window")
            else { return }
            var lines = SampleLines()
            if let last = series.lastValue { lines.add(name, labels, last * unit.scale) }
            families.append(lines, to: name)
            var minima = SampleLines()
            var maxima = SampleLines()
            for (window, stats) in zip(windows, series.windows) {
                guard let low = stats.gaugeMin, let high = stats.gaugeMax else { continue }
                minima.add(minName, labels + [("window", window)], low * unit.scale)
                maxima.add(maxName, labels + [("window", window)], high * unit.scale)
            }
            families.append(minima, to: minName)
            families.append(maxima, to: maxName)
        }
    }

    // MARK: - Self-metrics

    private static func addSelfMetrics(_ snapshot: Snapshot, to families: inout FamilySet) {
        func family(_ name: String, _ type: String, _ help: String, _ samples: [([(String, String)], Double)]) {
            guard families.claim(name, type: type, help: help) else { return }
            var lines = SampleLines()
            for (labels, value) in samples { lines.add(name, labels, value) }
            families.append(lines, to: name)
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
        family("ringside_collector_series_conflicts", "gauge",
               "Series left out because another metric claimed their family name with another type",
               [([], Double(families.conflicts))])

        let slos = snapshot.slos
        family("ringside_slo_violated", "gauge", "1 while the SLO is broken over its window",
               slos.map { ([("slo", $0.rule)], $0.violated ? 1 : 0) })
        family("ringside_slo_violations_total", "counter", "Times the SLO went from met to broken",
               slos.map { ([("slo", $0.rule)], Double($0.violations)) })
        family("ringside_slo_compliance_ratio", "gauge", "Fraction of the window's events within the SLO's threshold",
               slos.map { ([("slo", $0.rule)], $0.compliance) })
        family("ringside_slo_window_events", "gauge", "Events in the SLO's window across its matching series",
               slos.map { ([("slo", $0.rule)], Double($0.events)) })
    }

    // MARK: - Names and units

    /// The base unit a metric is exported in, and the factor from its own unit.
    private static func exportUnit(_ unit: MetricUnit) -> (suffix: String, scale: Double) {
        if let nanos = unit.nanoseconds { return ("_seconds", Double(nanos) / 1e9) }
        return unit == .bytes ? ("_bytes", 1) : ("", 1)
    }

    private static func withUnitSuffix(_ name: String, _ suffix: String) -> String {
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

/// Sample lines of one family, rendered as they are added.
private struct SampleLines {
    var text = TextBuffer(capacity: 512)

    mutating func add(_ name: String, _ labels: [(String, String)], _ value: Double) {
        text.append(name)
        if !labels.isEmpty {
            text.append(UInt8(ascii: "{"))
            for (index, (key, labelValue)) in labels.enumerated() {
                if index > 0 { text.append(UInt8(ascii: ",")) }
                text.append(key)
                text.append("=\"")
                appendEscaped(labelValue, inLabel: true)
                text.append(UInt8(ascii: "\""))
            }
            text.append(UInt8(ascii: "}"))
        }
        text.append(UInt8(ascii: " "))
        text.appendNumber(value)
        text.append(UInt8(ascii: "\n"))
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

/// Families in the order they were first claimed, each with its HELP, TYPE and samples.
private struct FamilySet {
    private var order: [String] = []
    private var types: [String: String] = [:]
    private var helps: [String: String] = [:]
    private var samples: [String: TextBuffer] = [:]
    private(set) var conflicts = 0

    /// Claims `name` for `type`; false (a conflict) if another type has it.
    mutating func claim(_ name: String, type: String, help: String) -> Bool {
        if let existing = types[name] {
            if existing != type { conflicts += 1 }
            return existing == type
        }
        order.append(name)
        types[name] = type
        helps[name] = help
        return true
    }

    mutating func append(_ lines: SampleLines, to name: String) {
        samples[name, default: TextBuffer(capacity: 1024)].append(bytes: lines.text.bytes)
    }

    func write(to text: inout TextBuffer) {
        for name in order {
            guard let type = types[name], let help = helps[name] else { continue }
            text.append("# HELP \(name) ")
            var escapedHelp = SampleLines()
            escapedHelp.appendEscaped(help, inLabel: false)
            text.append(bytes: escapedHelp.text.bytes)
            text.append("\n# TYPE \(name) \(type)\n")
            if let lines = samples[name] { text.append(bytes: lines.bytes) }
        }
    }
}
