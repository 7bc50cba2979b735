import RingsideCommandLine
import CRingside
import Ringside
import RingsideJSON
import RingsideText
import RingsideTrace

/// What the tools read in one look at a ring: its status, the most recent records in its lanes
/// (consumed or not: a collector drains as soon as a bot writes), and the registry read after
/// them (so every record's metric is in it).
struct RingContents {
    let status: RingStatus
    let records: [PeekedRecord]
    /// The registry by index; nil for an entry that does not decode.
    let metrics: [MetricDescriptor?]

    init(_ name: String, last: Int? = nil, _ context: DumpContext) throws(RingError) {
        try self.init(try context.inspector(name), last: last)
    }

    init(_ inspector: RingInspector, last: Int? = nil) throws(RingError) {
        status = try inspector.settledStatus()
        records = try inspector.settledPeek(last: last, includingConsumed: true)
        // After the peek: the producer publishes a metric before any record that names it.
        metrics = try inspector.registryEntries().map { try? $0.get() }
    }

    func metric(of record: RingRecord) -> MetricDescriptor? {
        Int(record.metric) < metrics.count ? metrics[Int(record.metric)] : nil
    }

    /// The records of the metrics named (every label set of each), or a message naming those
    /// the ring does not have.
    func records(ofMetricsNamed names: [String]) -> Result<[PeekedRecord], MissingMetric> {
        guard !names.isEmpty else { return .success(records) }
        let known = Set(metrics.compactMap { $0?.name })
        if let missing = names.first(where: { !known.contains($0) }) {
            return .failure(MissingMetric(ring: status.name, metric: missing, known: known.sorted()))
        }
        let wanted = Set(names)
        return .success(records.filter { metric(of: $0.record).map { wanted.contains($0.name) } ?? false })
    }
}

/// A `--metric` the ring does not have.
struct MissingMetric: Error, CustomStringConvertible {
    let ring: String
    let metric: String
    let known: [String]

    var description: String {
        "ring \(ring): no metric \"\(metric)\"; "
            + (known.isEmpty ? "it has none registered" : "its metrics: " + known.joined(separator: ", "))
    }
}

/// `ringside-dump records NAME`: the most recent records in the lanes, consumed or not, oldest
/// first, each with its lane and whether a consumer has passed it.
enum RecordsCommand {
    static func run(_ name: String, last: Int?, metrics names: [String], _ context: DumpContext) -> Int32 {
        let contents: RingContents
        // Without a metric filter only the last N are copied; with one, the filter comes first.
        do throws(RingError) { contents = try RingContents(name, last: names.isEmpty ? last : nil, context) } catch {
            return context.fail(error)
        }
        var selected: [PeekedRecord]
        switch contents.records(ofMetricsNamed: names) {
        case let .success(records): selected = records
        case let .failure(missing):
            context.console.printError("ringside-dump: \(missing)")
            return ExitStatus.failure
        }
        if let last, selected.count > last { selected = Array(selected.suffix(last)) }
        let status = contents.status
        let console = context.console

        if context.json {
            let items: [JSON] = selected.map { entry in
                let record = entry.record
                let metric = contents.metric(of: record)
                let kind = metric?.kind ?? MetricKind(rawValue: record.kind)
                let time = utcTimestamp(microseconds: true, realtimeNanos: status.realtimeNanos(ofMonotonic: record.timestamp_ns))
                let kindJSON: JSON = .string(kind.map(\.description) ?? "unknown(\(record.kind))")
                let metricJSON: JSON = metric.map { .string($0.name) } ?? .null
                let unitJSON: JSON = metric.map { .string($0.unit.description) } ?? .null
                let rawJSON: JSON? = context.raw ? .string(hexBytes(of: record)) : nil
                let isSpan = record.flags & UInt8(RS_FLAG_SPAN) != 0
                return .members([
                    ("lane", .uint(UInt64(entry.lane))), ("cursor", .uint(entry.cursor)), ("sequence", .uint(record.sequence)),
                    ("time", .string(time)), ("timestamp_ns", .uint(record.timestamp_ns)),
                    ("metric_index", .uint(UInt64(record.metric))), ("metric", metricJSON), ("consumed", .bool(entry.consumed)),
                    ("labels", metric?.labelsJSON ?? .null), ("kind", kindJSON), ("unit", unitJSON),
                    ("value", MetricValue(stored: record.value, of: metric, kind: kind).json), ("span", .bool(isSpan)),
                    ("weight", .uint(record.bucketWeight)), ("raw", rawJSON),
                ])
            }
            console.print(
                JSON.object([
                    ("ring", .string(name)), ("lanes", .uint(UInt64(status.lanes.count))),
                    ("written", .uint(status.writeCursor)), ("consumed", .uint(status.readCursor)),
                    ("count", .uint(UInt64(items.count))), ("records", .array(items)),
                ]).text)
            return ExitStatus.success
        }

        // Cursors count per lane, so the summary gives the lanes' sums, not a range of cursors.
        let sums = "written \(status.writeCursor), consumed \(status.readCursor), every lane's added up"
        guard !selected.isEmpty else {
            console.print(
                "ring \(name): no records" + (names.isEmpty ? "" : " of \(names.joined(separator: ", "))")
                    + " in its \(status.lanesText) (\(sums))")
            return ExitStatus.success
        }
        let lanesShown = Set(selected.map(\.lane)).count
        console.print(
            "ring \(name): \(selected.count) record\(selected.count == 1 ? "" : "s") from \(lanesShown) "
                + "of its \(status.lanesText) (\(sums))")
        var headers = ["LANE", "CURSOR", "TIME", "METRIC", "VALUE", "FLAGS", "READ"]
        if context.raw { headers.append("RAW") }
        var table = TextTable(headers, right: ["LANE", "CURSOR", "VALUE"])
        for entry in selected {
            let record = entry.record
            let metric = contents.metric(of: record)
            let kind = metric?.kind ?? MetricKind(rawValue: record.kind)
            var row = [
                "\(entry.lane)",
                "\(entry.cursor)",
                utcTimestamp(microseconds: true, realtimeNanos: status.realtimeNanos(ofMonotonic: record.timestamp_ns)),
                metric?.displayName ?? "#\(record.metric) (not registered)",
                MetricValue(stored: record.value, of: metric, kind: kind).text(unit: metric?.unit),
                flagsText(record),
                entry.consumed ? "consumed" : "waiting",
            ]
            if context.raw { row.append(hexBytes(of: record)) }
            table.add(row)
        }
        table.lines.forEach { console.print($0) }
        return ExitStatus.success
    }

    /// A record's flags for people: "span", and a sampled record's weight ("weight=16"); "-" for none.
    static func flagsText(_ record: RingRecord) -> String {
        var parts: [String] = []
        if record.flags & UInt8(RS_FLAG_SPAN) != 0 { parts.append("span") }
        if record.weightLog2 > 0 { parts.append("weight=\(record.bucketWeight)") }
        return parts.isEmpty ? "-" : parts.joined(separator: ",")
    }
}

// MARK: - Its command line

extension RecordsCommand: DumpCommand {
    static let name = "records"
    static var options: OptionSpec { OptionSpec(flags: ["--raw"], valued: ["--last", "--metric"], repeatable: ["--metric"]) }
    static let usage = """
        usage: ringside-dump records NAME [--last N] [--metric NAME]... [--json] [--raw]

        The records now in the ring's lanes, oldest first, each with its lane and cursor, metric
        name and wall-clock time (UTC). Counters write no records (see info for their totals).
        Never moves a consumer's cursor and never shows a torn record: safe while the producer
        writes and a collector drains.
          --last N        only the last N records (of the metric, with --metric)
          --metric NAME   only this metric's records (every label set); repeatable
          --raw           add each record's 32 bytes in hex
        """

    static func run(parsing arguments: DumpArguments, _ context: DumpContext) throws(UsageError) -> Int32 {
        let last = try arguments.count("--last", 0...Int(Int32.max))
        return run(try arguments.ring(), last: last, metrics: arguments.all("--metric"), context)
    }
}
