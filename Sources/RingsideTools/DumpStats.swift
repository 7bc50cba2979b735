import Ringside
import RingsideJSON

/// Exact statistics of one metric's records now in the ring.
struct MetricStatistics {
    let metric: MetricDescriptor
    let count: Int
    /// Histograms: the values sorted, for exact percentiles.
    let sorted: [UInt64]
    /// Counters: the sum of the increments (saturating: a corrupt ring may hold anything).
    let sum: UInt64
    /// Gauges: the last value set and the extremes (NaN left out).
    let last: Double?
    let minimum: Double?
    let maximum: Double?

    init(metric: MetricDescriptor, values: [UInt64]) {
        self.metric = metric
        count = values.count
        sorted = metric.kind == .histogram ? values.sorted() : []
        var total: UInt64 = 0
        if metric.kind == .counter {
            for value in values {
                let (added, overflow) = total.addingReportingOverflow(value)
                total = overflow ? .max : added
            }
        }
        sum = total
        let doubles = metric.kind == .gauge ? values.map { Double(bitPattern: $0) } : []
        last = doubles.last
        minimum = doubles.filter { !$0.isNaN }.min()
        maximum = doubles.filter { !$0.isNaN }.max()
    }

    /// The nearest-rank percentile: the smallest value with at least `q` of the values at or below it.
    func percentile(_ q: Double) -> UInt64? {
        guard !sorted.isEmpty else { return nil }
        let rank = Int((q * Double(sorted.count)).rounded(.up))
        return sorted[min(sorted.count - 1, max(0, rank - 1))]
    }

    static let percentiles: [(label: String, key: String, q: Double)] = [
        ("P50", "p50", 0.5), ("P90", "p90", 0.9), ("P99", "p99", 0.99), ("P99.9", "p999", 0.999),
    ]
}

/// `ringside-dump stats NAME`: quick percentiles per metric over the records now in the ring.
enum StatsCommand {
    static func run(_ name: String, metrics names: [String], _ context: DumpContext) -> Int32 {
        let contents: RingContents
        do throws(RingError) { contents = try RingContents(name, context) } catch { return context.fail(error) }
        let records: [(cursor: UInt64, record: RingRecord)]
        switch contents.records(ofMetricsNamed: names) {
        case let .success(selected): records = selected
        case let .failure(missing):
            context.console.printError("ringside-dump: \(missing)")
            return ExitStatus.failure
        }
        var valuesByMetric: [UInt32: [UInt64]] = [:]
        var unregistered = 0
        for entry in records {
            if contents.metric(of: entry.record) == nil { unregistered += 1; continue }
            valuesByMetric[entry.record.metric, default: []].append(entry.record.value)
        }
        let statistics = contents.metrics.compactMap { $0 }
            .filter { names.isEmpty || names.contains($0.name) }
            .map { MetricStatistics(metric: $0, values: valuesByMetric[$0.index] ?? []) }
        let console = context.console

        if context.json {
            let items: [JSON] = statistics.map { stats in
                var members: [(String, JSON?)] = [
                    ("index", .uint(UInt64(stats.metric.index))), ("name", .string(stats.metric.name)),
                    ("labels", stats.metric.labelsJSON), ("kind", .string(stats.metric.kind.description)),
                    ("unit", .string(stats.metric.unit.description)), ("sample_every", .uint(UInt64(stats.metric.sampleEvery))),
                    ("count", .uint(UInt64(stats.count))),
                ]
                switch stats.metric.kind {
                case .histogram:
                    members.append(("min", stats.sorted.first.map(JSON.uint) ?? .null))
                    for percentile in MetricStatistics.percentiles {
                        members.append((percentile.key, stats.percentile(percentile.q).map(JSON.uint) ?? .null))
                    }
                    members.append(("max", stats.sorted.last.map(JSON.uint) ?? .null))
                case .counter:
                    members.append(("sum", .uint(stats.sum)))
                case .gauge:
                    members += [("last", stats.last.map(JSON.double) ?? .null), ("min", stats.minimum.map(JSON.double) ?? .null),
                                ("max", stats.maximum.map(JSON.double) ?? .null)]
                }
                return .members(members)
            }
            console.print(JSON.object([
                ("ring", .string(name)), ("records", .uint(UInt64(records.count))),
                ("unregistered_records", .uint(UInt64(unregistered))), ("metrics", .array(items)),
            ]).text)
            return ExitStatus.success
        }

        let span = records.first.map { first in " (cursors \(first.cursor) to \(records.last!.cursor))" } ?? ""
        console.print("ring \(name): \(records.count) record\(records.count == 1 ? "" : "s") in the ring\(span)")
        let byKind = Dictionary(grouping: statistics, by: \.metric.kind)
        func none(_ value: String?) -> String { value ?? "-" }
        if let histograms = byKind[.histogram] {
            var table = TextTable(["HISTOGRAM", "UNIT", "SAMPLING", "COUNT", "MIN"] + MetricStatistics.percentiles.map(\.label) + ["MAX"],
                                  right: Set(["COUNT", "MIN", "MAX"] + MetricStatistics.percentiles.map(\.label)))
            for stats in histograms {
                table.add([stats.metric.displayName, stats.metric.unit.description, stats.metric.samplingText, "\(stats.count)",
                           none(stats.sorted.first.map { "\($0)" })]
                          + MetricStatistics.percentiles.map { none(stats.percentile($0.q).map { "\($0)" }) }
                          + [none(stats.sorted.last.map { "\($0)" })])
            }
            console.print()
            table.lines.forEach { console.print($0) }
        }
        if let counters = byKind[.counter] {
            var table = TextTable(["COUNTER", "SAMPLING", "RECORDS", "SUM"], right: ["RECORDS", "SUM"])
            for stats in counters {
                table.add([stats.metric.displayName, stats.metric.samplingText, "\(stats.count)", "\(stats.sum)"])
            }
            console.print()
            table.lines.forEach { console.print($0) }
        }
        if let gauges = byKind[.gauge] {
            var table = TextTable(["GAUGE", "UNIT", "RECORDS", "LAST", "MIN", "MAX"], right: ["RECORDS", "LAST", "MIN", "MAX"])
            for stats in gauges {
                table.add([stats.metric.displayName, stats.metric.unit.description, "\(stats.count)",
                           none(stats.last.map { "\($0)" }), none(stats.minimum.map { "\($0)" }), none(stats.maximum.map { "\($0)" })])
            }
            console.print()
            table.lines.forEach { console.print($0) }
        }
        if unregistered > 0 { console.print("\n\(unregistered) records name a metric that is not registered (see ringside-dump check)") }
        return ExitStatus.success
    }
}
