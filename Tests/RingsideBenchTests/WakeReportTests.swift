import Foundation
import Testing
@testable import RingsideBench
import RingsideJSON

@Suite("ringside-bench wake's report")
struct WakeReportTests {
    static let report = WakeReport(
        machine: ReportTests.machine, method: "a method",
        wakes: [
            WakeReport.WakeRow(
                name: "wake.doorbell",
                tries: (1...100).map { WakeReport.Try(drainedNanos: UInt64($0) * 1_000, latestNanos: UInt64($0) * 1_000_000) })
        ],
        idle: [
            WakeReport.IdleRow(
                name: "idle.2000bots.doorbell", bots: 2_000, seconds: 10, threads: [("ringside-drain", 0.5), ("ringside-bell", 0.125)])
        ],
        starts: [
            WakeReport.StartRow(
                name: "start.poll", starts: [WakeReport.Start(records: 5_000, dropped: 0), WakeReport.Start(records: 5_000, dropped: 700)])
        ])

    @Test("--json: one object, a result for each measure, with its percentiles, CPU by thread and drops")
    func json() throws {
        let text = Self.report.json.text
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(object["benchmark"] as? String == "wake")
        let results = try #require(object["results"] as? [[String: Any]])
        #expect(
            results.map { $0["name"] as? String } == [
                "wake.doorbell.drained", "wake.doorbell.latest", "idle.2000bots.doorbell", "start.poll",
            ])
        #expect(results[0]["p50_us"] as? Double == 50 && results[0]["p99_us"] as? Double == 99 && results[0]["max_us"] as? Double == 100)
        #expect(results[1]["p90_us"] as? Double == 90_000)
        #expect(results[2]["percent"] as? Double == 0.625)
        #expect((results[2]["threads"] as? [String: Any])?["ringside-bell"] as? Double == 0.125)
        #expect(
            results[3]["dropped"] as? Int == 700 && results[3]["starts_dropping"] as? Int == 1 && results[3]["most_dropped"] as? Int == 700)
    }

    @Test("the table has a line for each measure")
    func table() {
        let table = Self.report.table
        #expect(table.contains("wake.doorbell.drained") && table.contains("p50 50.0 µs, p99 99.0 µs"))
        #expect(table.contains("0.625 % of a core") && table.contains("ringside-drain 0.5"))
        #expect(table.contains("700 of 10000 dropped") && table.contains("1 of 2 starts dropped, at most 700 in one"))
    }
}
