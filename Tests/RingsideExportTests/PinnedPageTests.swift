import Foundation
import Ringside
import RingsideAggregation
@testable import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

/// A fixed snapshot: histograms of every unit (one sampled), counters and gauges on two rings,
/// with a ring and an SLO, as the collector would publish them.
func pinnedSnapshot() -> Snapshot {
    var snapshot = Snapshot()
    snapshot.generation = 7
    snapshot.windowNanos = [1_000_000_000, 5_000_000_000, 60_000_000_000]
    snapshot.quantiles = [0.5, 0.9, 0.99, 0.999]
    snapshot.nativeHistogramSchema = 3
    var random: UInt64 = 0x9E37_79B9_7F4A_7C15
    func next() -> UInt64 {
        random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return random >> 33
    }
    func series(
        _ index: Int, _ name: String, _ kind: MetricKind, _ unit: MetricUnit, ring: String, labels: String,
        sampleEvery: UInt32 = 1
    ) -> SeriesSnapshot {
        let metric = MetricDescriptor(
            index: UInt32(index), name: name, kind: kind, unit: unit, encodedLabels: labels,
            help: "help of \(name)", sampleEvery: sampleEvery)
        var series = SeriesSnapshot(ring: ring, metric: metric, id: UInt64(index + 1), windows: [])
        for window in 0..<3 {
            var stats = WindowStats()
            stats.count = next() % 1_000 + UInt64(window)
            stats.sum = Double(next())
            stats.max = Int128(next())
            stats.quantileValues = (0..<4).map { _ in Int128(next() % 100_000) }
            stats.rate = Double(next() % 10_000) / 7
            stats.increase = Double(next() % 1_000)
            stats.gaugeMin = window == 2 ? nil : Double(next() % 100) - 50.25
            stats.gaugeMax = window == 2 ? nil : Double(next() % 100) + 0.5
            series.windows.append(stats)
        }
        return series
    }
    let histograms: [(String, MetricUnit, UInt64, UInt32)] = [
        ("fill_latency", .nanoseconds, 5_000_000, 1), ("tick_to_trade", .microseconds, 50_000, 4),
        ("batch_time", .milliseconds, 20_000, 1), ("job_time", .seconds, 100, 1),
        ("message_size", .bytes, 1 << 20, 1), ("book_depth", .none, 3_000, 1),
    ]
    for (number, (name, unit, range, sampleEvery)) in histograms.enumerated() {
        var latency = series(
            snapshot.series.count, name, .histogram, unit, ring: number % 2 == 0 ? "bot-a" : "bot-b",
            labels: "symbol=S\(number)", sampleEvery: sampleEvery)
        var histogram = Histogram()
        for _ in 0..<2_000 { histogram.record(next() % range, count: UInt64(sampleEvery)) }
        histogram.record(0)
        latency.cumulative = histogram
        latency.cumulativeCount = histogram.count
        latency.cumulativeSum = histogram.sum
        latency.cumulativeExactSum = histogram.exactSum
        latency.droppedRecords = UInt64(number)
        latency.droppedSum = Int128(UInt64(number) * (range / 2))
        latency.droppedMax = Int128(range - 1)
        latency.sampledRecords = UInt64(100 * number)
        snapshot.series.append(latency)
    }
    // A signed histogram of basis points to 0.01 (format 4's values), and a counter of micro-dollars.
    var slippage = series(snapshot.series.count, "slippage_bps", .histogram, .none, ring: "bot-a", labels: "")
    slippage.metric = MetricDescriptor(
        index: slippage.metric.index, name: "slippage_bps", kind: .histogram, unit: .none, encodedLabels: "",
        help: "help of slippage_bps", sampleEvery: 1, isSigned: true, scale: -2)
    var signed = SignedHistogram()
    for _ in 0..<2_000 { signed.record(Int64(next() % 20_000) - 12_000) }
    for index in slippage.windows.indices {
        slippage.windows[index].min = -Int128(next() % 12_000)
        slippage.windows[index].quantileValues = (0..<4).map { _ in Int128(next() % 20_000) - 12_000 }
    }
    slippage.signedCumulative = signed
    slippage.cumulativeCount = signed.count
    slippage.cumulativeSum = signed.sum
    slippage.cumulativeSignedSum = signed.exactSum
    slippage.cumulativeMax = Int128(signed.max)
    slippage.clampedValues = 3
    slippage.exemplarsRefused = 2
    snapshot.series.append(slippage)
    var commission = series(snapshot.series.count, "commission_usd", .counter, .none, ring: "bot-a", labels: "")
    commission.metric = MetricDescriptor(
        index: commission.metric.index, name: "commission_usd", kind: .counter, unit: .none, encodedLabels: "",
        help: "help of commission_usd", sampleEvery: 1, scale: -6)
    commission.cumulativeSum = 1_370_001
    commission.cumulativeExactSum = 1_370_001
    snapshot.series.append(commission)
    var orders = series(snapshot.series.count, "orders", .counter, .none, ring: "bot-a", labels: "side=buy")
    orders.cumulativeSum = 123_456
    orders.cumulativeExactSum = 123_456
    snapshot.series.append(orders)
    var busy = series(snapshot.series.count, "busy_time", .counter, .nanoseconds, ring: "bot-b", labels: "")
    busy.cumulativeSum = 9_876_543_210
    busy.cumulativeExactSum = 9_876_543_210
    snapshot.series.append(busy)
    var exposure = series(snapshot.series.count, "gross_exposure", .gauge, .none, ring: "bot-a", labels: "desk=x\ny=\"q\"")
    exposure.lastValue = 1_353_991.5
    snapshot.series.append(exposure)
    snapshot.series.append(series(snapshot.series.count, "idle_gauge", .gauge, .milliseconds, ring: "bot-b", labels: ""))
    var ring = RingSnapshot(name: "bot-a", state: .live)
    ring.producerPID = 4_242
    ring.capacity = 4_096
    ring.recordsTotal = 10_000
    ring.consumedTotal = 9_990
    ring.backlog = ring.recordsTotal - ring.consumedTotal
    ring.sampledTotal = 700
    ring.lanes = [
        LaneSnapshot(
            index: 0, state: .active, threadID: 4_243, backlog: 10, recordsTotal: 10_000,
            consumedTotal: 9_990, droppedTotal: 0, heartbeatAgeSeconds: 0.25)
    ]
    snapshot.rings = [ring, RingSnapshot(name: "bot-c", state: .skipped, problem: "owned by uid 1001")]
    var latency = SLOSnapshot(
        rule: "fill_latency:p99<100us@1m", statistic: "p99", window: "1m", violated: true,
        violations: 2, compliance: 0.97, observed: 150_000, threshold: 100_000, events: 2_001,
        matchingSeries: 1)
    latency.objectiveRatio = 0.99
    var availability = SLOSnapshot(
        rule: "orders_rejected/orders_total<0.05%@30d", statistic: "ratio", window: "30d", violated: false,
        violations: 0, compliance: 0.9998, observed: 0.0002, threshold: 0.0005, events: 50_000, matchingSeries: 2)
    availability.severity = "P0"
    availability.objectiveRatio = 0.9995
    availability.eventsTotal = 60_000
    availability.badEventsTotal = 12
    availability.coveredSeconds = 86_400
    snapshot.slos = [latency, availability]
    var recorder = RecorderStats()
    recorder.bytes = 9_830_400
    recorder.bytesLimit = 16 << 20
    recorder.records = 245_760
    recorder.secondsHeld = 7.25
    recorder.retentionSeconds = 10
    recorder.evictedRecords = 81_920
    snapshot.collector.recorder = recorder
    return snapshot
}

/// The fixture's path: `Tests/fixtures/pinned-metrics.<suffix>`.
private func fixture(_ suffix: String) -> URL {
    URL(fileURLWithPath: packageRoot + "/Tests/fixtures/pinned-metrics.\(suffix)")
}

/// The page with the build's revision (it changes with every commit) replaced by `REVISION`.
private func withoutRevision(_ page: [UInt8]) -> String {
    String(decoding: page, as: UTF8.self)
        .replacing(/revision="[^"]*"/, with: "revision=\"REVISION\"")
}

/// The protobuf page less `ringside_build_info`'s family (its revision changes with every commit), as hex.
private func protobufWithoutBuildInfo(_ page: [UInt8]) -> String {
    var kept: [UInt8] = []
    var offset = 0
    while offset < page.count {
        var length = 0, shift = 0, at = offset
        while true {
            let byte = page[at]
            length |= Int(byte & 0x7F) << shift
            at += 1
            shift += 7
            if byte < 0x80 { break }
        }
        let message = page[offset..<(at + length)]
        if !String(decoding: message, as: UTF8.self).contains("ringside_build_info") { kept += message }
        offset = at + length
    }
    return stride(from: 0, to: kept.count, by: 64).map { start in
        kept[start..<min(start + 64, kept.count)].map {
            String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16)
        }
        .joined()
    }.joined(separator: "\n") + "\n"
}

/// Set RINGSIDE_WRITE_PINNED=1 to write the fixtures from what renders now (then review the diff).
@Suite("/metrics pinned: a fixed snapshot renders the same bytes in every format")
struct PinnedPageTests {
    @Test(
        "text, OpenMetrics and protobuf (native buckets) pages of a fixed snapshot equal the fixtures byte for byte",
        arguments: [ExpositionFormat.text, .openMetrics, .protobuf])
    func pinned(format: ExpositionFormat) throws {
        let page = PrometheusRenderer().render(pinnedSnapshot(), format: format)
        let (rendered, suffix) =
            switch format {
            case .text: (withoutRevision(page), "txt")
            case .openMetrics: (withoutRevision(page), "openmetrics.txt")
            case .protobuf: (protobufWithoutBuildInfo(page), "protobuf.hex")
            }
        if ProcessInfo.processInfo.environment["RINGSIDE_WRITE_PINNED"] == "1" {
            try rendered.write(to: fixture(suffix), atomically: true, encoding: .utf8)
        }
        let expected = try String(contentsOf: fixture(suffix), encoding: .utf8)
        #expect(rendered == expected, "the \(format) page differs from Tests/fixtures/pinned-metrics.\(suffix)")
    }
}

@Suite("/metrics in two sections: the series' families, then the collector's own")
struct PageSectionsTests {
    static let process = ProcessMetrics(
        cpuSeconds: 1.5, residentMemoryBytes: 4_096, virtualMemoryBytes: 8_192, openFDs: 9, maxFDs: 1_024,
        startTimeSeconds: 1_700_000_000)

    /// The pinned snapshot's series again for 20 more bots, a part a bot, as the collector's snapshots hold them.
    static func manyBots() -> Snapshot {
        var snapshot = pinnedSnapshot()
        let one = snapshot.series
        for bot in 0..<20 {
            snapshot.series.append(
                part: one.map { series in
                    var copy = series
                    copy.ring = "bot-\(bot)"
                    return copy
                })
        }
        return snapshot
    }

    @Test(
        "the series' section then the collector's own are the page, byte for byte, in every format",
        arguments: [ExpositionFormat.text, .openMetrics, .protobuf])
    func sectionsMakeThePage(format: ExpositionFormat) throws {
        let snapshot = pinnedSnapshot()
        let renderer = PrometheusRenderer()
        let sections = try #require(renderer.renderSections(snapshot, process: Self.process, format: format))
        guard case let .text(series)? = sections.series else {
            Issue.record("the series' section, as text, was asked for")
            return
        }
        #expect(!series.isEmpty && !sections.own.isEmpty)
        #expect(series + sections.own == renderer.render(snapshot, process: Self.process, format: format))
        // On one thread or several, the same bytes; the own section alone when asked.
        let alone = try #require(renderer.renderSections(snapshot, process: Self.process, format: format, series: nil, threads: 1))
        #expect(alone.series == nil)
        #expect(alone.own == sections.own)
        if format == .text {
            #expect(String(decoding: series, as: UTF8.self).hasPrefix("# HELP fill_latency_seconds "))
            #expect(String(decoding: sections.own, as: UTF8.self).hasPrefix("# HELP ringside_ring_producer_alive "))
        }
    }

    @Test(
        "the series' section deflated as it is written, a slice at a time, then the collector's own as the last piece: one gzip member of the page",
        arguments: [ExpositionFormat.text, .openMetrics, .protobuf])
    func deflatedSectionsMakeThePage(format: ExpositionFormat) throws {
        // Bots enough that the series' text is written and deflated in several slices, and a
        // protobuf family's metrics in several pieces (10 series a piece), after its head.
        let snapshot = Self.manyBots()
        let renderer = PrometheusRenderer(linesPerPiece: 100)
        let page = renderer.render(snapshot, process: Self.process, format: format)
        for threads in [1, 2] {
            let sections = try #require(
                renderer.renderSections(snapshot, process: Self.process, format: format, series: .deflated(level: 1), threads: threads))
            guard case let .deflated(pieces)? = sections.series else {
                Issue.record("the series' section, deflated, was asked for")
                return
            }
            #expect(pieces.count > 1, "\(pieces.count) pieces")
            let member = Zlib.gzipMember(pieces + [Zlib.piece(sections.own, last: true, level: 1)])
            #expect(Zlib.decompress(Array(member.joined()), .gzip) == page, "\(threads) threads")
        }
    }

    @Test("a bot's metric named as one of the collector's own families, with its type, shares the family: the page does not split")
    func sharedFamilyDoesNotSplit() throws {
        var snapshot = pinnedSnapshot()
        let metric = MetricDescriptor(
            index: 99, name: "ringside_collector_rings", kind: .gauge, unit: .none, encodedLabels: "", help: "", sampleEvery: 1)
        var gauge = SeriesSnapshot(ring: "bot-a", metric: metric, id: 999, windows: snapshot.series[0].windows.map { _ in WindowStats() })
        gauge.lastValue = 3
        snapshot.series.append(gauge)
        let renderer = PrometheusRenderer()
        #expect(renderer.renderSections(snapshot, format: .text) == nil)
        let page = String(decoding: renderer.render(snapshot, format: .text), as: UTF8.self)
        #expect(page.contains("ringside_collector_rings{ring=\"bot-a\"} 3\n"), "the bot's series is in the family")
    }
}

@Suite("The drops and samples per metric follow the series from one page of a renderer to the next")
struct KeptDropsTests {
    /// The pinned snapshot, numbered as the collector numbers its series.
    private static func versioned() -> Snapshot {
        var snapshot = pinnedSnapshot()
        for index in snapshot.series.indices {
            snapshot.series[index].version = UInt64(100 + index)
            snapshot.series[index].wholeVersion = UInt64(200 + index)
        }
        return snapshot
    }

    /// The page's lines of the per-metric families: records dropped, and sampled out.
    private static func perMetric(_ page: [UInt8]) -> [Substring] {
        String(decoding: page, as: UTF8.self).split(separator: "\n").filter {
            $0.hasPrefix("ringside_metric_records_dropped_total{") || $0.hasPrefix("ringside_metric_records_sampled_total{")
        }
    }

    @Test(
        "a series' new drop or sample count (a new whole version) shows on the next page of the same renderer, and on a hand-made snapshot's; the own section alone writes none of them"
    )
    func dropsFollowTheSeries() throws {
        let renderer = PrometheusRenderer()
        var snapshot = Self.versioned()
        let histogram = try #require(snapshot.series.firstIndex { $0.metric.kind == .histogram })
        let first = renderer.render(snapshot)
        #expect(Self.perMetric(first) == Self.perMetric(PrometheusRenderer().render(snapshot)))
        #expect(Self.perMetric(first).contains { $0.hasPrefix("ringside_metric_records_sampled_total{") })
        snapshot.series[histogram].droppedRecords += 1_000
        snapshot.series[histogram].wholeVersion = 500
        let second = renderer.render(snapshot)
        #expect(Self.perMetric(second) == Self.perMetric(PrometheusRenderer().render(snapshot)))
        #expect(Self.perMetric(second) != Self.perMetric(first))
        snapshot.series[histogram].sampledRecords += 3_000
        snapshot.series[histogram].wholeVersion = 501
        #expect(Self.perMetric(renderer.render(snapshot)) == Self.perMetric(PrometheusRenderer().render(snapshot)))
        #expect(Self.perMetric(renderer.render(snapshot)) != Self.perMetric(second))
        // Without versions (made by hand), nothing is kept: a change shows whatever the numbers.
        var unversioned = pinnedSnapshot()
        _ = renderer.render(unversioned)
        unversioned.series[histogram].droppedRecords += 7
        unversioned.series[histogram].sampledRecords += 7
        #expect(Self.perMetric(renderer.render(unversioned)) == Self.perMetric(PrometheusRenderer().render(unversioned)))
        // They are in the series' section: the collector's own, written alone, has none of them.
        let own = try #require(renderer.renderSections(snapshot, series: nil)).own
        #expect(Self.perMetric(own).isEmpty)
        let sections = try #require(renderer.renderSections(snapshot))
        guard case let .text(series)? = sections.series else { return }
        #expect(Self.perMetric(series) == Self.perMetric(renderer.render(snapshot)))
    }
}

@Suite("/metrics written as it is sent, a part at a time")
struct TextStreamTests {
    @Test(
        "the parts of a page written as it is sent, one after the other, are the page rendered whole, byte for byte",
        arguments: [ExpositionFormat.text, .openMetrics])
    func partsMakeThePage(format: ExpositionFormat) {
        let snapshot = PageSectionsTests.manyBots()
        let page = PrometheusRenderer().render(snapshot, process: PageSectionsTests.process, format: format)
        let stream = PrometheusTextStream(snapshot, process: PageSectionsTests.process, format: format, linesPerPart: 100)
        var parts: [[UInt8]] = []
        while let part = stream.nextPart() { parts.append(part) }
        #expect(parts.count > 5, "\(parts.count) parts")
        #expect(parts.allSatisfy { !$0.isEmpty && $0.count < page.count / 4 }, "each part a piece of the page")
        #expect(Array(parts.joined()) == page)
        #expect(stream.nextPart() == nil, "done once written")
    }
}
