import Ringside
@testable import RingsideExport
import Testing

@Suite("PrometheusExporter.pageBytes: what a series is charged for its lines on the text page")
struct PageBytesTests {
    static let encodings = [
        "", "symbol=AAPL", "le=odd\nsymbol=AAPL", "venue=a=b\nside=", "k=v\nk2=v2\nlonger_key=a longer value, with spaces",
    ]

    @Test("the labels are counted in their encoding as they are decoded: key, value and 4 bytes each", arguments: encodings)
    func labelBytesAsDecoded(encoded: String) {
        let metric = MetricDescriptor(index: 0, name: "m", kind: .gauge, unit: .none, encodedLabels: encoded, help: "", sampleEvery: 1)
        let decoded = metric.labels.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 4 }
        #expect(PrometheusExporter.labelBytes(encoded) == decoded)
    }

    @Test(
        "a series' page bytes: each family it writes, its lines times its name, the labels and 40 bytes",
        arguments: [MetricKind.histogram, .counter, .gauge], [MetricUnit.nanoseconds, .bytes, .none])
    func pageBytesByFamily(kind: MetricKind, unit: MetricUnit) {
        let metrics = [
            ("order_fill_latency", "symbol=AAPL\nside=buy"), ("orders_total", ""), ("depth", "q=1"), ("wait_seconds", ""),
            ("rx_bytes", "nic=eth0"), ("rx_bytes_total", ""), ("_total", ""), ("café_total_seconds", "k=é"),
            ("lat_us", ""), ("book_ms", ""), ("_seconds", ""), ("tx_bytes_total", ""), ("decode_nanoseconds", ""),
        ]
        for (name, labels) in metrics {
            let metric = MetricDescriptor(index: 0, name: name, kind: kind, unit: unit, encodedLabels: labels, help: "", sampleEvery: 1)
            let labelBytes = "bot".utf8.count + 8 + metric.labels.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 4 }
            let names = PrometheusExporter.FamilyNames(metric)
            let expected = names.parts.reduce(0) { total, part in
                total + PrometheusPage.lines(of: part.part, metric: metric, windows: 3, quantiles: 2)
                    * (part.family.utf8.count + labelBytes + 40)
            }
            #expect(PrometheusExporter.pageBytes(of: metric, ring: "bot", windows: 3, quantiles: 2) == expected, "\(name) \(kind) \(unit)")
            let counted = PrometheusExporter.familyNameBytes(metric)
            let made = [names.main, names.windowed, names.windowMax, names.windowMin, names.rate].map(\.utf8.count)
            let countedInOrder = [counted.main, counted.windowed, counted.windowExtreme, counted.windowExtreme, counted.rate]
            #expect(countedInOrder == made, "the names counted as made: \(name) \(kind) \(unit)")
            #expect(names.parts.count == (kind == .counter ? 2 : 3) && expected > 0)
        }
    }
}
