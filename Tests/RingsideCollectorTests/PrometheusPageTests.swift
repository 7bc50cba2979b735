import Ringside
import RingsideAggregation
@testable import RingsideCollector
@testable import RingsideExport
import RingsideSnapshot
import Testing

/// A snapshot built by hand: `count` series of the three kinds in turn, over `rings` rings.
private func syntheticSnapshot(series count: Int, rings: Int = 3) -> Snapshot {
    var snapshot = Snapshot()
    snapshot.windowNanos = [1_000_000_000, 5_000_000_000, 60_000_000_000]
    snapshot.quantiles = [0.5, 0.9, 0.99]
    for index in 0..<count {
        let kind: MetricKind = [.histogram, .counter, .gauge][index % 3]
        let metric = MetricDescriptor(
            index: UInt32(index), name: ["page_latency", "page_orders", "page_depth"][index % 3],
            kind: kind, unit: kind == .histogram ? .nanoseconds : .none,
            encodedLabels: "series=\(index)\nsymbol=S\(index % 7)", help: "", sampleEvery: 1)
        var series = SeriesSnapshot(ring: "ring\(index % rings)", metric: metric, id: UInt64(index + 1), windows: [])
        for window in 0..<3 {
            var stats = WindowStats()
            stats.count = UInt64(index + window)
            stats.sum = Double(1_000 * (index + window))
            stats.max = Int128(2_000 + index)
            stats.quantileValues = [Int128(1_000 + index), Int128(1_500 + index), Int128(1_900 + index)]
            stats.rate = Double(index) / 3
            stats.gaugeMin = Double(index % 11)
            stats.gaugeMax = Double(index % 13) + 0.5
            series.windows.append(stats)
        }
        var cumulative = Histogram()
        if index > 0 { cumulative.record(UInt64(1_000 * (index % 50 + 1)), count: UInt64(index * 40)) }
        series.cumulative = cumulative
        series.cumulativeCount = UInt64(index * 40)
        series.cumulativeSum = Double(index) * 1_350
        series.lastValue = index % 5 == 0 ? nil : Double(index)
        snapshot.series.append(series)
    }
    return snapshot
}

private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

@Suite("The /metrics page: families, slices and reused buffers")
struct PrometheusPageTests {
    @Test("a metric's series across rings share one HELP and TYPE; a family another type holds leaves its series out, counted")
    func familiesAndConflicts() {
        var snapshot = Snapshot()
        snapshot.windowNanos = [1_000_000_000]
        snapshot.quantiles = [0.5]
        func add(_ name: String, _ kind: MetricKind, ring: String, unit: MetricUnit = .none) {
            let metric = MetricDescriptor(
                index: UInt32(snapshot.series.count), name: name, kind: kind, unit: unit,
                encodedLabels: "", help: "", sampleEvery: 1)
            var series = SeriesSnapshot(
                ring: ring, metric: metric, id: UInt64(snapshot.series.count + 1),
                windows: [WindowStats()])
            series.cumulativeSum = 5
            series.lastValue = 2
            snapshot.series.append(series)
        }
        add("lat", .histogram, ring: "a", unit: .nanoseconds)
        add("orders", .counter, ring: "a")
        add("lat", .histogram, ring: "b", unit: .nanoseconds)
        add("orders_total", .counter, ring: "b")  // the same family as "orders": merged
        add("orders_total", .gauge, ring: "c")  // claims orders_total as a gauge: left out
        let page = text(PrometheusExporter.render(snapshot))
        let types = page.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }
        #expect(types.count == Set(types).count, "a family's TYPE appears once")
        #expect(types.filter { $0 == "# TYPE lat_seconds histogram" }.count == 1)
        #expect(page.contains(#"lat_seconds_count{ring="a"} 0"#) && page.contains(#"lat_seconds_count{ring="b"} 0"#))
        #expect(types.contains("# TYPE orders_total counter"))
        #expect(page.contains(#"orders_total{ring="a"} 5"#) && page.contains(#"orders_total{ring="b"} 5"#))
        #expect(!page.contains(#"orders_total{ring="c""#), "the conflicting series is left out of the family")
        #expect(page.contains("ringside_collector_series_conflicts 1\n"))
        // Every sample follows its own family's TYPE: families are contiguous.
        var family = ""
        for line in page.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                family = String(line.split(separator: " ")[2])
                continue
            }
            if line.hasPrefix("#") { continue }
            #expect(line.hasPrefix(family), "\(line) is not in family \(family)")
        }
    }

    @Test("a page written in slices on several threads is byte for byte the page written on one", arguments: [2, 3, 7])
    func slicesJoinExactly(threads: Int) {
        let snapshot = syntheticSnapshot(series: 3_000)
        var buffers: [TextBuffer] = []
        let single = PrometheusPage(snapshot).write(reusing: &buffers, threads: 1)
        let sliced = PrometheusPage(snapshot).write(reusing: &buffers, threads: threads)
        #expect(single.count > 1_000_000)
        #expect(sliced == single)
    }

    @Test("runs split the weights in order, cover every one and stay within the count")
    func split() {
        let weights = [5, 1, 1, 30, 2, 2, 2, 9, 1]
        for count in 1...12 {
            let runs = PrometheusPage.split(weights, into: count)
            #expect(runs.count <= count)
            #expect(runs.first?.lowerBound == 0 && runs.last?.upperBound == weights.count)
            for (run, next) in zip(runs, runs.dropFirst()) { #expect(run.upperBound == next.lowerBound) }
        }
        #expect(PrometheusPage.split([], into: 3) == [0..<0])
    }

    @Test("a renderer that reuses its buffers renders a small page after a large one exactly")
    func reusedBuffers() {
        let renderer = PrometheusRenderer()
        let large = syntheticSnapshot(series: 3_000)
        let small = syntheticSnapshot(series: 7, rings: 2)
        #expect(renderer.render(large) == PrometheusExporter.render(large))
        #expect(renderer.render(small) == PrometheusExporter.render(small))
        #expect(renderer.render(large) == PrometheusExporter.render(large))
    }

    @Test("times print as exact seconds, other values as numbers; sums that are not whole nanoseconds fall back")
    func values() {
        var snapshot = syntheticSnapshot(series: 3, rings: 1)
        snapshot.series[0].cumulativeSum = 27_030  // ns
        snapshot.series[0].windows[0].sum = 0.5  // not a whole number of ns
        snapshot.series[2].lastValue = .infinity
        let page = text(PrometheusExporter.render(snapshot))
        #expect(page.contains(#"page_latency_seconds_sum{ring="ring0",series="0",symbol="S0"} 0.00002703"#))
        #expect(page.contains(#"page_latency_windowed_seconds_sum{ring="ring0",series="0",symbol="S0",window="1s"} 5e-10"#))
        #expect(
            page.contains(
                #"page_latency_windowed_seconds{ring="ring0",series="0",symbol="S0",window="1m",quantile="0.99"} 0.0000019"#))
        #expect(page.contains(#"page_depth{ring="ring0",series="2",symbol="S2"} +Inf"#))
        #expect(page.contains(#"page_orders_rate{ring="ring0",series="1",symbol="S1",window="5s"} 0.3333333333333333"#))
    }
}
