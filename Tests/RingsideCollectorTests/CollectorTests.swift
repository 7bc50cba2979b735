import CRingside
import Foundation
import Ringside
import RingsideAggregation
@testable import RingsideCollector
@testable import RingsideExport
import RingsideTestSupport
import Testing

@Suite("Collector: draining, windows, counters, gauges, SLOs, ring states")
struct CollectorTests {
    @Test("histogram quantiles are within the histogram's error bound of the exact ones")
    func quantilesMatchExact() throws {
        try withBot("q", options: .init(laneCapacity: 16384)) { directory, bot in
            let latency = try bot.histogram("latency", unit: .nanoseconds, labels: ["venue": "x"])
            var generator = SystemRandomNumberGenerator()
            var values: [UInt64] = []
            for _ in 0..<10_000 {
                // Lognormal-ish: spread over several octaves, as latencies are.
                let value = UInt64(exp(Double.random(in: 7...14, using: &generator)))
                values.append(value)
                latency.record(value)
            }
            let captured = CapturedLog()
            let collector = try makeCollector(directory, captured: captured)
            let snapshot = pass(collector)
            let series = try #require(snapshot.series("latency"))
            let window = series.windows[0]
            let sorted = values.sorted()
            #expect(window.count == 10_000)
            #expect(window.min == sorted.first.map { Int128($0) } && window.max == sorted.last.map { Int128($0) })
            #expect(window.sum == Double(values.reduce(0, +)))
            for (quantile, reported) in zip(snapshot.quantiles, try #require(window.quantileValues)) {
                let exact = sorted[max(0, Int((quantile * Double(sorted.count)).rounded(.up)) - 1)]
                let error = abs(Double(reported) - Double(exact)) / Double(exact)
                #expect(error <= Histogram.maxRelativeError, "q\(quantile): \(reported) vs exact \(exact)")
            }
            #expect(series.cumulativeCount == 10_000)
            #expect(ExportBuckets.cumulativeCounts(try #require(series.cumulative), unit: series.metric.unit).last! <= 10_000)
            #expect(captured.contains("ring q attached"))
        }
    }

    @Test("the collector's figures brought up to date while every ring is quiet keep the series' counts of the last snapshot")
    func quietUpdateKeepsSeriesFigures() throws {
        try withBot("quiet", options: .init(laneCapacity: 1024)) { directory, bot in
            try bot.histogram("latency").record(5)
            let collector = try makeCollector(directory, windows: [1_000_000_000], captured: CapturedLog())
            let start = rs_clock_precise_ns()
            // Drained, then its window empty, then a snapshot of every ring quiet.
            for offset: UInt64 in [0, 3_000_000_000, 3_100_000_000] { collector.runPass(nowNanos: start + offset, forcePublish: true) }
            let generation = collector.snapshot.generation
            let revision = collector.published.revision
            collector.runPass(nowNanos: start + 3_500_000_000)  // a refresh due, nothing new: the figures alone
            #expect(collector.published.revision > revision, "brought up to date")
            #expect(collector.snapshot.generation == generation, "without a new snapshot")
            #expect(collector.snapshot.collector.snapshotBuild.series == 1)
            #expect(collector.snapshot.collector.snapshotBuild.seriesLimit == collector.options.maxSeries)
            #expect(collector.snapshot.collector.snapshotBuild.seriesBytes > 0)
        }
    }

    @Test("the heap is trimmed 10 s after the last series let its windows go, by a pass that publishes nothing")
    func heapTrimAfterTheLastLetGo() throws {
        try withBot("trim", options: .init(laneCapacity: 1024)) { directory, bot in
            try bot.histogram("latency").record(5)
            let collector = try makeCollector(directory, windows: [1_000_000_000], captured: CapturedLog())
            let start = rs_clock_precise_ns()
            collector.runPass(nowNanos: start, forcePublish: true)
            // Its window lets the value go: one series, too few to trim at once.
            collector.runPass(nowNanos: start + 3_000_000_000, forcePublish: true)
            let before = collector.heapTrims
            collector.runPass(nowNanos: start + 8_000_000_000, forcePublish: true)
            #expect(collector.heapTrims == before, "5 s after the last let-go: not due")
            // Every ring quiet, 5.5 s after the last snapshot: this pass publishes none, and the trim is
            // due by the clock. (Another test's collector may be trimming: one trim runs at a time.)
            let generation = collector.snapshot.generation
            var now = start + 13_500_000_000
            for _ in 0..<200 where collector.heapTrims == before {
                collector.runPass(nowNanos: now)
                now += 10_000_000
                usleep(10_000)
            }
            #expect(collector.snapshot.generation == generation, "no snapshot published")
            #expect(collector.heapTrims == before + 1, "trimmed once, 10 s after the let-go")
        }
    }

    @Test("a wave of series let go in one pass is trimmed at once, and again 10 s after, once the snapshot that showed them went")
    func heapTrimAfterAWave() {
        var trim = HeapTrim()
        let second: UInt64 = 1_000_000_000
        // Asks at `time`; when a trim is expected, again every 10 ms until it starts: one trim runs
        // at a time in the process (another test's collector may be trimming), as the drain asks at
        // every pass.
        func note(_ letGo: Int, at time: UInt64, trims expected: Int) -> Bool {
            trim.note(letGo: letGo, nowNanos: time)
            for _ in 0..<200 where trim.trims < expected {
                usleep(10_000)
                trim.note(letGo: 0, nowNanos: time)
            }
            return trim.trims == expected
        }
        #expect(note(1_500, at: 100 * second, trims: 1), "a wave: at once")
        #expect(note(0, at: 105 * second, trims: 1), "not 10 s after it")
        #expect(note(0, at: 110 * second, trims: 2), "10 s after the wave: what its snapshot held")
        #expect(note(0, at: 130 * second, trims: 2), "settled: no more")
        #expect(note(10, at: 200 * second, trims: 2), "a few series: not at once")
        #expect(note(0, at: 210 * second, trims: 3), "10 s after them")
        #expect(note(0, at: 240 * second, trims: 3))
    }

    @Test("a quiet histogram's all-time histogram, and the buckets a page computed from it, are kept from snapshot to snapshot")
    func allTimeHistogramKeptWhileQuiet() throws {
        try withRingDirectory { directory in
            let bot = try HundredLatencies(bot: "k", in: directory)
            let first = try #require(pass(bot.collector).series("latency"))
            let histogram = try #require(first.cumulative)
            let counts = first.classicCounts { ExportBuckets.cumulativeCounts(histogram, unit: .nanoseconds) }
            #expect(counts.last == 100)
            // Nothing recorded since: the same buckets, so the next page reuses them.
            let quiet = try #require(pass(bot.collector, offset: 200_000_000).series("latency"))
            #expect(quiet.cumulative == histogram && quiet.classicCounts { [] } == counts, "computed once, kept")
            bot.latency.record(1_000)
            let changed = try #require(pass(bot.collector, offset: 400_000_000).series("latency"))
            #expect(changed.cumulative?.count == 101 && changed.classicCounts { [] }.isEmpty, "computed again")
            #expect(first.cumulative?.count == 100 && first.classicCounts { [] } == counts)
        }
    }

    @Test("values leave the 1s window after a second and stay in the 1m one")
    func windowExpiry() throws {
        try withRingDirectory { directory in
            let bot = try HundredLatencies(bot: "w", in: directory)
            let now = pass(bot.collector).series("latency")!
            #expect(now.windows.map(\.count) == [100, 100, 100])
            let later = pass(bot.collector, offset: 1_600_000_000).series("latency")!
            #expect(later.windows.map(\.count) == [0, 100, 100])
            let muchLater = pass(bot.collector, offset: 7_000_000_000).series("latency")!
            #expect(muchLater.windows.map(\.count) == [0, 0, 100])
            #expect(muchLater.cumulativeCount == 100)
        }
    }

    @Test("counters add up exactly and have a rate; gauges keep last, min and max")
    func countersAndGauges() throws {
        try withRingDirectory { directory in
            // The collector first: a bot created after it started is seen whole, windows included.
            let collector = try makeCollector(directory, captured: CapturedLog())
            let bot = try Bot.attach("cg", directory: directory.path, options: .init(laneCapacity: 4096))
            let orders = try bot.counter("orders", labels: ["side": "buy"])
            let quotes = try bot.counter("quotes")
            let exposure = try bot.gauge("exposure")
            for _ in 0..<250 { orders.increment(by: 2) }
            for _ in 0..<1000 { quotes.increment() }
            for value in [5.0, -3.5, 12.25, 7.0] { exposure.set(value) }
            let snapshot = pass(collector)
            let orderSeries = try #require(snapshot.series("orders"))
            #expect(orderSeries.cumulativeSum == 500)
            #expect(orderSeries.windows[0].increase == 500 && orderSeries.windows[0].rate > 0)
            #expect(try #require(snapshot.series("quotes")).cumulativeSum == 1000)
            let gauge = try #require(snapshot.series("exposure"))
            #expect(gauge.lastValue == 7.0)
            #expect(gauge.windows[0].gaugeMin == -3.5 && gauge.windows[0].gaugeMax == 12.25)
        }
    }

    @Test("a counter's increment after a quiet spell shows in the next pass's snapshot, as a record would")
    func counterAfterAQuietSpell() throws {
        try withBot("quiet") { directory, bot in
            let orders = try bot.counter("orders"), latency = try bot.histogram("latency")
            orders.increment()
            latency.record(1)
            let collector = try makeCollector(directory, captured: CapturedLog())
            let start = rs_clock_precise_ns()
            collector.runPass(nowNanos: start, forcePublish: true)
            // Two minutes on, every window is empty: the bot is quiet, its cells read once a second.
            var now = start + 120_000_000_000
            collector.runPass(nowNanos: now, forcePublish: true)
            #expect(collector.snapshot.series("orders")?.cumulativeSum == 1)
            // Passes 200 ms apart, as the drain loop runs them: no cell read is due by the clock.
            orders.increment(by: 2)
            now += 200_000_000
            collector.runPass(nowNanos: now)
            #expect(collector.snapshot.series("orders")?.cumulativeSum == 3, "the increment, in the next pass's snapshot")
            #expect(collector.snapshot.series("orders")?.windows[0].increase == 2)
            // And a record, the same way.
            latency.record(5)
            now += 200_000_000
            collector.runPass(nowNanos: now)
            #expect(collector.snapshot.series("latency")?.cumulativeCount == 2)
        }
    }

    @Test("/latest writes a histogram's sum and a counter's total exactly past 2^53, where a Double rounds")
    func exactSumsInJSON() throws {
        try withRingDirectory { directory in
            let collector = try makeCollector(directory, captured: CapturedLog())
            let bot = try Bot.attach("big", directory: directory.path, options: .init(laneCapacity: 4096))
            let sizes = try bot.histogram("sizes", unit: .bytes)
            let volume = try bot.counter("volume")
            let twoTo53: UInt64 = 1 << 53
            for value in [twoTo53, 1, twoTo53 * 4, 3] { sizes.record(value) }  // 5 * 2^53 + 4
            volume.increment(by: twoTo53)
            volume.increment(by: 1)
            let snapshot = pass(collector)
            let text = String(decoding: JSONExporter.latest(snapshot), as: UTF8.self)
            #expect(text.contains("\"total_sum\":\(5 * twoTo53 + 4)"), "the histogram's exact sum")
            #expect(text.contains("\"total\":\(twoTo53 + 1)"), "the counter's exact total")
            #expect(Double(5 * twoTo53 + 4) == Double(5 * twoTo53), "the case a Double would get wrong")
        }
    }

    @Test("series past a cap are refused, counted, exported and logged once per ring; the rest are served")
    func seriesCaps() throws {
        try withRingDirectory { directory in
            var options = CollectorOptions(directory: directory)
            options.maxSeries = 5
            options.maxSeriesPerRing = 3
            let captured = CapturedLog()
            let collector = try Collector(options: options, log: captured.log)
            // Ring a: four metrics, one past its own cap of 3. Ring b: four more, two past the total of 5.
            var histograms: [String: [Bot.Histogram]] = [:]
            var bots: [Bot] = []
            for name in ["a", "b"] {
                let bot = try Bot.attach(name, directory: directory.path, options: .init(laneCapacity: 4096))
                bots.append(bot)
                histograms[name] = try (0..<4).map { try bot.histogram("latency", labels: ["n": "\($0)"]) }
            }
            for name in ["a", "b"] { for histogram in histograms[name]! { for value in 1...10 { histogram.record(UInt64(value)) } } }
            var snapshot = pass(collector)
            let built = snapshot.collector.snapshotBuild
            #expect(snapshot.series.count == 5 && built.series == 5 && built.seriesLimit == 5)
            let a = try #require(snapshot.ring("a")), b = try #require(snapshot.ring("b"))
            #expect(a.seriesRefused == 1 && a.recordsRefusedTotal == 10 && a.rejectedTotal == 0)
            #expect(b.seriesRefused == 2 && b.recordsRefusedTotal == 20 && b.rejectedTotal == 0)
            #expect(snapshot.series.allSatisfy { $0.cumulativeCount == 10 }, "the admitted series have every record")
            // Later records of refused series are counted too; the log says it once per ring.
            histograms["a"]![3].record(11)
            snapshot = pass(collector)
            #expect(snapshot.ring("a")?.recordsRefusedTotal == 11)
            #expect(
                captured.all.filter { $0.contains("ring a: its cap of 3 series (--max-series-per-ring) is reached: metric latency{n=3}") }
                    .count == 1,
                "\(captured.all)")
            #expect(
                captured.all.filter {
                    $0.contains("ring b: the collector's cap of 5 series (--max-series) is reached: metric latency{n=2}")
                }.count == 1,
                "\(captured.all)")
            let page = String(decoding: PrometheusExporter.render(snapshot), as: UTF8.self)
            #expect(page.contains("ringside_ring_series_refused{ring=\"b\"} 2") && page.contains("ringside_collector_series 5"))
            #expect(page.contains("ringside_ring_records_refused_total{ring=\"a\"} 11"))
        }
    }

    @Test("an SLO is violated, logged, and has no data (neither met nor violated, compliance none) when its window empties")
    func sloViolatedThenNoData() throws {
        try withBot("slo", options: .init(laneCapacity: 4096)) { directory, bot in
            let fill = try bot.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
            let other = try bot.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": "MSFT"])
            for _ in 0..<990 { fill.record(50_000) }
            for _ in 0..<10 { fill.record(300_000) }
            for _ in 0..<1000 { other.record(900_000) }  // not selected by the rule
            let captured = CapturedLog()
            let collector = try makeCollector(
                directory,
                slo: [
                    #"order_fill_latency{symbol="AAPL"}:p99<100us@1s"#,
                    #"order_fill_latency{symbol="AAPL"}:p999<100us@1s"#,
                ],
                captured: captured)
            let first = pass(collector).slos
            #expect(first.map(\.violated) == [false, true])
            #expect(first[0].events == 1000 && first[0].matchingSeries == 1)
            #expect(abs((first[0].compliance ?? 0) - 0.99) < 1e-9)
            #expect(first[1].violations == 1)
            #expect(captured.contains(#"SLO violated: order_fill_latency{symbol="AAPL"}:p999<100us@1s"#))

            // The window empties: nothing to judge, so neither met (the old 0) nor violated.
            let quiet = pass(collector, offset: 1_600_000_000).slos
            #expect(quiet.map(\.violated) == [nil, nil])
            #expect(quiet.map(\.compliance) == [nil, nil] && quiet.map(\.observed) == [nil, nil] && quiet.map(\.events) == [0, 0])
            #expect(quiet[1].violations == 1)
            #expect(captured.contains(#"SLO has no data: order_fill_latency{symbol="AAPL"}:p999<100us@1s: no events in its window"#))
            #expect(!captured.contains("SLO recovered"), "nothing recovered: there was nothing to judge")
            let text = String(decoding: PrometheusExporter.render(collector.snapshot), as: UTF8.self)
            let rule = #"slo="order_fill_latency{symbol=\"AAPL\"}:p999<100us@1s",severity="P1""#
            #expect(text.contains("ringside_slo_violations_total{\(rule)} 1\n"))
            #expect(text.contains("ringside_slo_violated{\(rule)} NaN\n") && text.contains("ringside_slo_compliance_ratio{\(rule)} NaN\n"))
            #expect(text.contains("ringside_slo_window_events{\(rule)} 0\n"))
            let latest = try jsonObject(String(decoding: JSONExporter.latest(collector.snapshot), as: UTF8.self))
            let slos = try #require(latest["slos"] as? [[String: Any]])
            #expect(slos.count == 2 && slos.allSatisfy { $0["violated"] is NSNull && $0["compliance"] is NSNull })
            let health = try jsonObject(
                String(
                    decoding: JSONExporter.health(collector.snapshot, isHealthy: true, lastPassAgeSeconds: 0, snapshotAgeSeconds: 0),
                    as: UTF8.self))
            #expect((health["slos"] as? [[String: Any]])?.allSatisfy { $0["violated"] is NSNull } == true)
        }
    }

    @Test("an availability SLO judges its counters' increases over its period, with its severity on every series")
    func availabilitySLO() throws {
        try withBot("orders", options: .init(laneCapacity: 64)) { directory, bot in
            let total = try bot.counter("orders_total")
            let rejected = try bot.counter("orders_rejected", labels: ["venue": "X"])
            let other = try bot.counter("orders_rejected", labels: ["venue": "Y"])
            total.increment(by: 10_000)  // before the collector: not its period's
            let captured = CapturedLog()
            let collector = try makeCollector(
                directory, slo: ["orders_rejected/orders_total<0.05%@1h severity=P0", #"orders_rejected{venue="Y"}/orders_total<2%@1h"#],
                captured: captured)
            var slos = pass(collector).slos
            #expect(slos[0].events == 0 && slos[0].violated == nil && slos[0].compliance == nil && slos[0].matchingSeries == 3)

            total.increment(by: 10_000)
            rejected.increment(by: 2)
            slos = pass(collector, offset: 1_000_000_000).slos
            #expect(slos[0].events == 10_000 && slos[0].observed == 0.0002 && slos[0].violated == false)
            #expect(slos[0].compliance == 1 - 0.0002 && slos[0].severity == "P0" && slos[1].severity == "P1")

            rejected.increment(by: 9)
            other.increment()
            slos = pass(collector, offset: 2_000_000_000).slos
            #expect(slos[0].observed == 0.0012 && slos[0].violated == true && slos[0].violations == 1)
            #expect(slos[1].observed == 0.0001 && slos[1].violated == false, "venue Y's only")
            #expect(captured.contains("SLO violated: orders_rejected/orders_total<0.05%@1h (severity P0): ratio 0.12%, bound 0.05%"))
            let text = String(decoding: PrometheusExporter.render(collector.snapshot), as: UTF8.self)
            let name = #"slo="orders_rejected/orders_total<0.05%@1h",severity="P0""#
            for line in [
                "ringside_slo_violated{\(name)} 1", "ringside_slo_events_total{\(name)} 10000", "ringside_slo_bad_events_total{\(name)} 12",
                "ringside_slo_objective_ratio{\(name)} 0.9995",
            ] {
                #expect(text.contains(line), "\(line)")
            }

            // Half an hour on: more orders, none rejected. An hour after that, the period holds
            // only what came after the half hour: nothing, so nothing is judged.
            total.increment(by: 1_000)
            slos = pass(collector, offset: 1_800_000_000_000).slos
            #expect(slos[0].events == 11_000 && slos[0].violated == true)
            slos = pass(collector, offset: 5_401_000_000_000).slos
            #expect(slos[0].events == 0 && slos[0].violated == nil && slos[0].compliance == nil)
            #expect(captured.contains("SLO has no data: orders_rejected/orders_total<0.05%@1h: no events in its window"))
            #expect(slos[0].eventsTotal == 11_000 && slos[0].badEventsTotal == 12, "since the collector started, never lower")
            #expect(slos[0].coveredSeconds.map { $0 >= 3_600 && $0 <= 3_602 } == true, "the period, to within a step (1 s)")
        }
    }

    @Test("an availability SLO's increases take a counter that goes back as started again, and a new series from zero")
    func counterIncreases() {
        var increases = CounterIncreases(periodNanos: 60_000_000_000)
        increases.take(bad: ["a": 5], total: ["t": 100], nowNanos: 1_000_000_000)
        #expect(increases.bad == 0 && increases.total == 0, "the first look is a baseline")
        increases.take(bad: ["a": 7, "b": 3], total: ["t": 150], nowNanos: 2_000_000_000)
        #expect(increases.bad == 5 && increases.total == 50, "a series new since counts from zero")
        increases.take(bad: ["a": 1, "b": 3], total: ["t": 20], nowNanos: 3_000_000_000)
        #expect(increases.bad == 6 && increases.total == 70, "gone back: started again")
        #expect(increases.overPeriod(nowNanos: 3_000_000_000) == (6, 70, 2_000_000_000))
        increases.take(bad: ["a": 1, "b": 3], total: ["t": 30], nowNanos: 63_000_000_000)
        #expect(increases.overPeriod(nowNanos: 63_000_000_000) == (0, 10, 60_000_000_000), "the period's only")
    }

    @Test("a producer's death is detected and logged; what it left is still served")
    func producerDeath() throws {
        try withRingDirectory { directory in
            let child = try ChildProcess(testProducer: "hold", ring: "mortal", in: directory, ["--count", "500", "--capacity", "1024"])
            #expect(child.readLine() == "ready \(child.pid)")
            let captured = CapturedLog()
            let collector = try makeCollector(directory, captured: captured)
            #expect(pass(collector).ring("mortal")?.state == .live)
            child.kill()
            let snapshot = pass(collector)
            #expect(snapshot.ring("mortal")?.state == .producerDead)
            #expect(captured.contains("ring mortal: producer pid \(child.pid) died"))
            #expect(snapshot.series("sequence")?.windows[2].count == 500)
        }
    }

    @Test("a producer that attached and died between two looks, writing nothing, is the one shown dead")
    func producerAttachedAndDiedBetweenLooks() throws {
        try withRingDirectory { directory in
            let first = try ChildProcess(testProducer: "hold", ring: "brief", in: directory, ["--count", "0"])
            #expect(first.readLine() == "ready \(first.pid)")
            let collector = try makeCollector(directory, captured: CapturedLog())
            #expect(pass(collector).ring("brief")?.producerPID == first.pid)
            first.kill()
            #expect(pass(collector).ring("brief")?.state == .producerDead)
            // Neither liveness (dead before, dead after) nor records moved: only the file's open
            // and close tell that another process came and went.
            let second = try ChildProcess(testProducer: "hold", ring: "brief", in: directory, ["--count", "0"])
            #expect(second.readLine() == "ready \(second.pid)")
            second.kill()
            let ring = pass(collector).ring("brief")
            #expect(ring?.state == .producerDead && ring?.producerPID == second.pid, "shown: \(String(describing: ring?.producerPID))")
        }
    }

    @Test("a corrupt ring is logged and skipped while the others are served")
    func corruptRingSkipped() throws {
        try withRingDirectory { directory in
            let good = try Bot.attach("good", directory: directory.path, options: .init(laneCapacity: 64))
            try good.counter("ticks").increment()
            do { _ = try Bot.attach("bad", directory: directory.path, options: .init(laneCapacity: 64)) }
            let fd = open(directory.filePath(for: "bad"), O_WRONLY)
            var garbage: UInt64 = 0x1234
            pwrite(fd, &garbage, 8, 0)
            close(fd)
            let captured = CapturedLog()
            let snapshot = pass(try makeCollector(directory, captured: captured))
            #expect(snapshot.ring("good")?.state == .live)
            #expect(snapshot.series("ticks")?.cumulativeSum == 1)
            let bad = try #require(snapshot.ring("bad"))
            #expect(bad.state == .skipped && bad.problem?.contains("bad magic") == true)
            #expect(captured.contains("skipping ring bad"))
            let text = String(decoding: PrometheusExporter.render(snapshot), as: UTF8.self)
            #expect(text.contains(#"ringside_ring_skipped{ring="bad"} 1"#))
        }
    }

    @Test("records with a wrong kind or unknown metric are rejected and counted, the rest aggregated")
    func invalidRecordsRejected() throws {
        try withBot("liar", options: .init(laneCapacity: 16)) { directory, bot in
            let latency = try bot.histogram("latency")
            for value in 1...4 { latency.record(UInt64(value)) }
            // Lane 0's records, where the format's geometry puts them.
            let geometry = rs_geometry_of(4, RS_DEFAULT_REGISTRY_CAPACITY)
            let records = Int(geometry.lanes_offset) + Int(geometry.lane_records_offset)
            let kind = recordOffset(\.kind), metric = recordOffset(\.metric)
            let fd = open(directory.filePath(for: "liar"), O_WRONLY)
            var badKind: UInt8 = 1
            pwrite(fd, &badKind, 1, off_t(records + 32 * 1 + kind))  // record 1 claims to be a counter's
            var badMetric: UInt32 = 77
            pwrite(fd, &badMetric, 4, off_t(records + 32 * 2 + metric))  // record 2 names metric 77
            close(fd)
            let captured = CapturedLog()
            let snapshot = pass(try makeCollector(directory, captured: captured))
            #expect(snapshot.series("latency")?.windows[0].count == 2)
            #expect(snapshot.ring("liar")?.rejectedTotal == 2)
            #expect(snapshot.ring("liar")?.drainedTotal == 4)
            #expect(captured.contains("rejected 2 invalid records"))
        }
    }

    @Test("metrics registered after attach are picked up from the registry")
    func lateRegistration() throws {
        try withBot("late", options: .init(laneCapacity: 64)) { directory, bot in
            try bot.counter("early").increment()
            let collector = try makeCollector(directory, captured: CapturedLog())
            #expect(pass(collector).series.count == 1)
            try bot.gauge("later").set(3)
            let snapshot = pass(collector)
            #expect(snapshot.series("later")?.lastValue == 3)
            #expect(snapshot.ring("late")?.rejectedTotal == 0)
        }
    }

    @Test("a removed ring is detached; a ring that appears is attached")
    func ringsComeAndGo() throws {
        try withRingDirectory { directory in
            let captured = CapturedLog()
            let collector = try makeCollector(directory, captured: captured)
            #expect(pass(collector).rings.isEmpty)
            do { _ = try Bot.attach("comer", directory: directory.path, options: .init(laneCapacity: 16)) }
            #expect(pass(collector, offset: 300_000_000).ring("comer") != nil)
            try directory.remove("comer")
            #expect(pass(collector, offset: 600_000_000).ring("comer") == nil)
            #expect(captured.contains("ring comer attached") && captured.contains("ring comer detached: its file was removed"))
        }
    }

    @Test("--ring restricts the collector to the named rings; sampled histograms count every call")
    func ringFilterAndSampledHistograms() throws {
        try withRingDirectory { directory in
            let wanted = try Bot.attach("wanted", directory: directory.path, options: .init(laneCapacity: 1024))
            let latency = try wanted.histogram("latency", sampleEvery: 4)
            for value in 1...400 { latency.record(UInt64(value)) }
            let other = try Bot.attach("other", directory: directory.path, options: .init(laneCapacity: 16))
            try other.counter("ignored").increment()
            var options = CollectorOptions(directory: directory)
            options.rings = ["wanted"]
            let snapshot = pass(try Collector(options: options, log: CapturedLog().log))
            #expect(snapshot.rings.map(\.name) == ["wanted"])
            let series = try #require(snapshot.series("latency"))
            // 100 records written, each standing for 4 calls.
            #expect(series.windows[0].count == 400 && series.cumulativeCount == 400)
            #expect(snapshot.series("ignored") == nil)
        }
    }

    @Test("a missing ring directory is said once, and its return too")
    func missingDirectory() throws {
        try withRingDirectory { parent in
            let directory = RingDirectory(parent.path + "/later")
            let captured = CapturedLog()
            let collector = try makeCollector(directory, captured: captured)
            pass(collector)
            pass(collector, offset: 300_000_000)
            #expect(captured.all.filter { $0.contains("No such file or directory (errno: 2); waiting for it") }.count == 1)
            mkdir(directory.path, 0o700)
            _ = try Bot.attach("late", directory: directory.path, options: .init(laneCapacity: 16))
            #expect(pass(collector, offset: 600_000_000).ring("late") != nil)
            #expect(captured.contains("ring directory \(directory.path) is readable"))
        }
    }

    @Test("stop releases the rings so the next collector can take them")
    func stopReleases() throws {
        try withBot("handoff", options: .init(laneCapacity: 64)) { directory, bot in
            let ticks = try bot.counter("ticks")
            let latency = try bot.histogram("latency")
            ticks.increment()
            latency.record(1)
            let captured = CapturedLog()
            let first = try makeCollector(directory, captured: captured)
            first.start()
            _ = eventually(seconds: 30) { first.snapshot.series("latency")?.cumulativeCount == 1 }
            first.stop()
            #expect(captured.contains("ring handoff released"))
            ticks.increment()
            latency.record(2)
            let second = pass(try makeCollector(directory, captured: CapturedLog()))
            // A bot of one process: its all-time histogram is not kept across collectors (a bot's
            // with workers is: see WorkerMergeTests).
            #expect(second.series("latency")?.cumulativeCount == 1, "the second collector drains only what the first left")
            #expect(second.series("ticks")?.cumulativeSum == 2, "a counter's total lives in the ring: exact across collectors")
        }
    }

    @Test("a lane's thread id and name reach the snapshot and /latest's lanes")
    func laneThreadNames() throws {
        try withRingDirectory { directory in
            let values = try Bot.attach("named", directory: directory.path, options: .init(laneCapacity: 1024)).histogram("values")
            let recorded = DispatchSemaphore(value: 0), finish = DispatchSemaphore(value: 0)
            let thread = Thread {
                // The kernel's name, which the producer writes into the lane it claims.
                try? nameCurrentThread("fill-router")
                values.record(7)
                recorded.signal()
                finish.wait()  // alive, so its id is still its own
            }
            thread.start()
            recorded.wait()
            defer { finish.signal() }
            let snapshot = pass(try makeCollector(directory, captured: CapturedLog()))
            let lane = try #require(snapshot.ring("named")?.lanes.first)
            #expect(lane.threadName == "fill-router")
            #expect(
                lane.threadID > 0 && lane.threadID != getpid()
                    && FileManager.default.fileExists(atPath: "/proc/self/task/\(lane.threadID)"),
                "a thread of this process: \(lane.threadID)")
            let latest = try jsonObject(String(decoding: JSONExporter.latest(snapshot), as: UTF8.self))
            let rings = try #require(latest["rings"] as? [[String: Any]])
            let lanes = try #require(rings.first?["lanes"] as? [[String: Any]])
            #expect(lanes.first?["thread_name"] as? String == "fill-router")
            #expect(lanes.first?["thread_id"] as? Int == Int(lane.threadID))
        }
    }
}

/// A bot whose histogram "latency" recorded 1 ... 100, and a collector over its directory: how the
/// tests that follow one histogram from snapshot to snapshot begin. Holding it keeps the bot attached.
private struct HundredLatencies {
    let latency: Bot.Histogram
    let collector: Collector

    init(bot name: String, in directory: RingDirectory) throws {
        let latency = try Bot.attach(name, directory: directory.path, options: .init(laneCapacity: 1024)).histogram("latency")
        for value in 1...100 { latency.record(UInt64(value)) }
        self.latency = latency
        collector = try makeCollector(directory, captured: CapturedLog())
    }
}
