import RingsideCommandLine
import Ringside
import RingsideJSON
import RingsideText
import RingsideTrace

/// Exact statistics of one metric: over its most recent records in the lanes (consumed or not),
/// and from its cells.
struct MetricStatistics {
    let metric: MetricDescriptor
    /// Records of the metric in the lanes, consumed or not.
    let count: Int
    /// Histograms: the calls the records stand for, each record's weight added up (SAMPLING in
    /// ringside.h; before the metric's own `sample_every`).
    let calls: UInt64
    /// Histograms: the values sorted, for exact percentiles.
    let sorted: [UInt64]
    /// Histograms: each sorted value's weight added to those before it (percentiles by weight).
    private let cumulativeWeights: [UInt64]
    /// Gauges: the extremes of the records (NaN left out).
    let minimum: Double?
    let maximum: Double?
    /// The cells: a counter's total (counters write no records), a gauge's last value, and the
    /// records a histogram or gauge dropped. Exact, whatever the lanes held or a collector drained.
    let cells: MetricCells

    /// - Parameter weights: each value's record's weight (1 when nil or short).
    init(metric: MetricDescriptor, values: [UInt64], weights: [UInt64]? = nil, cells: MetricCells = MetricCells()) {
        self.metric = metric
        self.cells = cells
        count = values.count
        let weighted = values.enumerated().map { index, value in
            (value: value, weight: weights.map { index < $0.count ? $0[index] : 1 } ?? 1)
        }
        let byValue = metric.kind == .histogram ? weighted.sorted { $0.value < $1.value } : []
        sorted = byValue.map(\.value)
        var total: UInt64 = 0
        cumulativeWeights = byValue.map { entry in
            total &+= entry.weight
            return total
        }
        calls = metric.kind == .histogram ? total : 0
        let doubles = metric.kind == .gauge ? values.map { Double(bitPattern: $0) }.filter { !$0.isNaN } : []
        minimum = doubles.min()
        maximum = doubles.max()
    }

    /// A counter's total.
    var total: UInt64 { cells.total }
    /// A gauge's last value set, from its cell: the records may have been drained or dropped.
    var last: Double? { cells.lastValue }

    /// The nearest-rank percentile by weight: the smallest value with at least `q` of the calls (the
    /// records' weights) at or below it; without weighted records, of the values.
    func percentile(_ q: Double) -> UInt64? {
        guard !sorted.isEmpty, let total = cumulativeWeights.last else { return nil }
        let rank = max(1, UInt64((q * Double(total)).rounded(.up)))
        return sorted[cumulativeWeights.firstIndex { $0 >= rank } ?? sorted.count - 1]
    }

    static let percentiles: [(label: String, key: String, q: Double)] = [
        ("P50", "p50", 0.5), ("P90", "p90", 0.9), ("P99", "p99", 0.99), ("P99.9", "p999", 0.999),
    ]
}

/// `ringside-dump stats NAME`: percentiles per metric over the most recent records in the lanes
/// (consumed or not), and counters' totals from the cells.
enum StatsCommand {
    static func run(_ name: String, metrics names: [String], _ context: DumpContext) -> Int32 {
        let contents: RingContents
        var cells: [UInt32: MetricCells] = [:]
        do throws(RingError) {
            let inspector = try context.inspector(name)
            contents = try RingContents(inspector)
            for case let metric? in contents.metrics { cells[metric.index] = try inspector.cells(of: metric) }
        } catch {
            return context.fail(error)
        }
        let records: [PeekedRecord]
        switch contents.records(ofMetricsNamed: names) {
        case let .success(selected): records = selected
        case let .failure(missing):
            context.console.printError("ringside-dump: \(missing)")
            return ExitStatus.failure
        }
        var valuesByMetric: [UInt32: [UInt64]] = [:]
        var weightsByMetric: [UInt32: [UInt64]] = [:]
        var unregistered = 0
        for entry in records {
            if contents.metric(of: entry.record) == nil {
                unregistered += 1
                continue
            }
            valuesByMetric[entry.record.metric, default: []].append(entry.record.value)
            weightsByMetric[entry.record.metric, default: []].append(entry.record.bucketWeight)
        }
        let statistics = contents.metrics.compactMap { $0 }
            .filter { names.isEmpty || names.contains($0.name) }
            .map { metric in
                MetricStatistics(
                    metric: metric, values: valuesByMetric[metric.index] ?? [], weights: weightsByMetric[metric.index],
                    cells: cells[metric.index] ?? MetricCells())
            }
        let console = context.console
        let consumed = records.count { $0.consumed }
        if context.json {
            console.print(
                JSON.object([
                    ("ring", .string(name)), ("lanes", .uint(UInt64(contents.status.lanes.count))),
                    ("records", .uint(UInt64(records.count))), ("consumed", .uint(UInt64(consumed))),
                    ("unregistered_records", .uint(UInt64(unregistered))), ("metrics", .array(statistics.map(json))),
                ]).text)
            return ExitStatus.success
        }
        console.print(
            "ring \(name): \(records.count) record\(records.count == 1 ? "" : "s") in its \(contents.status.lanesText), "
                + "\(consumed) of them consumed")
        for table in tables(of: statistics) {
            console.print()
            table.lines.forEach { console.print($0) }
        }
        if unregistered > 0 { console.print("\n\(unregistered) records name a metric that is not registered (see ringside-dump check)") }
        return ExitStatus.success
    }

    /// One metric's figures, as `--json` writes them.
    static func json(_ stats: MetricStatistics) -> JSON {
        var members: [(String, JSON?)] = [
            ("index", .uint(UInt64(stats.metric.index))), ("name", .string(stats.metric.name)),
            ("labels", stats.metric.labelsJSON), ("kind", .string(stats.metric.kind.description)),
            ("unit", .string(stats.metric.unit.description)), ("sample_every", .uint(UInt64(stats.metric.sampleEvery))),
            ("count", .uint(UInt64(stats.count))),
        ]
        switch stats.metric.kind {
        case .histogram:
            members.append(("calls", .uint(stats.calls)))
            let value = { (bits: UInt64) in stats.metric.value(ofStored: bits).json }
            members.append(("min", stats.sorted.first.map(value) ?? .null))
            for percentile in MetricStatistics.percentiles {
                members.append((percentile.key, stats.percentile(percentile.q).map(value) ?? .null))
            }
            members += [("max", stats.sorted.last.map(value) ?? .null), ("dropped", .uint(stats.cells.dropped))]
        case .counter:
            members.append(("total", stats.metric.value(ofStored: stats.total).json))
        case .gauge:
            members += [
                ("last", stats.last.map(JSON.double) ?? .null), ("min", stats.minimum.map(JSON.double) ?? .null),
                ("max", stats.maximum.map(JSON.double) ?? .null), ("dropped", .uint(stats.cells.dropped)),
            ]
        }
        return .members(members)
    }

    /// The metrics' figures as a person reads them: a table for each kind that has any.
    static func tables(of statistics: [MetricStatistics]) -> [TextTable] {
        let byKind = Dictionary(grouping: statistics, by: \.metric.kind)
        func none(_ value: String?) -> String { value ?? "-" }
        var tables: [TextTable] = []
        if let histograms = byKind[.histogram] {
            var table = TextTable(
                ["HISTOGRAM", "UNIT", "SAMPLING", "COUNT", "MIN"] + MetricStatistics.percentiles.map(\.label)
                    + ["MAX", "DROPPED"],
                right: Set(["COUNT", "MIN", "MAX", "DROPPED"] + MetricStatistics.percentiles.map(\.label)))
            for stats in histograms {
                // Sorted as stored: a signed histogram's offset binary sorts as its values do.
                let value = { (bits: UInt64) in stats.metric.value(ofStored: bits).text }
                table.add(
                    [
                        stats.metric.displayName, stats.metric.unit.description, stats.metric.samplingText, "\(stats.count)",
                        none(stats.sorted.first.map(value)),
                    ]
                        + MetricStatistics.percentiles.map { none(stats.percentile($0.q).map(value)) }
                        + [none(stats.sorted.last.map(value)), "\(stats.cells.dropped)"])
            }
            tables.append(table)
        }
        if let counters = byKind[.counter] {
            // From the cells: every increment ever made, on every thread.
            var table = TextTable(["COUNTER", "TOTAL"], right: ["TOTAL"])
            for stats in counters { table.add([stats.metric.displayName, stats.metric.value(ofStored: stats.total).text]) }
            tables.append(table)
        }
        if let gauges = byKind[.gauge] {
            var table = TextTable(
                ["GAUGE", "UNIT", "RECORDS", "LAST", "MIN", "MAX", "DROPPED"],
                right: ["RECORDS", "LAST", "MIN", "MAX", "DROPPED"])
            for stats in gauges {
                table.add([
                    stats.metric.displayName, stats.metric.unit.description, "\(stats.count)",
                    none(stats.last.map { "\($0)" }), none(stats.minimum.map { "\($0)" }), none(stats.maximum.map { "\($0)" }),
                    "\(stats.cells.dropped)",
                ])
            }
            tables.append(table)
        }
        return tables
    }
}

// MARK: - Its command line

extension StatsCommand: DumpCommand {
    static let name = "stats"
    static var options: OptionSpec { OptionSpec(valued: ["--metric"], repeatable: ["--metric"]) }
    static let usage = """
        usage: ringside-dump stats NAME [--metric NAME]... [--json]

        Quick statistics per metric: histograms' count, min, p50, p90, p99, p99.9 and max over the
        records now in the lanes (exact, nearest rank); gauges' min and max over those records and
        their last value; counters' total (exact, from the cells: counters write no records); and
        the records each histogram and gauge dropped.
        """

    static func run(parsing arguments: DumpArguments, _ context: DumpContext) throws(UsageError) -> Int32 {
        run(try arguments.ring(), metrics: arguments.all("--metric"), context)
    }
}
