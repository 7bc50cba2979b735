import Dispatch
import Glibc
import Ringside
import RingsideAggregation
import RingsideCommandLine
import RingsideSnapshot
import RingsideSystem

/// One /metrics page, written in one pass.
///
/// Series of one metric (name, unit and kind) across rings export the same families, so they are
/// grouped first; each family then gets its HELP and TYPE once, followed by the lines of every
/// group that exports it. Nothing is rendered twice and nothing is allocated per line: a page of
/// 10,000 series is some 200,000 lines, written in slices on a few threads (see `write`).
struct PrometheusPage {
    /// The families a series' lines fall into.
    enum Part {
        case whole, windowed, windowMax, windowMin, rate

        var help: HelpRole {
            switch self {
            case .whole: return .metric
            case .windowed: return .windowed
            case .windowMax: return .windowMax
            case .windowMin: return .windowMin
            case .rate: return .rate
            }
        }
    }

    /// The series of one metric across rings.
    private struct MetricGroup {
        let names: PrometheusExporter.FamilyNames
        let metric: MetricDescriptor
        var members: [Int] = []
    }

    private enum Member {
        /// One part of every series of a group.
        case group(Int, Part)
        /// The collector's own figures: samples, and their lines rendered already.
        case fixed(PrometheusExporter.FixedFamily)
    }

    private struct Family {
        let name: String
        let type: String
        let help: String
        var members: [Member] = []
    }

    private let snapshot: Snapshot
    private var groups: [MetricGroup] = []
    private var families: [Family] = []
    private var familyIndex: [String: Int] = [:]
    /// Series left out because another metric claimed one of their family names with another type.
    private(set) var conflicts = 0

    init(_ snapshot: Snapshot, process: ProcessMetrics? = nil) {
        self.snapshot = snapshot
        var groupIndex: [GroupKey: Int] = [:]
        for position in snapshot.series.indices {
            let metric = snapshot.series[position].metric
            let key = GroupKey(name: metric.name, unit: metric.unit, kind: metric.kind)
            if let known = groupIndex[key] {
                groups[known].members.append(position)
            } else {
                groupIndex[key] = groups.count
                groups.append(MetricGroup(names: PrometheusExporter.FamilyNames(metric), metric: metric, members: [position]))
            }
        }
        for (number, group) in groups.enumerated() {
            let parts = group.names.parts
            if claim(parts.map { ($0.family, $0.type) }) {
                for part in parts {
                    add(
                        .group(number, part.part), to: part.family, type: part.type,
                        help: PrometheusExporter.help(part.part.help, of: group.metric))
                }
            } else {
                conflicts += group.members.count
            }
        }
        for family in PrometheusExporter.selfMetrics(snapshot) { addFixed(family) }
        addFixed(PrometheusExporter.buildInfo)
        for family in process?.families() ?? [] { addFixed(family) }
        addFixed(
            PrometheusExporter.FixedFamily(
                "ringside_collector_series_conflicts", "gauge",
                "Series left out because another metric claimed their family name "
                    + "with another type",
                [([], Double(conflicts))]))
    }

    private struct GroupKey: Hashable {
        let name: String
        let unit: MetricUnit
        let kind: MetricKind
    }

    /// Whether every family is free or already of the same type.
    private func claim(_ wanted: [(family: String, type: String)]) -> Bool {
        wanted.allSatisfy { want in familyIndex[want.family].map { families[$0].type == want.type } ?? true }
    }

    private mutating func add(_ member: Member, to family: String, type: String, help: @autoclosure () -> String) {
        if let known = familyIndex[family] {
            families[known].members.append(member)
        } else {
            familyIndex[family] = families.count
            families.append(Family(name: family, type: type, help: help(), members: [member]))
        }
    }

    private mutating func addFixed(_ family: PrometheusExporter.FixedFamily) {
        guard claim([(family.name, family.type)]) else {
            conflicts += 1
            return
        }
        add(.fixed(family), to: family.name, type: family.type, help: family.help)
    }

    // MARK: - Writing

    /// One step of writing the page: text as it is (a family's HELP and TYPE, the collector's own
    /// lines), or one part of one series.
    fileprivate enum Step {
        case text([UInt8])
        case series(group: Int, part: Part, position: Int)
    }

    /// The page's bytes. A large page is written in slices on several threads at once, each
    /// slice a run of whole steps into its own buffer (from `buffers`, reused), then joined.
    func write(reusing buffers: inout [TextBuffer], threads: Int = PrometheusPage.threads, openMetrics: Bool = false) -> [UInt8] {
        let labels = SeriesLabels(snapshot.series)
        let shared = PrometheusExporter.SharedLabels(
            windows: snapshot.windowNanos.map { formatDuration($0) },
            quantiles: snapshot.quantiles)
        var (steps, lines) = plan(openMetrics: openMetrics)
        if openMetrics {
            steps.append(.text(Array("# EOF\n".utf8)))
            lines.append(1)
        }
        let slices = Self.split(lines, into: lines.reduce(0, +) < Self.linesPerThread ? 1 : threads)
        // Generous: room reserved and not written costs no memory, while a buffer that must grow
        // is copied, and holds the slice twice for a moment (a line with a window and a quantile
        // takes some 64 bytes beside its series' labels).
        let bytesPerLine = 96 + (snapshot.series.isEmpty ? 0 : labels.text.count / snapshot.series.count)
        while buffers.count < slices.count { buffers.append(TextBuffer(capacity: 0)) }
        let used = Array(buffers.prefix(slices.count))
        for (buffer, slice) in zip(used, slices) {
            buffer.removeAll()
            buffer.reserveCapacity(lines[slice].reduce(0, +) * bytesPerLine)
        }
        // Series are read in place: copying one (its strings and arrays) costs more than its lines.
        snapshot.series.withUnsafeBufferPointer { series in
            labels.text.withBytes { labelText in
                let writer = SliceWriter(
                    steps: steps, slices: slices, buffers: used,
                    names: groups.map(\.names), shared: shared, series: series,
                    labelText: labelText, labelRanges: labels.ranges)
                DispatchQueue.concurrentPerform(iterations: slices.count) { writer.write(slice: $0) }
            }
        }
        let total = used.reduce(0) { $0 + $1.count }
        return [UInt8](unsafeUninitializedCapacity: total) { page, count in
            for buffer in used {
                buffer.withBytes { bytes in
                    if let source = bytes.baseAddress { (page.baseAddress! + count).initialize(from: source, count: bytes.count) }
                    count += bytes.count
                }
            }
        }
    }

    /// Threads a large page is written on, and the lines that are worth a thread.
    static let threads = max(1, min(4, (try? System.sysconf(_SC_NPROCESSORS_ONLN)) ?? 1))
    static let linesPerThread = 20_000

    /// The steps in page order, and about how many lines each writes.
    private func plan(openMetrics: Bool) -> (steps: [Step], lines: [Int]) {
        let windows = min(snapshot.windowNanos.count, snapshot.series.first?.windows.count ?? 0)
        var steps: [Step] = []
        var lines: [Int] = []
        steps.reserveCapacity(snapshot.series.count * 3 + families.count)
        lines.reserveCapacity(snapshot.series.count * 3 + families.count)
        for family in families {
            let head = TextBuffer(capacity: 256)
            if openMetrics {
                // OpenMetrics names a counter's family without the `_total` of its samples, and
                // gives the unit a family's name ends in.
                let name = family.type == "counter" && family.name.hasSuffix("_total") ? String(family.name.dropLast(6)) : family.name
                head.append("# HELP \(name) ")
                head.appendEscaped(family.help, inLabel: true)
                head.append("\n# TYPE \(name) \(family.type)\n")
                if let unit = ["seconds", "bytes"].first(where: { name.hasSuffix("_" + $0) }) { head.append("# UNIT \(name) \(unit)\n") }
            } else {
                head.append("# HELP \(family.name) ")
                head.appendEscaped(family.help, inLabel: false)
                head.append("\n# TYPE \(family.name) \(family.type)\n")
            }
            steps.append(.text(head.bytes))
            lines.append(2)
            for member in family.members {
                switch member {
                case let .fixed(fixed):
                    steps.append(.text(fixed.lines))
                    lines.append(1)
                case let .group(number, part):
                    let perSeries = Self.lines(
                        of: part, metric: groups[number].metric, windows: windows,
                        quantiles: snapshot.quantiles.count)
                    for position in groups[number].members {
                        steps.append(.series(group: number, part: part, position: position))
                        lines.append(perSeries)
                    }
                }
            }
        }
        return (steps, lines)
    }

    /// The lines part `part` of a series of `metric` writes.
    static func lines(of part: Part, metric: MetricDescriptor, windows: Int, quantiles: Int) -> Int {
        switch part {
        case .whole:
            // A histogram's buckets, +Inf, sum and count; else one value.
            return metric.kind == .histogram ? (PrometheusExporter.bucketLabels[metric.unit]?.count ?? 0) + 3 : 1
        case .windowed: return windows * (quantiles + 2)
        case .windowMax, .windowMin, .rate: return windows
        }
    }

    // MARK: - Protobuf

    /// The page as delimited `MetricFamily` messages (io.prometheus.client): the same families,
    /// with native buckets on histograms that have them. Written on the calling thread: a scraper
    /// that asks for protobuf wants native histograms, and their pages are not the hot path.
    func writeProtobuf() -> [UInt8] {
        var writer = ProtobufWriter()
        let windows = snapshot.windowNanos.map { formatDuration($0) }
        for family in families {
            let type: ProtobufWriter.MetricType =
                switch family.type {
                case "counter": .counter
                case "gauge": .gauge
                case "summary": .summary
                case "histogram": .histogram
                default: .untyped
                }
            writer.metricFamily(name: family.name, help: family.help, type: type) { out in
                for member in family.members {
                    switch member {
                    case let .fixed(fixed):
                        for (labels, value) in fixed.samples {
                            out.metric(labels: labels.map { (name: $0.0, value: $0.1) }) {
                                if type == .counter { $0.counterValue(value) } else { $0.gaugeValue(value) }
                            }
                        }
                    case let .group(_, part):
                        for position in groupMembers(of: member) {
                            ProtobufSeries(
                                series: snapshot.series[position], windows: windows, quantiles: snapshot.quantiles,
                                nativeSchema: snapshot.nativeHistogramSchema
                            )
                            .write(part, into: &out)
                        }
                    }
                }
            }
        }
        return writer.bytes
    }

    private func groupMembers(of member: Member) -> [Int] {
        if case let .group(number, _) = member { return groups[number].members }
        return []
    }

    /// Splits `weights` into at most `count` runs of about equal sums.
    static func split(_ weights: [Int], into count: Int) -> [Range<Int>] {
        let total = weights.reduce(0, +)
        var runs: [Range<Int>] = []
        var start = 0
        var sum = 0
        for (index, weight) in weights.enumerated() {
            sum += weight
            if runs.count < count - 1, sum * count >= total * (runs.count + 1) {
                runs.append(start..<index + 1)
                start = index + 1
            }
        }
        runs.append(start..<weights.count)
        return runs
    }
}

/// Writes slices of a page's steps, one slice per thread.
private struct SliceWriter: @unchecked Sendable {
    // @unchecked: while the threads run, everything here is only read, except `buffers`, of
    // which each thread writes its own slice's.
    let steps: [PrometheusPage.Step]
    let slices: [Range<Int>]
    let buffers: [TextBuffer]
    let names: [PrometheusExporter.FamilyNames]
    let shared: PrometheusExporter.SharedLabels
    let series: UnsafeBufferPointer<SeriesSnapshot>
    let labelText: UnsafeBufferPointer<UInt8>
    let labelRanges: [Range<Int>]

    func write(slice: Int) {
        let page = buffers[slice]
        for step in steps[slices[slice]] {
            switch step {
            case let .text(text):
                page.append(bytes: text)
            case let .series(group, part, position):
                SeriesLines(page: page, names: names[group], shared: shared)
                    .write(
                        part, of: series.baseAddress! + position,
                        labels: UnsafeBufferPointer(rebasing: labelText[labelRanges[position]]))
            }
        }
    }
}

/// Every series' own labels (`ring="...",key="value"`), rendered once into one buffer.
private struct SeriesLabels {
    let text = TextBuffer(capacity: 64 * 1024)
    var ranges: [Range<Int>] = []

    init(_ series: [SeriesSnapshot]) {
        ranges.reserveCapacity(series.count)
        for position in series.indices {
            let start = text.count
            text.append("ring=\"")
            text.appendEscaped(series[position].ring, inLabel: true)
            text.append(UInt8(ascii: "\""))
            text.appendEncodedLabels(series[position].metric.encodedLabels)
            ranges.append(start..<text.count)
        }
    }
}

/// The lines of one series, by part.
private struct SeriesLines {
    let page: TextBuffer
    let names: PrometheusExporter.FamilyNames
    let shared: PrometheusExporter.SharedLabels

    /// The series is read through a pointer: passing it by value would copy its strings and arrays.
    func write(_ part: PrometheusPage.Part, of series: UnsafePointer<SeriesSnapshot>, labels: UnsafeBufferPointer<UInt8>) {
        let kind = series.pointee.metric.kind
        let nanosPerUnit = series.pointee.metric.unit.nanoseconds
        let windowCount = min(series.pointee.windows.count, shared.windows.count)
        switch (kind, part) {
        case (.histogram, .whole):
            let bounds = PrometheusExporter.bucketLabels[series.pointee.metric.unit] ?? []
            let counts = series.pointee.allTime?.classicCounts(unit: series.pointee.metric.unit) ?? []
            for (le, count) in zip(bounds, counts) { sample(names.bucket, labels, le, count: count) }
            sample(names.bucket, labels, PrometheusExporter.infiniteBucketLabel, count: series.pointee.cumulativeCount)
            sample(names.sum, labels, [], measure: series.pointee.cumulativeSum, nanosPerUnit)
            sample(names.count, labels, [], count: series.pointee.cumulativeCount)
        case (.histogram, .windowed):
            for window in 0..<windowCount {
                for (quantile, value) in zip(shared.windowQuantiles[window], series.pointee.windows[window].quantileValues) {
                    sample(names.windowedBytes, labels, quantile, whole: value, nanosPerUnit)
                }
                sample(
                    names.windowedSum, labels, shared.windows[window], measure: series.pointee.windows[window].sum,
                    nanosPerUnit)
                sample(names.windowedCount, labels, shared.windows[window], count: series.pointee.windows[window].count)
            }
        case (.histogram, .windowMax):
            for window in 0..<windowCount {
                sample(
                    names.windowMaxBytes, labels, shared.windows[window], whole: series.pointee.windows[window].max,
                    nanosPerUnit)
            }
        case (.counter, .whole):
            sample(names.mainBytes, labels, [], measure: series.pointee.cumulativeSum, nanosPerUnit)
        case (.counter, .rate):
            for window in 0..<windowCount {
                sample(
                    names.rateBytes, labels, shared.windows[window], measure: series.pointee.windows[window].rate,
                    nanosPerUnit)
            }
        case (.gauge, .whole):
            if let last = series.pointee.lastValue { sample(names.mainBytes, labels, [], measure: last, nanosPerUnit) }
        case (.gauge, .windowMin):
            for window in 0..<windowCount {
                if let low = series.pointee.windows[window].gaugeMin {
                    sample(names.windowMinBytes, labels, shared.windows[window], measure: low, nanosPerUnit)
                }
            }
        case (.gauge, .windowMax):
            for window in 0..<windowCount {
                if let high = series.pointee.windows[window].gaugeMax {
                    sample(names.windowMaxBytes, labels, shared.windows[window], measure: high, nanosPerUnit)
                }
            }
        default:
            break
        }
    }

    private func sample(_ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, _ extra: [UInt8], count: UInt64) {
        page.appendSampleHead(name, labels, extra)
        page.append(count)
        page.append(UInt8(ascii: "\n"))
    }

    /// A whole number of the metric's unit: times print as exact decimal seconds.
    private func sample(
        _ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, _ extra: [UInt8], whole value: UInt64,
        _ nanosPerUnit: UInt64?
    ) {
        page.appendSampleHead(name, labels, extra)
        if let nanosPerUnit { page.appendSeconds(nanoseconds: value &* nanosPerUnit) } else { page.append(value) }
        page.append(UInt8(ascii: "\n"))
    }

    /// Any value in the metric's unit, in base units.
    private func sample(
        _ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, _ extra: [UInt8], measure value: Double,
        _ nanosPerUnit: UInt64?
    ) {
        page.appendSampleHead(name, labels, extra)
        if let nanosPerUnit { page.appendSeconds(value, nanosPerUnit: nanosPerUnit) } else { page.appendNumber(value) }
        page.append(UInt8(ascii: "\n"))
    }
}

/// A label value as the text format writes it between its quotes, for the tools' `name{key="value"}`.
package func prometheusEscapedLabelValue(_ value: String) -> String {
    let text = TextBuffer(capacity: value.utf8.count + 8)
    text.appendEscaped(value, inLabel: true)
    return String(decoding: text.bytes, as: UTF8.self)
}

extension TextBuffer {
    /// Escapes `\\`, newlines and (in label values) `"`, as the text format requires: the one
    /// Prometheus escaper, for label values and HELP texts alike.
    func appendEscaped(_ value: String, inLabel: Bool) {
        appendEscaped(bytes: value.utf8, inLabel: inLabel)
    }

    func appendEscaped(bytes value: some Sequence<UInt8>, inLabel: Bool) {
        for byte in value {
            switch byte {
            case UInt8(ascii: "\\"): append("\\\\")
            case UInt8(ascii: "\n"): append("\\n")
            case UInt8(ascii: "\"") where inLabel: append("\\\"")
            default: append(byte)
            }
        }
    }

    /// Labels as the registry stores them (sorted `key=value` lines), each as `,key="value"`;
    /// a key the exporter uses itself becomes `exported_<key>`.
    func appendEncodedLabels(_ encoded: String) {
        var encoded = encoded
        encoded.withUTF8 { bytes in
            var start = 0
            while start < bytes.count {
                let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
                let equals = bytes[start..<end].firstIndex(of: UInt8(ascii: "=")) ?? end
                let key = UnsafeBufferPointer(rebasing: bytes[start..<equals])
                append(UInt8(ascii: ","))
                if PrometheusExporter.reservedLabelNames.contains(where: { $0.elementsEqual(key) }) { append("exported_") }
                append(key)
                append("=\"")
                appendEscaped(bytes: bytes[min(equals + 1, end)..<end], inLabel: true)
                append(UInt8(ascii: "\""))
                start = end + 1
            }
        }
    }
}

/// One series' metrics in protobuf, by part: the same figures as `SeriesLines` writes as text.
private struct ProtobufSeries {
    let series: SeriesSnapshot
    let windows: [String]
    let quantiles: [Double]
    /// With `--native-histograms`: histograms also carry native buckets of this schema.
    let nativeSchema: Int?

    /// `ring`, then the metric's labels (renamed `exported_<key>` where the exporter uses the key).
    var labels: [(name: String, value: String)] {
        var pairs = [(name: "ring", value: series.ring)]
        for line in series.metric.encodedLabels.split(separator: "\n", omittingEmptySubsequences: true) {
            let equals = line.firstIndex(of: "=") ?? line.endIndex
            let key = String(line[..<equals])
            let reserved = PrometheusExporter.reservedLabelNames.contains { $0.elementsEqual(key.utf8) }
            pairs.append(
                (
                    name: reserved ? "exported_" + key : key,
                    value: equals < line.endIndex ? String(line[line.index(after: equals)...]) : ""
                ))
        }
        return pairs
    }

    /// A value of the metric's unit in base units (seconds for times).
    func base(_ value: Double) -> Double {
        series.metric.unit.nanoseconds.map { value * Double($0) / 1e9 } ?? value
    }

    func write(_ part: PrometheusPage.Part, into out: inout ProtobufWriter) {
        let labels = self.labels
        let windowCount = min(series.windows.count, windows.count)
        func perWindow(_ body: (Int, [(name: String, value: String)]) -> Void) {
            for window in 0..<windowCount { body(window, labels + [(name: "window", value: windows[window])]) }
        }
        switch (series.metric.kind, part) {
        case (.histogram, .whole):
            let unit = series.metric.unit
            let counts = series.allTime?.classicCounts(unit: unit) ?? []
            let classic = zip(ExportBuckets.upperBounds(for: unit), counts).map { (upperBound: base(Double($0)), cumulativeCount: $1) }
            let native = nativeSchema.flatMap { schema in series.cumulative.map { ExportBuckets.native($0, unit: unit, schema: schema) } }
            out.metric(labels: labels) {
                $0.histogramValue(count: series.cumulativeCount, sum: base(series.cumulativeSum), classic: classic, native: native)
            }
        case (.histogram, .windowed):
            perWindow { window, labels in
                let stats = series.windows[window]
                let values = zip(quantiles, stats.quantileValues).map { (quantile: $0, value: base(Double($1))) }
                out.metric(labels: labels) { $0.summaryValue(count: stats.count, sum: base(stats.sum), quantiles: values) }
            }
        case (.histogram, .windowMax):
            perWindow { window, labels in out.metric(labels: labels) { $0.gaugeValue(base(Double(series.windows[window].max))) } }
        case (.counter, .whole):
            out.metric(labels: labels) { $0.counterValue(base(series.cumulativeSum)) }
        case (.counter, .rate):
            perWindow { window, labels in out.metric(labels: labels) { $0.gaugeValue(base(series.windows[window].rate)) } }
        case (.gauge, .whole):
            if let last = series.lastValue { out.metric(labels: labels) { $0.gaugeValue(base(last)) } }
        case (.gauge, .windowMin):
            perWindow { window, labels in
                if let low = series.windows[window].gaugeMin { out.metric(labels: labels) { $0.gaugeValue(base(low)) } }
            }
        case (.gauge, .windowMax):
            perWindow { window, labels in
                if let high = series.windows[window].gaugeMax { out.metric(labels: labels) { $0.gaugeValue(base(high)) } }
            }
        default:
            break
        }
    }
}
