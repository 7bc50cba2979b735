import Foundation
import Ringside
@testable import RingsideCollector
import RingsideCommandLine
import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

@Suite("SLOs of every kind: gauges, signed histograms, rates and ratios, and the kinds each can judge")
struct SLOKindsTests {
    static let windows: [UInt64] = [1_000_000_000, 5_000_000_000, 60_000_000_000]

    /// A metric as a bot registers it.
    static func metric(
        _ name: String, _ kind: MetricKind, unit: MetricUnit = .none, signed: Bool = false, scale: Int8 = 0
    ) -> MetricDescriptor {
        MetricDescriptor(
            index: 0, name: name, kind: kind, unit: unit, encodedLabels: "", help: "", sampleEvery: 1, isSigned: signed, scale: scale)
    }

    @Test("every new form parses: gauges' max and min, floors, negative and time bounds, rates, ratio floors")
    func newForms() throws {
        let kill = try SLORule(parsing: "kill_switch_active:max<1@1m severity=P0")
        #expect(
            kill.objective == .distribution(.init(metric: "kill_switch_active", labels: [:]), .max, threshold: 1, thresholdIsTime: false))
        #expect(kill.comparison == .below && kill.severity == "P0" && kill.statisticName == "max" && !kill.isFloor)

        let pnl = try SLORule(parsing: "daily_pnl:min>-50000@1d")
        #expect(pnl.objective == .distribution(.init(metric: "daily_pnl", labels: [:]), .min, threshold: -50_000, thresholdIsTime: false))
        #expect(pnl.comparison == .above && pnl.isFloor && !pnl.inclusive && pnl.windowNanos == 86_400_000_000_000)
        #expect(pnl.isMet(by: -49_999, threshold: -50_000) && !pnl.isMet(by: -50_000, threshold: -50_000))
        #expect(pnl.windowProblem(windows: Self.windows) == nil, "a gauge's period need not be one of the windows")

        let slippage = try SLORule(parsing: "slippage_bps:p95<50@5m")
        #expect(
            slippage.objective
                == .distribution(.init(metric: "slippage_bps", labels: [:]), .quantile(0.95), threshold: 50, thresholdIsTime: false))
        #expect(slippage.windowProblem(windows: Self.windows) == "window 5m is not one of --windows 1s,5s,1m")
        #expect(slippage.windowProblem(windows: Self.windows + [300_000_000_000]) == nil)

        let orders = try SLORule(parsing: #"orders{venue="X"}:rate>=1.5@5m"#)
        #expect(orders.objective == .rate(.init(metric: "orders", labels: ["venue": "X"]), bound: 1.5))
        #expect(orders.comparison == .atLeast && orders.statisticName == "rate" && orders.objectiveRatio == nil)

        let fills = try SLORule(parsing: "orders_filled/orders_sent>=90%@1h")
        #expect(
            fills.objective
                == .ratio(bad: .init(metric: "orders_filled", labels: [:]), total: .init(metric: "orders_sent", labels: [:]), bound: 0.9))
        #expect(fills.isFloor && fills.objectiveRatio == 0.9 && fills.statisticName == "ratio")

        let offset = try SLORule(parsing: "clock_offset:p99<=-5us@1s")
        #expect(
            offset.objective
                == .distribution(.init(metric: "clock_offset", labels: [:]), .quantile(0.99), threshold: -5_000, thresholdIsTime: true))
        #expect(offset.threshold(in: .nanoseconds) == -5_000 && offset.inclusive)
        #expect(try SLORule(parsing: "md:min>10us@1s").threshold(in: .microseconds) == 10)
        #expect(try SLORule(parsing: #"md{x="a>b"}:max<1@1s"#).selectors == [.init(metric: "md", labels: ["x": "a>b"])], "a '>' in quotes")
    }

    @Test(
        "a rule that cannot parse, or whose window no kind can be judged over, is refused with the reason",
        arguments: [
            ("orders:rate>1ms@5m", "is not a rate"), ("orders:rate>-1@5m", "is not a rate"),
            ("orders:rate>1@500ms", "a rate's period must be from 1s to 90d"), ("x:max=1@1m", "expected '<', '<=', '>' or '>='"),
            ("x:median<1@1s", "median is not a statistic"), ("x:max<fast@1s", "fast is not a threshold"),
            ("a/b>-5%@1h", "is not a ratio bound"), ("x:max<1@91d", "neither one of --windows 1s,5s,1m (a histogram's) nor a period"),
            ("x:mean<1@2s", "window 2s is not one of --windows 1s,5s,1m"),
        ])
    func refusals(_ text: String, _ expected: String) throws {
        do {
            let rule = try SLORule(parsing: text)
            let problem = rule.windowProblem(windows: Self.windows)
            #expect(problem?.contains(expected) == true, "\(text): \(problem ?? "accepted")")
            #expect(throws: UsageError.self) { try CollectorOptions.parse(["--slo", text]) }
        } catch {
            #expect(error.reason.contains(expected), "\(text): \(error.reason)")
        }
    }

    @Test("a rule judges the kinds it can: each refusal names the series, its bot and why")
    func kindsItCanJudge() throws {
        func problem(_ rule: String, _ metric: MetricDescriptor) throws -> String? {
            try SLORule(parsing: rule).problem(judging: metric, ofBot: "risk", windows: Self.windows)
        }
        let gauge = Self.metric("kill_switch_active", .gauge), counter = Self.metric("orders", .counter)
        let latency = Self.metric("fill", .histogram, unit: .nanoseconds),
            slippage = Self.metric("slippage_bps", .histogram, signed: true, scale: -2)
        #expect(try problem("kill_switch_active:max<1@1m", gauge) == nil)
        #expect(try problem("kill_switch_active:max<1@1d", gauge) == nil)
        #expect(try problem("slippage_bps:p95<-5@1m", slippage) == nil)
        #expect(try problem("orders:rate>1@5m", counter) == nil)
        #expect(try problem("fill:min>1us@1s", latency) == nil)
        #expect(
            try problem("kill_switch_active:p99<1@1m", gauge)
                == "kill_switch_active of bot risk is a gauge: p99 judges histograms; a gauge takes max or min")
        #expect(try problem("kill_switch_active:mean<1@1m", gauge)?.contains("mean judges histograms") == true)
        #expect(
            try problem("orders:max<1@1m", counter)
                == "orders of bot risk is a counter: max judges histograms and gauges; a counter takes rate (orders:rate>1@5m) or a ratio (orders/TOTAL<1%@30d)"
        )
        #expect(
            try problem("fill:rate>1@5m", latency)
                == "fill of bot risk is a histogram: rate judges counters (a histogram takes p99, mean, max or min)")
        #expect(
            try problem("kill_switch_active/orders<1%@1h", gauge)
                == "kill_switch_active of bot risk is a gauge: a ratio's BAD and TOTAL are counters")
        #expect(
            try problem("fill:max<1ms@1d", latency)
                == "fill of bot risk is a histogram: its max is judged over one of --windows 1s,5s,1m, not 1d")
        #expect(
            try problem("slippage_bps:p95<5ms@1m", slippage)
                == "slippage_bps of bot risk is a histogram of signed values with no unit, not a time: a bound of time needs a metric of time (give a number in its own unit)"
        )
        #expect(try problem("fill:p99<-5@1m", latency)?.contains("of values 0 or more: a negative bound is never crossed") == true)

        // Series of two kinds, or two units, under one selector: the first decides.
        let rule = try SLORule(parsing: "x:max<1@1m")
        let mixed = rule.problem(
            judgingAll: [("a", Self.metric("x", .gauge)), ("b", Self.metric("x", .histogram, unit: .milliseconds))], windows: Self.windows)
        #expect(
            mixed
                == #"x of bot b is a histogram in ms, of bot a a gauge (no unit): a rule judges series of one kind and unit together (name one with {ring="b"})"#
        )
        #expect(
            rule.problem(judgingAll: [("a", Self.metric("x", .gauge)), ("b", Self.metric("y", .counter))], windows: Self.windows) == nil)
    }
}

// MARK: - Judging, in a collector stepped by hand

extension SLOKindsTests {
    @Test(
        "a gauge's max: met at 0, violated from the 1 set and while its period holds it, recovered once it left; a gauge never set is no data"
    )
    func gaugeMax() throws {
        try withBot("risk") { directory, bot in
            let kill = try bot.gauge("kill_switch_active")
            _ = try bot.gauge("idle_switch")
            kill.set(0)
            let captured = CapturedLog()
            let collector = try makeCollector(
                directory, slo: ["kill_switch_active:max<1@1m severity=P0", "idle_switch:max<1@1m"], captured: captured)
            var slos = pass(collector).slos
            #expect(slos[0].observed == 0 && slos[0].violated == false && slos[0].matchingSeries == 1 && slos[0].threshold == 1)
            #expect(slos[1].observed == nil && slos[1].violated == nil && slos[1].matchingSeries == 1, "never set: no data")

            kill.set(1)
            slos = pass(collector, offset: 1_000_000_000).slos
            #expect(slos[0].observed == 1 && slos[0].violated == true && slos[0].violations == 1 && slos[0].compliance == 0)
            #expect(captured.contains("SLO violated: kill_switch_active:max<1@1m (severity P0): max 1, bound 1"))

            kill.set(0)
            slos = pass(collector, offset: 2_000_000_000).slos
            #expect(slos[0].observed == 1 && slos[0].violated == true, "the period still holds the 1")
            // Looks every 5 s: the 1 leaves the minute's period once it is a minute old (to within a
            // checkpoint and the shortest window), and is not taken again from a window that still holds it.
            var recoveredAt: UInt64?
            for seconds in stride(from: 5, through: 80, by: 5) as StrideThrough<UInt64> {
                let slo = pass(collector, offset: seconds * 1_000_000_000).slos[0]
                if recoveredAt == nil, slo.violated == false {
                    recoveredAt = seconds
                    #expect(slo.observed == 0 && slo.coveredSeconds.map { $0 >= 60 && $0 <= 66 } == true, "\(slo)")
                }
            }
            #expect(recoveredAt.map { $0 > 60 && $0 <= 65 } == true, "recovered at \(recoveredAt.map(String.init) ?? "never")")
            #expect(captured.contains("SLO recovered: kill_switch_active:max<1@1m"))
        }
    }

    @Test("a gauge holding a value stays judged on it: a kill switch left on stays violated past its period")
    func gaugeHeld() throws {
        try withBot("risk") { directory, bot in
            let kill = try bot.gauge("kill_switch_active")
            kill.set(1)
            let collector = try makeCollector(directory, slo: ["kill_switch_active:max<1@1m"], captured: CapturedLog())
            #expect(pass(collector).slos[0].violated == true)
            let later = pass(collector, offset: 180_000_000_000).slos[0]
            #expect(later.violated == true && later.observed == 1 && later.violations == 1, "set once, held three minutes later")
        }
    }

    @Test("a gauge's min with a negative floor: daily loss")
    func gaugeMinFloor() throws {
        try withBot("pnl") { directory, bot in
            let pnl = try bot.gauge("daily_pnl")
            pnl.set(-10_000)
            let captured = CapturedLog()
            let collector = try makeCollector(directory, slo: ["daily_pnl:min>-50000@1d"], captured: captured)
            #expect(pass(collector).slos[0].violated == false)
            pnl.set(-60_000.5)
            let slo = pass(collector, offset: 1_000_000_000).slos[0]
            #expect(slo.violated == true && slo.observed == -60_000.5 && slo.threshold == -50_000 && slo.statistic == "min")
            #expect(captured.contains("SLO violated: daily_pnl:min>-50000@1d (severity P1): min -60000.5, bound -50000"))
        }
    }

    @Test("a signed histogram's p95, p50, min and max in its own unit, negative bounds too; an empty window is no data")
    func signedPercentiles() throws {
        try withBot("slip", options: .init(laneCapacity: 4096)) { directory, bot in
            let slippage = try bot.histogram("slippage_bps", resolution: 0.01, signed: true)
            for _ in 0..<90 { slippage.record(-20.5) }
            for _ in 0..<10 { slippage.record(60.25) }
            let collector = try makeCollector(
                directory,
                slo: ["slippage_bps:p95<50@1s", "slippage_bps:p50<-10@1s", "slippage_bps:min>-25@1s", "slippage_bps:max<=60.25@1s"],
                captured: CapturedLog())
            let slos = pass(collector).slos
            #expect(slos.map(\.matchingSeries) == [1, 1, 1, 1] && slos.map(\.events) == [100, 100, 100, 100])
            #expect(
                slos[0].violated == true && abs(slos[0].observed! - 60.25) <= 0.07 && abs((slos[0].compliance ?? 0) - 0.9) < 1e-9,
                "\(slos[0])")
            #expect(slos[1].violated == false && abs(slos[1].observed! + 20.5) <= 0.03 && slos[1].threshold == -10)
            #expect(slos[2].violated == false && slos[2].observed == -20.5, "min exact")
            #expect(slos[3].violated == false && slos[3].observed == 60.25, "max exact, <= keeps it")
            let quiet = pass(collector, offset: 3_000_000_000).slos
            #expect(quiet.allSatisfy { $0.events == 0 && $0.observed == nil && $0.violated == nil }, "no events: neither met nor violated")
        }
    }

    @Test("a rate floor: judged once its period is seen whole, met at 20 a second, violated at 0 (a feed gone quiet)")
    func rateFloor() throws {
        try withBot("orders") { directory, bot in
            let orders = try bot.counter("orders")
            orders.increment(by: 5)  // before the collector: not its period's
            let captured = CapturedLog()
            let collector = try makeCollector(directory, slo: ["orders:rate>1@5s severity=P2"], captured: captured)
            var slo = pass(collector).slos[0]
            #expect(slo.observed == nil && slo.violated == nil && slo.matchingSeries == 1 && slo.threshold == 1)
            orders.increment(by: 100)
            slo = pass(collector, offset: 1_000_000_000).slos[0]
            #expect(slo.observed == nil && slo.violated == nil, "1 s of a 5 s period: not judged yet")
            slo = pass(collector, offset: 5_000_000_000).slos[0]
            #expect(slo.observed.map { $0 > 19 && $0 <= 20 } == true && slo.violated == false && slo.events == 100, "\(slo)")
            #expect(slo.coveredSeconds.map { $0 >= 5 && $0 < 5.5 } == true, "100 over the 5 s seen")
            slo = pass(collector, offset: 11_000_000_000).slos[0]
            #expect(slo.observed == 0 && slo.violated == true && slo.compliance == 0)
            #expect(captured.contains("SLO violated: orders:rate>1@5s (severity P2): rate 0/s, bound 1/s"))
        }
    }

    @Test("a ratio floor (a fill rate): its bad events are those not in the first counters")
    func ratioFloor() throws {
        try withBot("fills") { directory, bot in
            let sent = try bot.counter("orders_sent"), filled = try bot.counter("orders_filled")
            let collector = try makeCollector(directory, slo: ["orders_filled/orders_sent>=90%@1h"], captured: CapturedLog())
            _ = pass(collector)
            sent.increment(by: 100)
            filled.increment(by: 95)
            var slo = pass(collector, offset: 1_000_000_000).slos[0]
            #expect(slo.observed == 0.95 && slo.violated == false && slo.compliance == 0.95 && slo.objectiveRatio == 0.9)
            #expect(slo.eventsTotal == 100 && slo.badEventsTotal == 5)
            sent.increment(by: 100)
            filled.increment(by: 70)
            slo = pass(collector, offset: 2_000_000_000).slos[0]
            #expect(slo.observed == 0.825 && slo.violated == true && slo.badEventsTotal == 35)
        }
    }
}

// MARK: - Rules that match nothing yet, and series they cannot judge

extension SLOKindsTests {
    @Test("a rule matching nothing shows 0 and is said once; a series of a wrong kind appearing later is said once and counted")
    func matchesNothingThenWrongKind() throws {
        try withBot("risk") { directory, bot in
            let captured = CapturedLog()
            let collector = try makeCollector(
                directory, slo: ["kill_switch_active:max<1@1m severity=P0", "orders:rate>1@1m"], captured: captured)
            for offset in [0, 1, 2] as [UInt64] { _ = pass(collector, offset: offset * 1_000_000_000) }
            var slos = collector.snapshot.slos
            #expect(slos[0].matchingSeries == 0 && slos[0].unjudgedSeries == 0)
            let nothing = captured.all.filter { $0.contains("SLO kill_switch_active:max<1@1m matches no series yet") }
            #expect(nothing.count == 1, "\(captured.all)")
            var page = String(decoding: PrometheusExporter.render(collector.snapshot), as: UTF8.self)
            #expect(page.contains(#"ringside_slo_matching_series{slo="kill_switch_active:max<1@1m",severity="P0"} 0"#))
            let latest = try jsonObject(String(decoding: JSONExporter.latest(collector.snapshot), as: UTF8.self))
            #expect((latest["slos"] as? [[String: Any]])?.first?["matching_series"] as? Int == 0)

            // The bot registers it as a counter: not judged, said once, counted.
            try bot.counter("kill_switch_active").increment()
            _ = try bot.counter("orders")
            for offset in [3, 4, 5] as [UInt64] { _ = pass(collector, offset: offset * 1_000_000_000) }
            slos = collector.snapshot.slos
            #expect(slos[0].matchingSeries == 0 && slos[0].unjudgedSeries == 1 && slos[0].violated == nil)
            #expect(
                slos[0].unjudgedProblem?.hasPrefix("kill_switch_active of bot risk is a counter: max judges histograms and gauges") == true)
            let unjudged = captured.all.filter { $0.contains("SLO kill_switch_active:max<1@1m names 1 series it cannot judge") }
            #expect(unjudged.count == 1, "\(captured.all)")
            #expect(slos[1].matchingSeries == 1 && captured.contains("SLO orders:rate>1@1m matches 1 series now"))
            page = String(decoding: PrometheusExporter.render(collector.snapshot), as: UTF8.self)
            #expect(page.contains(#"ringside_slo_unjudged_series{slo="kill_switch_active:max<1@1m",severity="P0"} 1"#))
        }
    }

    @Test("series of two kinds under one selector: the first judged, the other counted")
    func mixedKinds() throws {
        try withRingDirectory { directory in
            let a = try Bot.attach("a", directory: directory.path), b = try Bot.attach("b", directory: directory.path)
            try a.gauge("exposure").set(5)
            try b.histogram("exposure", unit: .milliseconds).record(3)
            let captured = CapturedLog()
            let collector = try makeCollector(directory, slo: ["exposure:max<10@1m"], captured: captured)
            let slo = pass(collector).slos[0]
            #expect(slo.matchingSeries == 1 && slo.unjudgedSeries == 1 && slo.observed == 5)
            #expect(slo.unjudgedProblem?.contains(#"exposure of bot b is a histogram in ms, of bot a a gauge (no unit)"#) == true, "\(slo)")
            withExtendedLifetime((a, b)) {}
        }
    }
}
