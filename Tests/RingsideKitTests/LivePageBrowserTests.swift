import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// Chromium, headless, on a page of the test's own collector: what a person would see, read back
/// from the rendered DOM.
@Suite("the live page in a real browser")
struct LivePageBrowserTests {
    /// The DOM after the page's scripts ran for `budget` milliseconds of virtual time.
    static func renderedDOM(_ chromium: String, url: String, budget: Int = 5_000) throws -> String {
        let profile = try TemporaryDirectory("ringside-chromium")
        defer { profile.remove() }
        let result = try runProcess(
            chromium,
            [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--user-data-dir=\(profile.path)", "--virtual-time-budget=\(budget)",
                "--dump-dom", url,
            ], mergingErrors: true, timeoutSeconds: 120)
        try #require(result.status == 0, "chromium failed: \(result.output.suffix(2000))")
        return result.output
    }

    /// The `data-value` of `data-stat="stat"` inside the element that starts at `anchor` in `dom`.
    static func value(_ stat: String, after anchor: String, in dom: String) -> Double? {
        guard let start = dom.range(of: anchor) else { return nil }
        let rest = dom[start.upperBound...]
        guard let statRange = rest.range(of: "data-stat=\"\(stat)\" data-value=\"") else { return nil }
        let tail = rest[statRange.upperBound...]
        return Double(tail.prefix { $0 != "\"" })
    }

    @Test(
        "the page's charts have points, its figures equal /latest's, and a dead producer shows as dead",
        .timeLimit(.minutes(5)))
    func pageShowsWhatLatestSays() throws {
        try withChromium { chromium, directory in
            // A bot that keeps running, and one that is killed: the page must show it dead.
            let bot = try ChildProcess(
                testProducer: "kit", ring: "bot", in: directory,
                ["--count", "2000", "--start", "1000", "--step", "997", "--per-second", "200"])
            defer { bot.kill() }
            #expect(bot.readLine()?.hasPrefix("ready ") == true)
            let gone = try ChildProcess(testProducer: "hold", ring: "gone-bot", in: directory, ["--count", "10"])
            #expect(gone.readLine()?.hasPrefix("ready ") == true)
            gone.kill()
            _ = gone.waitForExit()
            // A bot with a forked worker: the worker's file shows under the bot, with its pid.
            let pool = try ChildProcess(testProducer: "gauge-workers", ring: "pool", in: directory, ["--children", "1"], withInput: true)
            defer {
                pool.closeInput()
                _ = pool.waitForExit()
            }
            let workerPID = try #require(pool.readLine()?.split(separator: " ").last.flatMap { Int32($0) })

            let (collector, port) = try startCollector([
                "--dir", directory.path, "--poll", "20ms",
                "--slo", "order_fill_latency:p99<1ms@1m",
            ])
            defer { collector.kill() }
            // A few seconds of history, and both bots seen, the killed one as dead.
            let ready = try eventually(seconds: 30) { () -> Bool? in
                let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
                let rings = latest["rings"] as? [[String: Any]] ?? []
                let dead =
                    rings.contains { $0["name"] as? String == "gone-bot" && $0["state"] as? String == "producer_dead" }
                    && rings.contains { $0["worker_pid"] as? Int == Int(workerPID) }
                let history = try httpGet(port: port, path: "/api/history").body
                return dead && history.contains("order_fill_latency") ? true : nil
            }
            try #require(ready == true, "the collector did not show both bots within 30 s")
            sleep(3)

            let dom = try Self.renderedDOM(chromium, url: "http://127.0.0.1:\(port)/?window=1m")
            let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
            let series = try #require((latest["series"] as? [[String: Any]])?.first { $0["metric"] as? String == "order_fill_latency" })
            let window = try #require((series["windows"] as? [String: [String: Any]])?["1m"])
            let anchor = "data-ring=\"bot\" data-metric=\"order_fill_latency\""
            for stat in ["p50", "p99", "p999", "max"] {
                let shown = Self.value(stat, after: anchor, in: dom)
                #expect(
                    shown != nil && shown == window[stat] as? Double,
                    "\(stat): the page shows \(shown.map { "\($0)" } ?? "nothing"), /latest \(window[stat] ?? "nothing")")
            }
            // Its chart has points (seeded from /api/history, then one a second).
            let card = try #require(dom.range(of: anchor).map { dom[$0.upperBound...] })
            let points = card.range(of: "data-points=\"").map { card[$0.upperBound...].prefix { $0 != "\"" } }.flatMap { Int($0) }
            #expect((points ?? 0) >= 2, "the chart has \(points ?? 0) points")
            #expect(card.contains("<polyline"), "the chart draws lines")
            // The dead producer, as dead.
            #expect(dom.contains("data-ring=\"gone-bot\" data-state=\"producer_dead\""), "the killed bot's row")
            #expect(dom.contains(">dead</span>"))
            // The worker, under its bot: its row follows the bot's, named by its pid.
            let workerRow = "data-ring=\"pool@\(workerPID)\" data-state=\"live\" data-worker=\"\(workerPID)\""
            #expect(dom.contains(workerRow), "the worker's row")
            let botAt = dom.range(of: "data-ring=\"pool\" data-state=\"live\"")?.lowerBound
            let workerAt = dom.range(of: workerRow)?.lowerBound
            #expect(botAt != nil && workerAt != nil && botAt! < workerAt!, "the bot's row, then its worker's")
            // The SLO, and the status line.
            #expect(dom.contains("data-slo=\"order_fill_latency:p99"), "the SLO's row")
            #expect(dom.contains("class=\"live\">live, updated"))
        }
    }

    @Test(
        "a bot past its series cap says on the page how many of its metrics got no series, and which flag caps them",
        .timeLimit(.minutes(5)))
    func refusedSeriesShowOnThePage() throws {
        try withChromium { chromium, directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms", "--max-series-per-ring", "4"])
            defer { collector.kill() }
            let run = try runTestProducer("many-metrics", ring: "wide", in: directory, ["--count", "10", "--metrics", "10"])
            try #require(run.status == 0, "\(run.output)")
            let shown = try eventually(seconds: 30) { () -> Bool? in
                let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
                let ring = (latest["rings"] as? [[String: Any]])?.first { $0["name"] as? String == "wide" }
                return ring?["series_refused"] as? Int == 6 && ring?["series_refused_by"] as? String == "--max-series-per-ring" ? true : nil
            }
            try #require(shown == true, "/latest never showed the 6 metrics refused by --max-series-per-ring")
            let dom = try Self.renderedDOM(chromium, url: "http://127.0.0.1:\(port)/")
            let row = try #require(dom.range(of: "data-ring=\"wide\"").map { dom[$0.lowerBound...].prefix { $0 != "\n" } })
            #expect(row.contains("data-refused=\"6\""), "the bot's row: \(row.prefix(600))")
            #expect(row.contains("6 metrics refused a series (--max-series-per-ring reached)"), "the bot's row: \(row.prefix(600))")
        }
    }

    /// The HTML of the card of `metric` in `dom`, up to the next card.
    static func card(_ metric: String, in dom: String) -> Substring? {
        guard let start = dom.range(of: "data-metric=\"\(metric)\"") else { return nil }
        let rest = dom[start.upperBound...]
        return rest.range(of: "<div class=\"card\"").map { rest[..<$0.lowerBound] } ?? rest
    }

    @Test("gauges set to NaN and the infinities show as /latest writes them, and draw no broken chart", .timeLimit(.minutes(5)))
    func nonFiniteGauges() throws {
        guard let chromium = try requiredSystemTool("chromium") else { return }
        try withBot("odd-bot") { directory, bot in
            try bot.gauge("odd_nan").set(.nan)
            try bot.gauge("odd_inf").set(.infinity)
            try bot.gauge("odd_neg_inf").set(-.infinity)
            try bot.gauge("odd_plain").set(2.5)
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            let seen = try eventually(seconds: 30) { () -> Bool? in
                let body = try httpGet(port: port, path: "/latest").body
                return body.contains(#""metric":"odd_neg_inf""#) && body.contains(#""min":"-Inf""#) ? true : nil
            }
            try #require(seen == true, "/latest did not show the gauges within 30 s")
            sleep(2)  // a few points for the charts

            // The minute's window: the gauges were set seconds ago.
            let dom = try Self.renderedDOM(chromium, url: "http://127.0.0.1:\(port)/?window=1m")
            withExtendedLifetime(bot) {}
            let figures = [
                ("odd_nan", "value", "NaN", "NaN"), ("odd_nan", "max", "null", "-"),  // NaN is no extreme
                ("odd_inf", "value", "+Inf", "+Inf"), ("odd_inf", "max", "+Inf", "+Inf"),
                ("odd_neg_inf", "value", "-Inf", "-Inf"), ("odd_neg_inf", "min", "-Inf", "-Inf"),
                ("odd_plain", "value", "2.5", "2.5000"),
            ]
            for (metric, stat, value, shown) in figures {
                let card = Self.card(metric, in: dom) ?? ""
                #expect(
                    card.contains("data-stat=\"\(stat)\" data-value=\"\(value)\">\(shown)</b>"), "\(metric) \(stat): \(card.prefix(600))")
            }
            // Each chart has its points; only the finite gauge's draws a line, and no line has a NaN in it.
            for metric in ["odd_nan", "odd_inf", "odd_neg_inf", "odd_plain"] {
                let card = Self.card(metric, in: dom) ?? ""
                let points = card.range(of: "data-points=\"").map { card[$0.upperBound...].prefix { $0 != "\"" } }.flatMap { Int($0) }
                #expect((points ?? 0) >= 1, "\(metric)'s chart has \(points ?? 0) points")
                #expect(card.contains("<polyline") == (metric == "odd_plain"), "\(metric)'s chart")
            }
            #expect(!dom.contains("NaN,") && !dom.contains(",NaN"), "a chart coordinate is NaN")
            #expect(dom.contains("class=\"live\">live, updated"))
        }
    }

    @Test(
        "a window that emptied shows - for its quantiles and max, not 0, and an SLO with no events in its window shows no data",
        .timeLimit(.minutes(5)))
    func quietWindow() throws {
        guard let chromium = try requiredSystemTool("chromium") else { return }
        try withBot("quiet-bot") { directory, bot in
            let latency = try bot.histogram("quote_latency", unit: .nanoseconds)
            for value in 1...100 { latency.record(UInt64(value) * 10_000) }
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms", "--slo", "quote_latency:p99<100us@1s"])
            defer { collector.kill() }
            // The values drained, then the second's window empty while the minute's holds them.
            let quiet = try eventually(seconds: 30) { () -> Bool? in
                let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
                let series = (latest["series"] as? [[String: Any]])?.first { $0["metric"] as? String == "quote_latency" }
                let windows = series?["windows"] as? [String: [String: Any]]
                let slo = (latest["slos"] as? [[String: Any]])?.first
                return windows?["1s"]?["count"] as? Int == 0 && windows?["1m"]?["count"] as? Int == 100 && slo?["violated"] is NSNull
                    ? true : nil
            }
            try #require(quiet == true, "/latest never showed the second's window empty and the SLO without data")
            let dom = try Self.renderedDOM(chromium, url: "http://127.0.0.1:\(port)/?window=1s")
            withExtendedLifetime(bot) {}
            let card = Self.card("quote_latency", in: dom) ?? ""
            for stat in ["p50", "p99", "p999", "max"] {
                #expect(card.contains("data-stat=\"\(stat)\" data-value=\"null\">-</b>"), "\(stat): \(card.prefix(600))")
            }
            #expect(card.contains("data-stat=\"count\" data-value=\"0\">0</b>"), "the count: \(card.prefix(600))")
            let row = try #require(dom.range(of: "data-slo=\"quote_latency:p99").map { dom[$0.lowerBound...].prefix { $0 != "\n" } })
            #expect(row.contains("<span class=\"badge no-data\">no data</span>"), "the SLO's row: \(row.prefix(600))")
            #expect(row.contains("<td class=\"num\">-</td>"), "its compliance: \(row.prefix(600))")
            #expect(!row.contains("NaN") && !row.contains(">met<"), "the SLO's row: \(row.prefix(600))")
        }
    }

    @Test(
        "a series whose producers handed it values it could not take, and an exemplar it refused, says so on its card",
        .timeLimit(.minutes(5)))
    func badValuesOnTheCard() throws {
        guard let chromium = try requiredSystemTool("chromium") else { return }
        try withBot("careless-bot") { directory, bot in
            let slippage = try bot.histogram("slippage_bps", resolution: 0.01, signed: true)
            slippage.record(-1.5)
            slippage.record(Double.nan)  // not recorded: counted
            slippage.record(3, exemplar: try Bot.Exemplar("order_id", "A17"))  // a signed histogram's: refused
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            let counted = try eventually(seconds: 30) { () -> Bool? in
                let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
                let series = (latest["series"] as? [[String: Any]])?.first { $0["metric"] as? String == "slippage_bps" }
                return series?["clamped_values"] as? Int == 1 && series?["exemplars_refused"] as? Int == 1 ? true : nil
            }
            try #require(counted == true, "/latest never counted the NaN and the refused exemplar")
            let dom = try Self.renderedDOM(chromium, url: "http://127.0.0.1:\(port)/")
            withExtendedLifetime(bot) {}
            let card = Self.card("slippage_bps", in: dom) ?? ""
            #expect(card.contains("data-clamped=\"1\" data-exemplars-refused=\"1\""), "\(card.prefix(800))")
            #expect(card.contains("1 bad values (clamped, rounded or not recorded), 1 exemplars refused"), "\(card.prefix(800))")
        }
    }
}
