import Foundation
import Ringside
import RingsideTestSupport
import Testing

@Suite("CONTROL through the collector: the operator's switches exported and logged")
struct ControlCollectorTests {
    @Test("ringside-dump control's switches show in /metrics (ringside_metric_sample_every, ringside_metric_enabled), /latest and the log")
    func switchesAreExportedAndLogged() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "10ms"])
            defer { collector.kill() }
            let bot = try Bot.attach("cc", directory: directory.path)
            let fill = try bot.histogram("fill_ns", unit: .nanoseconds, sampleEvery: 2)
            let orders = try bot.counter("orders")
            fill.record(1)
            orders.increment()
            func line(_ family: String, _ metric: String) throws -> String? {
                try httpGet(port: port, path: "/metrics").body.split(separator: "\n")
                    .first { $0.hasPrefix("\(family){ring=\"cc\",metric=\"\(metric)\",labels=\"\"} ") }.map(String.init)
            }
            func control(_ arguments: [String]) throws {
                let run = try runProcess("ringside-dump", ["--dir", directory.path, "control", "cc"] + arguments)
                try #require(run.status == 0, "\(run.errors)")
            }
            #expect(try eventually(seconds: 20) { try line("ringside_metric_sample_every", "fill_ns")?.hasSuffix(" 2") == true })
            try control(["--metric", "fill_ns", "--sample-every", "100"])
            // The registered 1 in 2, times the operator's 1 in 128.
            #expect(try eventually(seconds: 20) { try line("ringside_metric_sample_every", "fill_ns")?.hasSuffix(" 256") == true })
            #expect(collector.waitForErrorLine(containing: "series fill_ns: recording, 1 call in 128 written") != nil)
            try control(["--metric", "orders", "--off"])
            #expect(try eventually(seconds: 20) { try line("ringside_metric_enabled", "orders")?.hasSuffix(" 0") == true })
            #expect(collector.waitForErrorLine(containing: "series orders: off (switched off)") != nil)
            #expect(try line("ringside_metric_enabled", "fill_ns")?.hasSuffix(" 1") == true, "sampled by the operator, recording")
            #expect(try line("ringside_metric_enabled", "never_switched") == nil, "a series as registered has no line")
            let latest = try jsonObject(try httpGet(port: port, path: "/latest").body)
            let series = try #require(latest["series"] as? [[String: Any]])
            let fillSeries = try #require(series.first { $0["metric"] as? String == "fill_ns" })
            #expect(fillSeries["control_sample_every"] as? Int == 128 && fillSeries["enabled"] as? Bool == true)
            #expect(series.first { $0["metric"] as? String == "orders" }?["enabled"] as? Bool == false)
            try control(["--bot-off"])
            #expect(try eventually(seconds: 20) { try line("ringside_metric_enabled", "fill_ns")?.hasSuffix(" 0") == true })
            #expect(collector.waitForErrorLine(containing: "series fill_ns: off (the bot is switched off)") != nil)
        }
    }
}
