import Ringside
import RingsideAggregation
@testable import RingsideCollector
import RingsideExport
import Testing

@Suite("What a series is charged against --max-series-bytes")
struct SeriesCostTests {
    private func charge(labelBytes: Int, kind: MetricKind = .histogram) throws -> Int {
        let options = CollectorOptions()
        let labels = try MetricDescriptor.encode(labels: ["symbol": "S" + String(repeating: "0", count: labelBytes - 1)]).get()
        let metric = MetricDescriptor(
            index: 0, name: "fill_latency", kind: kind, unit: .nanoseconds, encodedLabels: labels, help: "", sampleEvery: 1)
        let cost = SeriesCost(
            ring: "scale12", layout: .standard, quantiles: options.quantiles.count, pageBytes: PrometheusExporter.pageBytes)
        return cost.bytes(of: metric)
    }

    @Test("the defaults keep the default --max-series of short-label histograms: admitted up to 3/4 of --max-series-bytes")
    func defaultsKeepTheDefaultSeries() throws {
        let options = CollectorOptions()
        let short = try charge(labelBytes: 8)
        #expect(short * options.maxSeries <= options.maxSeriesBytes / 4 * 3, "\(short) B a series")
        for kind in [MetricKind.counter, .gauge] {
            #expect(try charge(labelBytes: 8, kind: kind) <= short, "a \(kind) costs no more than a histogram")
        }
    }

    @Test("longer labels are charged more: their text is on every line of the pages kept")
    func labelsAreCharged() throws {
        let short = try charge(labelBytes: 8), wide = try charge(labelBytes: 200)
        // 53 lines a histogram on the page, a share of it kept gzipped, and /latest's labels.
        #expect(wide - short > 192 * 53 / 20, "\(short) B, then \(wide) B with 200-byte labels")
    }
}
