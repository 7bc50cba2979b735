// The /metrics page as delimited protobuf `MetricFamily` messages, with native histograms.

import RingsideAggregation
import RingsideCommandLine
import RingsideSnapshot

extension PrometheusPage {
    /// The page as delimited `MetricFamily` messages (io.prometheus.client): the same families,
    /// with native buckets on histograms that have them. Written on the calling thread: a scraper
    /// that asks for protobuf wants native histograms, and their pages are not the hot path.
    func writeProtobuf(families range: Range<Int>? = nil) -> [UInt8] {
        var writer = ProtobufWriter()
        let windows = snapshot.windowNanos.map { formatDuration($0) }
        for family in families[range ?? families.indices] {
            writer.metricFamily(name: family.name, help: family.help, type: Self.protobufType(family)) { out in
                writeMetrics(of: family, windows: windows, into: &out) { _ in }
            }
        }
        return writer.bytes
    }

    /// The families in `range` as `writeProtobuf` writes them, deflated as pieces of a gzip member
    /// (none its last) as they are written: a family's metrics about `metricsPerPiece` series at a
    /// time, then its head (its length, name, help and type), put before them. The page of a
    /// million series (1.4 GB) is never whole.
    func writeProtobufDeflated(families range: Range<Int>, metricsPerPiece: Int, level: Int32) -> [Zlib.Piece] {
        let windows = snapshot.windowNanos.map { formatDuration($0) }
        var pieces: [Zlib.Piece] = []
        for family in families[range] {
            var metricPieces: [Zlib.Piece] = []
            var metricBytes = 0
            var written = 0
            func deflate(_ chunk: [UInt8]) {
                metricBytes += chunk.count
                metricPieces.append(Zlib.piece(chunk, last: false, level: level))
            }
            var chunk = ProtobufWriter()
            writeMetrics(of: family, windows: windows, into: &chunk) { out in
                written += 1
                guard written % metricsPerPiece == 0 else { return }
                deflate(out.bytes)
                out = ProtobufWriter()
            }
            if !chunk.bytes.isEmpty { deflate(chunk.bytes) }
            var head = ProtobufWriter()
            head.metricFamilyHead(name: family.name, help: family.help, type: Self.protobufType(family), metricBytes: metricBytes)
            pieces.append(Zlib.piece(head.bytes, last: false, level: level))
            pieces += metricPieces
        }
        return pieces
    }

    private static func protobufType(_ family: Family) -> ProtobufWriter.MetricType {
        switch family.type {
        case "counter": .counter
        case "gauge": .gauge
        case "summary": .summary
        case "histogram": .histogram
        default: .untyped
        }
    }

    /// Writes the metrics of `family` into `out`, calling `wrote` after each sample of the
    /// collector's own and each series' metrics (it may take what `out` holds).
    private func writeMetrics(
        of family: Family, windows: [String], into out: inout ProtobufWriter, wrote: (inout ProtobufWriter) -> Void
    ) {
        let type = Self.protobufType(family)
        for member in family.members {
            switch member {
            case let .fixed(fixed):
                for (labels, value) in fixed.samples {
                    out.metric(labels: labels.map { (name: $0.0, value: $0.1) }) {
                        if type == .counter { $0.counterValue(value) } else { $0.gaugeValue(value) }
                    }
                    wrote(&out)
                }
            case let .perMetric(perMetric):
                for series in snapshot.series {
                    guard let value = perMetric.value(of: series) else { continue }
                    out.metric(labels: PrometheusExporter.PerMetricFamily.labels(of: series).map { (name: $0.0, value: $0.1) }) {
                        if type == .counter { $0.counterValue(value) } else { $0.gaugeValue(value) }
                    }
                    wrote(&out)
                }
            case let .group(_, part):
                for position in groupMembers(of: member) {
                    ProtobufSeries(
                        series: snapshot.series[position], windows: windows, quantiles: snapshot.quantiles,
                        nativeSchema: snapshot.nativeHistogramSchema
                    )
                    .write(part, into: &out)
                    wrote(&out)
                }
            }
        }
    }

    private func groupMembers(of member: Member) -> [Int] {
        if case let .group(number, _) = member { return groups[number].members }
        return []
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

    /// A number of the metric's steps (its unit for most) in base units (seconds for times).
    func base(_ value: Double) -> Double { series.metric.inBaseUnits(value) }

    /// A kept exemplar as the format has it: its value in base units.
    func exemplar(_ kept: KeptExemplar) -> ProtobufWriter.Exemplar {
        ProtobufWriter.Exemplar(
            labels: kept.pairs.map { (name: $0.key, value: $0.value) }, value: base(Double(kept.value)),
            wallTimeNanos: kept.wallTimeNanos)
    }

    func write(_ part: PrometheusPage.Part, into out: inout ProtobufWriter) {
        let labels = self.labels
        let windowCount = min(series.windows.count, windows.count)
        func perWindow(_ body: (Int, [(name: String, value: String)]) -> Void) {
            for window in 0..<windowCount { body(window, labels + [(name: "window", value: windows[window])]) }
        }
        switch (series.metric.kind, part) {
        case (.histogram, .whole):
            let (stepBounds, counts) = ExportBuckets.classic(of: series)
            let bounds = stepBounds.map { $0.map { Double($0) } } ?? ExportBuckets.upperBounds(for: series.metric.unit).map { Double($0) }
            // Each classic bucket's latest exemplar, as OpenMetrics carries them; one above the last
            // bound brings the +Inf bucket, otherwise left out.
            let inBucket =
                series.bucketExemplars.isEmpty ? [:] : ExportBuckets.latestExemplars(series.bucketExemplars, of: series.metric)
            var classic: [ProtobufWriter.ClassicBucket] = zip(bounds, counts).enumerated().map { index, bucket in
                (upperBound: base(bucket.0), cumulativeCount: bucket.1, exemplar: inBucket[index].map(exemplar))
            }
            if let overflow = inBucket[bounds.count] {
                classic.append((upperBound: .infinity, cumulativeCount: series.cumulativeCount, exemplar: exemplar(overflow)))
            }
            let native = nativeSchema.flatMap { ExportBuckets.native(of: series, schema: $0) }
            // With native buckets, each one's latest exemplar too: the snapshot keeps them by the same schema.
            let nativeExemplars = native == nil ? [] : series.bucketExemplars.map(exemplar)
            out.metric(labels: labels) {
                $0.histogramValue(
                    count: series.cumulativeCount, sum: base(series.cumulativeSum), classic: classic, native: native,
                    nativeExemplars: nativeExemplars)
            }
        case (.histogram, .windowed):
            perWindow { window, labels in
                let stats = series.windows[window]
                // An empty window's quantiles are NaN: no data, not 0.
                let values: [(quantile: Double, value: Double)] =
                    stats.quantileValues.map { zip(quantiles, $0).map { (quantile: $0, value: base(Double($1))) } }
                    ?? quantiles.map { (quantile: $0, value: .nan) }
                out.metric(labels: labels) { $0.summaryValue(count: stats.count, sum: base(stats.sum), quantiles: values) }
            }
        case (.histogram, .windowMax):
            perWindow { window, labels in
                let high = series.windows[window].max.map { base(Double($0)) } ?? .nan
                out.metric(labels: labels) { $0.gaugeValue(high) }
            }
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
