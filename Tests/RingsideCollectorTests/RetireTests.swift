import Foundation
import Ringside
import RingsideTestSupport
import Testing

/// A Swift bot retires a series as prometheus_client's `remove()` does, through the real collector.
@Suite("Retiring a series from Swift: gone from the pages, back when registered again")
struct RetireTests {
    @Test("a retired counter leaves /metrics and /latest; registered again, it is back from zero")
    func retireAndRevive() throws {
        try withBot("delisting") { directory, bot in
            let kept = try bot.counter("orders", labels: ["symbol": "MSFT"])
            var delisted = try bot.counter("orders", labels: ["symbol": "AAPL"])
            kept.increment(by: 2)
            delisted.increment(by: 5)
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            let aapl = #"orders_total{ring="delisting",symbol="AAPL"}"#
            let msft = #"orders_total{ring="delisting",symbol="MSFT"}"#
            let shown = try eventually(seconds: 30) { () -> Bool? in
                let page = try httpGet(port: port, path: "/metrics").body
                return page.contains(aapl + " 5") && page.contains(msft + " 2") ? true : nil
            }
            try #require(shown == true, "both series never showed")
            delisted.retire()
            let gone = try eventually(seconds: 30) { () -> Bool? in
                let page = try httpGet(port: port, path: "/metrics").body
                let latest = try httpGet(port: port, path: "/latest").body
                return !page.contains(aapl) && page.contains(msft + " 2") && !latest.contains("\"AAPL\"") ? true : nil
            }
            #expect(gone == true, "the retired series stayed on /metrics or /latest")
            delisted = try bot.counter("orders", labels: ["symbol": "AAPL"])
            delisted.increment()
            let back = try eventually(seconds: 30) { () -> Bool? in
                try httpGet(port: port, path: "/metrics").body.contains(aapl + " 1") ? true : nil
            }
            #expect(back == true, "the revived series did not come back from zero")
        }
    }
}
