import Foundation
import Ringside
@testable import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

/// The `# TYPE` lines of a text page, as `family type`.
private func types(in page: String) -> Set<String> {
    Set(page.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.dropFirst(7)) })
}

@Suite("Prometheus names: a metric's unit appears once, in base units, whatever its registered name")
struct MetricNamingTests {
    /// A bot with a metric of every kind of name: unit-suffixed in each unit, plain, unitless,
    /// bytes, signed, fractional, and `_total` counters.
    private func everyKindOfName(_ directory: RingDirectory) throws -> Snapshot {
        let bot = try Bot.attach("names", directory: directory.path, options: .init(laneCapacity: 4096))
        let histograms = [
            try bot.histogram("data_freshness_seconds", unit: .seconds),
            try bot.histogram("order_submission_latency_us", unit: .microseconds, help: "Submit to ack"),
            try bot.histogram("book_update_ms", unit: .milliseconds),
            try bot.histogram("tick_to_trade_nanoseconds", unit: .nanoseconds),
            try bot.histogram("decode_ns", unit: .nanoseconds),
            try bot.histogram("order_fill_latency", unit: .nanoseconds),
            try bot.histogram("message_size_bytes", unit: .bytes),
            try bot.histogram("batch", unit: .bytes),
            try bot.histogram("book_depth"),
            // Unitless, though it ends in a unit's suffix: kept as registered.
            try bot.histogram("queue_seconds"),
        ]
        for histogram in histograms { for value in 1...50 { histogram.record(UInt64(value * 7)) } }
        let slippage = try bot.histogram("slippage_bps", resolution: 0.01, signed: true)
        for value in [-12.5, -0.25, 3.75, 40.0] { slippage.record(value) }
        try bot.counter("orders_total").increment(by: 3)
        try bot.counter("fills").increment(by: 2)
        try bot.counter("fees_usd_total", resolution: 0.01).increment(by: 1.25)
        try bot.gauge("quote_age_us", unit: .microseconds).set(150)
        try bot.gauge("position_bytes", unit: .bytes).set(4096)
        try bot.gauge("daily_pnl").set(-1250.5)
        return pass(try makeCollector(directory, captured: CapturedLog()))
    }

    @Test("each family name carries its unit once, counters end in _total once, and HELP says a conversion to seconds")
    func namesByConvention() throws {
        try withRingDirectory { directory in
            let page = String(decoding: PrometheusExporter.render(try everyKindOfName(directory)), as: UTF8.self)
            let families = types(in: page)
            for expected in [
                "data_freshness_seconds histogram", "data_freshness_windowed_seconds summary",
                "data_freshness_window_max_seconds gauge",
                "order_submission_latency_seconds histogram", "order_submission_latency_windowed_seconds summary",
                "book_update_seconds histogram", "tick_to_trade_seconds histogram", "decode_seconds histogram",
                "order_fill_latency_seconds histogram", "order_fill_latency_windowed_seconds summary",
                "message_size_bytes histogram", "message_size_windowed_bytes summary", "batch_bytes histogram",
                "book_depth histogram", "book_depth_windowed summary", "queue_seconds histogram", "queue_seconds_windowed summary",
                "slippage_bps histogram", "slippage_bps_windowed summary",
                "orders_total counter", "orders_rate gauge", "fills_total counter", "fees_usd_total counter",
                "quote_age_seconds gauge", "quote_age_window_min_seconds gauge", "position_bytes gauge",
                "position_window_max_bytes gauge", "daily_pnl gauge", "daily_pnl_window_min gauge",
            ] {
                #expect(families.contains(expected), "no family \(expected)")
            }
            // The names, not HELP (which says the registered name).
            let names = page.split(separator: "\n").filter { !$0.hasPrefix("# HELP ") }.joined(separator: "\n")
            for wrong in [
                "_seconds_seconds", "data_freshness_seconds_windowed", "_us_seconds", "_ms_seconds", "_ns_seconds", "_total_total",
                "_bytes_bytes",
            ] {
                #expect(!names.contains(wrong), "a unit twice: \(wrong)")
            }
            #expect(
                page.contains(
                    "# HELP order_submission_latency_seconds Submit to ack (recorded as order_submission_latency_us in us, exported in seconds)"
                ))
            #expect(page.contains("# HELP book_update_seconds book_update_ms (histogram, recorded in ms, exported in seconds)"))
            #expect(page.contains(#"order_submission_latency_seconds_bucket{ring="names",le="+Inf"} 50"#))
        }
    }

    @Test("promtool check metrics reports nothing on a page holding every kind of name")
    func promtoolFindsNoNamingProblem() throws {
        try withRingDirectory { directory in
            let page = String(decoding: PrometheusExporter.render(try everyKindOfName(directory)), as: UTF8.self)
            guard let check = try promtoolCheckMetrics(page) else { return }
            #expect(check.status == 0 && check.report.isEmpty, "promtool: \(check.report)")
        }
    }

    @Test("two metrics exporting one name (lat_us in us, lat in ns) make no broken page: the second is left out and counted")
    func collisionIsLeftOutAndCounted() throws {
        try withRingDirectory { directory in
            let bot = try Bot.attach("clash", directory: directory.path, options: .init(laneCapacity: 4096))
            try bot.histogram("lat_us", unit: .microseconds).record(5)
            try bot.histogram("lat", unit: .nanoseconds).record(5)
            let snapshot = pass(try makeCollector(directory, captured: CapturedLog()))
            let page = String(decoding: PrometheusExporter.render(snapshot), as: UTF8.self)
            let lines = page.split(separator: "\n").filter { $0.hasPrefix(#"lat_seconds_bucket{ring="clash",le="+Inf"}"#) }
            #expect(lines.count == 1, "one series of lat_seconds, not two: \(lines)")
            #expect(page.contains("ringside_collector_series_conflicts 1\n"))
            #expect(page.components(separatedBy: "# TYPE lat_seconds histogram").count == 2)
            if let check = try promtoolCheckMetrics(page) {
                #expect(check.status == 0 && check.report.isEmpty, "promtool: \(check.report)")
            }
            // The same page as OpenMetrics and protobuf: one family, the other metric counted.
            let open = String(decoding: PrometheusRenderer().render(snapshot, format: .openMetrics), as: UTF8.self)
            #expect(open.components(separatedBy: "# TYPE lat_seconds histogram").count == 2)
        }
    }

}
