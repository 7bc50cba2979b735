import Foundation
import Ringside
@testable import RingsideCollector
@testable import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

/// A series that had values, then a window with none (a symbol that stopped trading): its
/// quantiles and maximum are no data in every format, never the 0 that reads as the tail
/// dropping to nothing, while its count, sum and rate are 0 (a count of nothing).
@Suite("A quiet window is no data: NaN on /metrics in every format, null on /latest, never 0")
struct QuietWindowTests {
    static let labels = #"ring="quiet",symbol="AAPL""#
    static let signedLabels = #"ring="quiet""#

    /// A collector's snapshot while its bot records (`busy`), and one 2 s later, when the 1 s window
    /// holds nothing and the 1 m window still holds every value (`quiet`).
    static func snapshots(_ directory: RingDirectory) throws -> (busy: Snapshot, quiet: Snapshot) {
        let bot = try Bot.attach("quiet", directory: directory.path, options: .init(laneCapacity: 4096))
        let latency = try bot.histogram("quote_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
        let slippage = try bot.histogram("slippage_bps", signed: true)
        let fills = try bot.counter("fills")
        for value in 1...100 { latency.record(UInt64(value) * 10_000) }
        for value in -50...49 { slippage.record(Int64(value)) }
        fills.increment(by: 3)
        let collector = try makeCollector(directory, slo: ["quote_latency:p99<100us@1s"], captured: CapturedLog())
        let busy = pass(collector)
        let quiet = pass(collector, offset: 2_000_000_000)
        return (busy, quiet)
    }

    /// The samples of a text page (Prometheus or OpenMetrics), each sample's name and labels as
    /// written (`name{a="b"}`) to its value as written; an exemplar after the value is left out.
    static func samples(_ page: [UInt8]) -> [String: String] {
        var samples: [String: String] = [:]
        for line in String(decoding: page, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
            let brace = line.range(of: "} ").map { line.index(after: $0.lowerBound) }
            let end = brace ?? line.firstIndex(of: " ") ?? line.endIndex
            let value = line[end...].split(separator: " ").first.map(String.init) ?? ""
            samples[String(line[..<end])] = value
        }
        return samples
    }

    @Test(
        "text and OpenMetrics: the empty window's quantiles and maximum read NaN, its count, sum and rate 0; the minute's are figures",
        arguments: [ExpositionFormat.text, .openMetrics])
    func textPages(format: ExpositionFormat) throws {
        try withRingDirectory { directory in
            let (busy, quiet) = try Self.snapshots(directory)
            let quantiles = quiet.quantiles.map(\.formatted6)
            let before = Self.samples(PrometheusRenderer().render(busy, format: format))
            let after = Self.samples(PrometheusRenderer().render(quiet, format: format))
            let labels = Self.labels
            for quantile in quantiles {
                // While it records, a figure; once quiet, NaN in the second and still a figure over the minute.
                let second = "quote_latency_windowed_seconds{\(labels),window=\"1s\",quantile=\"\(quantile)\"}"
                let minute = "quote_latency_windowed_seconds{\(labels),window=\"1m\",quantile=\"\(quantile)\"}"
                #expect(before[second].flatMap(Double.init).map { $0 > 0 } == true, "\(second) while busy: \(before[second] ?? "none")")
                #expect(after[second] == "NaN", "\(second): \(after[second] ?? "none")")
                #expect(after[minute].flatMap(Double.init).map { $0 > 0 && $0.isFinite } == true, "\(minute): \(after[minute] ?? "none")")
                let signed = "slippage_bps_windowed{\(Self.signedLabels),window=\"1s\",quantile=\"\(quantile)\"}"
                #expect(after[signed] == "NaN", "\(signed): \(after[signed] ?? "none")")
            }
            let max = "quote_latency_window_max_seconds{\(labels),window=\"1s\"}"
            #expect(before[max] == "0.001" && after[max] == "NaN", "\(max): \(before[max] ?? "none"), then \(after[max] ?? "none")")
            #expect(after["slippage_bps_window_max{\(Self.signedLabels),window=\"1s\"}"] == "NaN")
            #expect(after["quote_latency_windowed_seconds_count{\(labels),window=\"1s\"}"] == "0")
            #expect(after["quote_latency_windowed_seconds_sum{\(labels),window=\"1s\"}"] == "0")
            #expect(after["quote_latency_windowed_seconds_count{\(labels),window=\"1m\"}"] == "100")
            #expect(after["slippage_bps_windowed_count{\(Self.signedLabels),window=\"1s\"}"] == "0")
            #expect(after["fills_rate{ring=\"quiet\",window=\"1s\"}"] == "0")
            // The all-time histogram keeps every value.
            #expect(after["quote_latency_seconds_count{\(labels)}"] == "100")
            #expect(after["quote_latency_seconds_bucket{\(labels),le=\"+Inf\"}"] == "100")
            // Its SLO has nothing to judge: neither met (0) nor broken (1).
            let slo = #"{slo="quote_latency:p99<100us@1s",severity="P1"}"#
            #expect(before["ringside_slo_violated\(slo)"] == "1" && after["ringside_slo_violated\(slo)"] == "NaN")
            #expect(after["ringside_slo_compliance_ratio\(slo)"] == "NaN" && after["ringside_slo_window_events\(slo)"] == "0")
            // No sample of the empty window reads 0 but its count, sum and rate.
            let zeros = after.filter { $0.key.contains("window=\"1s\"") && $0.value == "0" }.keys
            #expect(
                zeros.allSatisfy { $0.contains("_count{") || $0.contains("_sum{") || $0.hasPrefix("fills_rate{") },
                "\(zeros.sorted())")
        }
    }

    @Test("protobuf: the empty window's summary quantiles and maximum decode to NaN, its count and sum to 0")
    func protobufPage() throws {
        try withRingDirectory { directory in
            let quiet = try Self.snapshots(directory).quiet
            let families = try decodePage(PrometheusRenderer().render(quiet, format: .protobuf))
            let windowed = try #require(families["quote_latency_windowed_seconds"])
            #expect(windowed.type == 2, "a summary")
            let second = try #require(windowed.metrics.first { $0.labels.contains(["window", "1s"]) })
            let minute = try #require(windowed.metrics.first { $0.labels.contains(["window", "1m"]) })
            #expect(second.count == 0 && second.sum == 0)
            #expect(second.quantiles.count == quiet.quantiles.count, "\(second.quantiles)")
            #expect(second.quantiles.allSatisfy { $0.value.isNaN }, "\(second.quantiles)")
            #expect(minute.count == 100 && minute.quantiles.allSatisfy { $0.value > 0 && $0.value.isFinite }, "\(minute.quantiles)")
            let max = try #require(families["quote_latency_window_max_seconds"])
            #expect(max.metrics.first { $0.labels.contains(["window", "1s"]) }?.value?.isNaN == true)
            #expect(max.metrics.first { $0.labels.contains(["window", "1m"]) }?.value == 0.001)
            let rate = try #require(families["fills_rate"])
            #expect(rate.metrics.first { $0.labels.contains(["window", "1s"]) }?.value == 0)
        }
    }

    @Test("/latest: the empty window's min, max, mean and quantiles are null, its count and sum 0; the minute's are figures")
    func latest() throws {
        try withRingDirectory { directory in
            let quiet = try Self.snapshots(directory).quiet
            let latest = try jsonObject(String(decoding: JSONExporter.latest(quiet), as: UTF8.self))
            let series = try #require((latest["series"] as? [[String: Any]])?.first { $0["metric"] as? String == "quote_latency" })
            let windows = try #require(series["windows"] as? [String: [String: Any]])
            let second = try #require(windows["1s"])
            let minute = try #require(windows["1m"])
            let figures = ["min", "max", "mean", "p50", "p90", "p95", "p99", "p999"]
            for key in figures {
                #expect(second[key] is NSNull, "1s \(key): \(second[key] ?? "absent")")
                #expect((minute[key] as? Double).map { $0 > 0 } == true, "1m \(key): \(minute[key] ?? "absent")")
            }
            #expect(second["count"] as? Int == 0 && second["sum"] as? Double == 0)
            #expect(minute["count"] as? Int == 100 && minute["max"] as? Int == 1_000_000)
        }
    }

    @Test("promtool check metrics reports nothing on a page with empty windows")
    func promtoolAcceptsNaN() throws {
        try withRingDirectory { directory in
            let quiet = try Self.snapshots(directory).quiet
            let page = String(decoding: PrometheusRenderer().render(quiet), as: UTF8.self)
            #expect(page.contains("window=\"1s\",quantile=\"0.99\"} NaN\n"))
            guard let check = try promtoolCheckMetrics(page) else { return }
            #expect(check.status == 0 && check.report.isEmpty, "promtool: \(check.report)")
        }
    }
}

/// A metric of the protobuf page: its labels as [name, value], a gauge's value, a summary's figures.
struct QuietMetric {
    var labels: [[String]] = []
    var value: Double?
    var count: UInt64 = 0, sum = 0.0
    var quantiles: [(quantile: Double, value: Double)] = []
}

/// The delimited `MetricFamily` stream by family name (metrics.proto: name 1, type 3, metric 4;
/// `Metric`: label 1, gauge 2, summary 4 with sample_count 1, sample_sum 2, quantile 3).
func decodePage(_ page: [UInt8]) throws -> [String: (type: UInt64, metrics: [QuietMetric])] {
    var stream = ProtobufReader(bytes: page)
    var families: [String: (type: UInt64, metrics: [QuietMetric])] = [:]
    while !stream.atEnd {
        let length = Int(try stream.varint())
        var reader = ProtobufReader(bytes: Array(page[stream.position..<stream.position + length]))
        stream.position += length
        var (name, type, metrics) = ("", UInt64(0), [QuietMetric]())
        while !reader.atEnd {
            let field = try reader.field()
            switch field.number {
            case 1: name = String(decoding: field.bytes, as: UTF8.self)
            case 3: type = field.varint
            case 4: metrics.append(try decodeQuietMetric(field.bytes))
            default: break
            }
        }
        families[name] = (type, metrics)
    }
    return families
}

private func decodeQuietMetric(_ bytes: [UInt8]) throws -> QuietMetric {
    var reader = ProtobufReader(bytes: bytes)
    var metric = QuietMetric()
    while !reader.atEnd {
        let field = try reader.field()
        var inner = ProtobufReader(bytes: field.bytes)
        switch field.number {
        case 1:
            var pair: [String] = []
            while !inner.atEnd { pair.append(String(decoding: try inner.field().bytes, as: UTF8.self)) }
            metric.labels.append(pair)
        case 2:
            while !inner.atEnd {
                let part = try inner.field()
                if part.number == 1 { metric.value = Double(bitPattern: part.fixed) }
            }
        case 4:
            while !inner.atEnd {
                let part = try inner.field()
                switch part.number {
                case 1: metric.count = part.varint
                case 2: metric.sum = Double(bitPattern: part.fixed)
                case 3:
                    var pair = ProtobufReader(bytes: part.bytes)
                    var quantile = (quantile: 0.0, value: 0.0)
                    while !pair.atEnd {
                        let entry = try pair.field()
                        if entry.number == 1 { quantile.quantile = Double(bitPattern: entry.fixed) }
                        if entry.number == 2 { quantile.value = Double(bitPattern: entry.fixed) }
                    }
                    metric.quantiles.append(quantile)
                default: break
                }
            }
        default: break
        }
    }
    return metric
}
