// The /metrics page as text (Prometheus or OpenMetrics): the plan's steps, written in slices on
// a few threads into reused buffers, then joined; each series' lines by part.

#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideAggregation
import RingsideCommandLine
import RingsideSnapshot
import RingsideSystem
import Synchronization

extension PrometheusPage {
    /// One step of writing the page: text as it is (a family's HELP and TYPE, the collector's own
    /// lines), or one part of one series.
    enum Step {
        case text([UInt8])
        case series(group: Int, part: Part, position: Int)
        /// The lines of a per-metric family of the collector's for the series at `positions`.
        case perMetric(PrometheusExporter.PerMetricFamily, positions: Range<Int>)
    }

    /// Series whose per-metric lines are one step.
    static let perMetricSeriesPerStep = 1_000

    /// The page's bytes (of the families in `range`, all by default: OpenMetrics' `# EOF` ends
    /// the last family's). A large page is written in slices on several threads at once, each
    /// slice a run of whole steps into its own buffer (from `buffers`, reused), then joined.
    func write(
        reusing buffers: inout [TextBuffer], threads: Int = PrometheusPage.threads, openMetrics: Bool = false,
        families range: Range<Int>? = nil
    ) -> [UInt8] {
        let used = writeSlices(reusing: &buffers, threads: threads, openMetrics: openMetrics, families: range, linesPerSlice: nil) { _ in }
            .buffers
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

    /// The bytes of the families in `range`, as `write` writes them, deflated as pieces of a gzip
    /// member (none of them its last) a slice of about `linesPerPiece` lines at a time as they are
    /// written, `threads` slices at once: the text of a page of a million series (4 GB) is never
    /// whole, only `threads` slices.
    func writeDeflated(
        reusing buffers: inout [TextBuffer], threads: Int, openMetrics: Bool, families range: Range<Int>?, linesPerPiece: Int,
        level: Int32
    ) -> [Zlib.Piece] {
        writeSlices(reusing: &buffers, threads: threads, openMetrics: openMetrics, families: range, linesPerSlice: linesPerPiece) {
            text in text.withBytes { Zlib.piece($0, last: false, level: level) }
        }.results
    }

    /// The bytes of the families in `range`, as `write` writes them, in parts of about
    /// `linesPerPart` lines each, never joined: a page is held once, not once in slices and once
    /// more as their join.
    func writeParts(
        reusing buffers: inout [TextBuffer], threads: Int, openMetrics: Bool, families range: Range<Int>?, linesPerPart: Int
    ) -> [[UInt8]] {
        writeSlices(reusing: &buffers, threads: threads, openMetrics: openMetrics, families: range, linesPerSlice: linesPerPart) {
            $0.bytes
        }.results
    }

    /// Writes the families in `range` in slices (`threads` of them, or of about `linesPerSlice`
    /// lines each), `threads` at once, each into a buffer of `buffers` (reused from one batch to
    /// the next), then `finish`es it on the thread that wrote it. Returns what `finish` made of
    /// each slice, in order, and the buffers of the last batch, holding its slices.
    private func writeSlices<Finished: Sendable>(
        reusing buffers: inout [TextBuffer], threads: Int, openMetrics: Bool, families range: Range<Int>?, linesPerSlice: Int?,
        finish: @Sendable (TextBuffer) -> Finished
    ) -> (results: [Finished], buffers: [TextBuffer]) {
        let plan = slicePlan(openMetrics: openMetrics, families: range, threads: threads, linesPerSlice: linesPerSlice)
        let batch = min(plan.threads, plan.slices.count)
        while buffers.count < batch { buffers.append(TextBuffer(capacity: 0)) }
        let used = Array(buffers.prefix(batch))
        let results = Locked([Finished?](repeating: nil, count: plan.slices.count))
        let writer = SliceWriter(plan, buffers: used, openMetrics: openMetrics)
        Turns.run(plan.slices.count, threads: batch) { slice in
            let finished = finish(writer.write(slice: slice))
            results.withLock { $0[slice] = finished }
        }
        return (results.withLock { $0.map { $0! } }, used)
    }

    /// What writing the families in `range` in slices takes: the steps, the slices they fall in
    /// (`threads` of them, or of about `linesPerSlice` lines each), and what every slice reads.
    func slicePlan(openMetrics: Bool, families range: Range<Int>?, threads: Int, linesPerSlice: Int?) -> SlicePlan {
        let range = range ?? families.indices
        // The collector's own families alone (see `sections`) need no series' labels.
        let labels = SeriesLabels(range.lowerBound < seriesFamilyCount ? snapshot.series : [])
        let shared = PrometheusExporter.SharedLabels(
            windows: snapshot.windowNanos.map { formatDuration($0) },
            quantiles: snapshot.quantiles)
        var (steps, lines) = plan(openMetrics: openMetrics, families: range)
        if openMetrics, range.upperBound == families.count {
            steps.append(.text(Array("# EOF\n".utf8)))
            lines.append(1)
        }
        // Generous: room reserved and not written costs no memory, while a buffer that must grow
        // is copied, and holds the slice twice for a moment (a line with a window and a quantile
        // takes some 64 bytes beside its series' labels).
        let bytesPerLine = 96 + (snapshot.series.isEmpty ? 0 : labels.text.count / snapshot.series.count)
        // Slices of long labels hold fewer lines: a slice's buffer stays within `sliceBytes`.
        let linesPerSlice = linesPerSlice.map { min($0, max(1, Self.sliceBytes / bytesPerLine)) }
        let total = lines.reduce(0, +)
        let threads = total < Self.linesPerThread ? 1 : threads
        let slices = Self.split(lines, into: linesPerSlice.map { max(threads, (total + $0 - 1) / $0) } ?? threads)
        return SlicePlan(
            steps: steps, slices: slices, lines: lines, bytesPerLine: bytesPerLine, threads: threads,
            names: groups.map(\.names), shared: shared, series: snapshot.series, labels: labels)
    }

    /// Threads a large page is written on, and the lines that are worth a thread.
    static let threads = max(1, min(4, (try? System.sysconf(_SC_NPROCESSORS_ONLN)) ?? 1))
    static let linesPerThread = 20_000
    /// The most bytes reserved for a slice written in slices of a given number of lines: some
    /// 66,000 lines of short labels (126 bytes each). Slices of 32 MiB, two being deflated at once,
    /// took 55 MB beside a gzipped page of 14,000 series of 200-byte labels under a 128 MiB budget,
    /// which no longer charges the series the plain page's text.
    static let sliceBytes = 8 << 20

    /// The steps of the families in `range`, in page order, and about how many lines each writes.
    private func plan(openMetrics: Bool, families range: Range<Int>) -> (steps: [Step], lines: [Int]) {
        let windows = min(snapshot.windowNanos.count, snapshot.series.first?.windows.count ?? 0)
        var steps: [Step] = []
        var lines: [Int] = []
        // About three parts a series, when the range holds the series' families.
        let expected = (range.lowerBound < seriesFamilyCount ? snapshot.series.count * 3 : 0) + range.count
        steps.reserveCapacity(expected)
        lines.reserveCapacity(expected)
        for family in families[range] {
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
                case let .perMetric(perMetric):
                    for start in stride(from: 0, to: snapshot.series.count, by: Self.perMetricSeriesPerStep) {
                        let positions = start..<min(start + Self.perMetricSeriesPerStep, snapshot.series.count)
                        let count = positions.count { perMetric.value(of: snapshot.series[$0]) != nil }
                        guard count > 0 else { continue }
                        steps.append(.perMetric(perMetric, positions: positions))
                        lines.append(count)
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
        case .windowedQuantiles: return windows * quantiles
        case .windowMax, .windowMin, .rate, .windowedSum, .windowedCount: return windows
        }
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

/// Every series' own labels (`ring="...",key="value"`), rendered once into one buffer.
struct SeriesLabels {
    let text = TextBuffer(capacity: 64 * 1024)
    var ranges: [Range<Int>] = []

    init(_ series: SeriesList) {
        ranges.reserveCapacity(series.count)
        series.forEachInPlace { _, one in
            let start = text.count
            text.append("ring=\"")
            text.appendEscaped(one.pointee.ring, inLabel: true)
            text.append(UInt8(ascii: "\""))
            text.appendEncodedLabels(one.pointee.metric.encodedLabels)
            ranges.append(start..<text.count)
        }
    }
}

/// The lines of one series, by part.
struct SeriesLines {
    let page: TextBuffer
    let names: PrometheusExporter.FamilyNames
    let shared: PrometheusExporter.SharedLabels
    let openMetrics: Bool

    /// The series is read through a pointer: passing it by value would copy its strings and arrays.
    func write(_ part: PrometheusPage.Part, of series: UnsafePointer<SeriesSnapshot>, labels: UnsafeBufferPointer<UInt8>) {
        let kind = series.pointee.metric.kind
        let nanosPerUnit = series.pointee.metric.unit.nanoseconds
        let windowCount = min(series.pointee.windows.count, shared.windows.count)
        switch (kind, part) {
        case (.histogram, .whole):
            let metric = series.pointee.metric
            let (stepBounds, counts) = ExportBuckets.classic(of: series.pointee)
            let bounds =
                stepBounds == nil ? PrometheusExporter.bucketLabels[metric.unit] ?? [] : PrometheusExporter.stepBucketLabels(metric)
            let exemplars =
                openMetrics && !series.pointee.bucketExemplars.isEmpty
                ? ExportBuckets.latestExemplars(series.pointee.bucketExemplars, of: metric) : [:]
            for (index, (le, count)) in zip(bounds, counts).enumerated() {
                sample(names.bucket, labels, le, count: count, exemplar: exemplars[index], metric)
            }
            sample(
                names.bucket, labels, PrometheusExporter.infiniteBucketLabel, count: series.pointee.cumulativeCount,
                exemplar: exemplars[bounds.count], metric)
            // OpenMetrics: no `_sum` (nor, with it, `_count`) beside negative buckets.
            if !(openMetrics && names.isSigned) {
                sampleTotal(names.sum, labels, of: series)
                sample(names.count, labels, [], count: series.pointee.cumulativeCount)
            }
        case (.histogram, .windowedQuantiles):
            for window in 0..<windowCount {
                quantiles(names.windowedBytes, labels, of: series.pointee.windows[window], window: window, series.pointee.metric)
            }
        case (.histogram, .windowedSum):
            for window in 0..<windowCount {
                sample(names.windowedSum, labels, shared.windows[window], steps: series.pointee.windows[window].sum, series.pointee.metric)
            }
        case (.histogram, .windowedCount):
            for window in 0..<windowCount {
                sample(names.windowedCount, labels, shared.windows[window], count: series.pointee.windows[window].count)
            }
        case (.histogram, .windowed):
            let metric = series.pointee.metric
            for window in 0..<windowCount {
                quantiles(names.windowedBytes, labels, of: series.pointee.windows[window], window: window, metric)
                sample(names.windowedSum, labels, shared.windows[window], steps: series.pointee.windows[window].sum, metric)
                sample(names.windowedCount, labels, shared.windows[window], count: series.pointee.windows[window].count)
            }
        case (.histogram, .windowMax):
            for window in 0..<windowCount {
                sample(
                    names.windowMaxBytes, labels, shared.windows[window], steps: series.pointee.windows[window].max, series.pointee.metric)
            }
        case (.counter, .whole):
            sampleTotal(names.mainBytes, labels, of: series)
        case (.counter, .rate):
            for window in 0..<windowCount {
                sample(names.rateBytes, labels, shared.windows[window], steps: series.pointee.windows[window].rate, series.pointee.metric)
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

    /// A window's quantiles, each `NaN` when the window is empty (no data, as a Prometheus client's
    /// summary writes a quantile of nothing).
    private func quantiles(
        _ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, of stats: WindowStats, window: Int, _ metric: MetricDescriptor
    ) {
        let labelled = shared.windowQuantiles[window]
        guard let values = stats.quantileValues else {
            for quantile in labelled { sample(name, labels, quantile, steps: nil, metric) }
            return
        }
        for (quantile, value) in zip(labelled, values) { sample(name, labels, quantile, steps: value, metric) }
    }

    /// A window's figure, or `NaN` when the window has none.
    private func sample(
        _ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, _ extra: [UInt8], steps value: Int128?, _ metric: MetricDescriptor
    ) {
        guard let value else { return sample(name, labels, extra, measure: .nan, nil) }
        sample(name, labels, extra, steps: value, metric)
    }

    private func sample(_ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, _ extra: [UInt8], count: UInt64) {
        page.appendSampleHead(name, labels, extra)
        page.append(count)
        page.append(UInt8(ascii: "\n"))
    }

    /// A bucket's line, with its exemplar if it has one: `... 12 # {order_id="A17"} 0.0021 1732300000.123`.
    private func sample(
        _ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, _ extra: [UInt8], count: UInt64, exemplar: KeptExemplar?,
        _ metric: MetricDescriptor
    ) {
        let nanosPerUnit = metric.hasSteps ? nil : metric.unit.nanoseconds
        page.appendSampleHead(name, labels, extra)
        page.append(count)
        if let exemplar {
            page.append(" # {")
            for (index, pair) in exemplar.pairs.enumerated() {
                if index > 0 { page.append(UInt8(ascii: ",")) }
                page.append(pair.key)
                page.append("=\"")
                page.appendEscaped(pair.value, inLabel: true)
                page.append(UInt8(ascii: "\""))
            }
            page.append("} ")
            if let nanosPerUnit {
                page.appendSeconds(nanoseconds: exemplar.value &* nanosPerUnit)
            } else if metric.hasSteps {
                page.append(ExactDecimal.text(Int128(exemplar.value), exponent: metric.baseUnitExponent))
            } else {
                page.append(exemplar.value)
            }
            page.append(UInt8(ascii: " "))
            page.appendSeconds(nanoseconds: exemplar.wallTimeNanos)
        }
        page.append(UInt8(ascii: "\n"))
    }

    /// A whole number of the metric's steps, exactly in base units: times as decimal seconds, a
    /// hundredth of a basis point as `0.01`.
    private func sample(
        _ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, _ extra: [UInt8], steps value: Int128, _ metric: MetricDescriptor
    ) {
        if !metric.hasSteps, let whole = UInt64(exactly: value) {
            page.appendSampleHead(name, labels, extra)
            if let nanosPerUnit = metric.unit.nanoseconds {
                page.appendSeconds(nanoseconds: whole &* nanosPerUnit)
            } else {
                page.append(whole)
            }
            page.append(UInt8(ascii: "\n"))
        } else {
            sample(name, labels, extra, decimal: ExactDecimal.text(value, exponent: metric.baseUnitExponent))
        }
    }

    /// Any number of the metric's steps (a sum, a rate), in base units.
    private func sample(
        _ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, _ extra: [UInt8], steps value: Double, _ metric: MetricDescriptor
    ) {
        if metric.hasSteps {
            page.appendSampleHead(name, labels, extra)
            page.appendNumber(metric.inBaseUnits(value))
            page.append(UInt8(ascii: "\n"))
        } else {
            sample(name, labels, extra, measure: value, metric.unit.nanoseconds)
        }
    }

    /// A histogram's all-time sum or a counter's total: of a metric with steps, its exact decimal
    /// (a counter of cents prints the cents it holds: 1,000,000 increments of 0.01 are `10000`).
    private func sampleTotal(_ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, of series: UnsafePointer<SeriesSnapshot>) {
        let metric = series.pointee.metric
        guard metric.hasSteps else {
            return sample(name, labels, [], measure: series.pointee.cumulativeSum, metric.unit.nanoseconds)
        }
        let total = series.pointee.exactSumSteps
        sample(
            name, labels, [],
            decimal: ExactDecimal.text(negative: total.negative, magnitude: total.magnitude, exponent: metric.baseUnitExponent))
    }

    /// A number already written out, exactly.
    private func sample(_ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, _ extra: [UInt8], decimal: String) {
        page.appendSampleHead(name, labels, extra)
        page.append(decimal)
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
