import CRingside
import Ringside
import RingsideCommandLine
import RingsideJSON
import RingsideText

/// `ringside-dump info NAME`: the whole header, the lanes, and the metric registry with each
/// metric's cells.
enum InfoCommand {
    static func run(_ name: String, _ context: DumpContext) -> Int32 {
        let inspector: RingInspector
        let status: RingStatus
        let entries: [Result<MetricDescriptor, RingCorruption>]
        var cells: [UInt32: MetricCells] = [:]
        do throws(RingError) {
            inspector = try context.inspector(name)
            status = try inspector.settledStatus()
            entries = try inspector.registryEntries()
            for case let .success(metric) in entries { cells[metric.index] = try inspector.cells(of: metric) }
        } catch {
            return context.fail(error)
        }
        let header = inspector.header
        let now = Now()
        let producer = ProducerLiveness(status: status)
        let file = FileFacts(path: status.path)
        let problems = entries.compactMap { entry -> RingError? in
            guard case let .failure(problem) = entry else { return nil }
            return .corrupt(ring: name, path: status.path, problem: problem)
        }
        let console = context.console

        if context.json {
            console.print(
                json(
                    status: status, header: header, entries: entries, cells: cells, producer: producer, file: file,
                    now: now, raw: context.raw
                ).text)
        } else {
            var lines = fileSection(name, status: status, file: file)
            lines += layoutSection(header, status: status, now: now)
            lines += producerSection(status, producer: producer, now: now)
            lines += consumerSection(status, header: header, now: now)
            lines += laneSection(status, now: now)
            lines += metricSection(entries, cells: cells)
            if context.raw { lines += rawSection(header) }
            lines.forEach { console.print($0) }
        }
        problems.forEach { console.printError("ringside-dump: \($0)") }
        return problems.isEmpty ? ExitStatus.success : ExitStatus.failure
    }

    // MARK: - The text's sections, each after a blank line and its title

    /// The ring's name, path and file.
    static func fileSection(_ name: String, status: RingStatus, file: FileFacts?) -> [String] {
        keyValueLines(
            [("ring", name), ("path", status.path)]
                + (file.map {
                    [("file", "\($0.size) bytes (\(humanBytes($0.size))), mode 0\(String($0.mode, radix: 8)), owner uid \($0.owner)")]
                } ?? []),
            indent: "", width: 16)
    }

    /// The header's layout, written once, at creation.
    static func layoutSection(_ header: rs_header, status: RingStatus, now: Now) -> [String] {
        var lines = ["", "layout (written once, at creation)"]
        lines += keyValueLines(
            [
                ("magic", "0x\(String(header.magic, radix: 16)) \"\(magicText(header.magic))\""),
                ("format version", "\(header.version)"),
                ("header size", "\(header.header_size) bytes"),
                ("record size", "\(header.record_size) bytes"),
                ("lane capacity", "\(status.capacity) records (capacity_log2 \(header.capacity_log2))"),
                (
                    "lane size",
                    "\(header.lane_size) bytes: a \(header.lane_header_size)-byte header, a cell per metric, "
                        + "records at +\(header.lane_records_offset)"
                ),
                ("max lanes", "\(header.max_lanes) (threads recording at once)"),
                (
                    "registry",
                    "\(header.registry_capacity) entries of \(header.registry_entry_size) bytes at offset \(header.registry_offset)"
                ),
                ("metric cells", "\(header.registry_capacity) of \(header.metric_cell_size) bytes at offset \(header.cells_offset)"),
                ("lanes offset", "\(header.lanes_offset)"),
                (
                    "created",
                    "\(utcTimestamp(microseconds: true, realtimeNanos: header.created_realtime_ns)) (realtime \(header.created_realtime_ns) ns, "
                        + "monotonic \(header.created_monotonic_ns) ns)"
                ),
                ("age", now.age(ofRealtime: header.created_realtime_ns).map { formatDuration($0, approximate: true) } ?? "-"),
            ], width: 14)
        return lines
    }

    /// The producer: its liveness, lanes, cursors and drops.
    static func producerSection(_ status: RingStatus, producer: ProducerLiveness, now: Now) -> [String] {
        var lines = ["", "producer"]
        lines += keyValueLines(
            [
                ("state", producer.explanation),
                ("pid", "\(status.producerPID)"),
                (
                    "started",
                    status.producerStartRealtimeNanos > 0
                        ? utcTimestamp(microseconds: true, realtimeNanos: status.producerStartRealtimeNanos) : "-"
                ),
                (
                    "heartbeat",
                    ago(now.age(ofMonotonic: status.heartbeatMonotonicNanos)) + " (monotonic \(status.heartbeatMonotonicNanos) ns)"
                ),
                ("attaches", "\(status.producerAttaches)"),
                (
                    "lanes",
                    "\(status.lanes.count) allocated of \(status.maxLanes), \(status.heldLanes) held by live threads; "
                        + "a thread found every lane taken \(status.lanesExhausted) time\(status.lanesExhausted == 1 ? "" : "s")"
                ),
                ("write cursor", "\(status.writeCursor) (records written, every lane's added up)"),
                (
                    "dropped",
                    "\(status.dropped) (\(status.laneDropped) by full lanes, \(status.unlanedDropped) by threads without a lane)"
                ),
                ("metrics", "\(status.metricCount) of \(status.maxMetrics)"),
                ("sampling", samplingText(status)),
                ("file size", "\(status.fileSize) bytes with its \(status.lanesText)"),
            ], width: 14)
        return lines
    }

    /// The consumer: its lock, heartbeat and cursor.
    static func consumerSection(_ status: RingStatus, header: rs_header, now: Now) -> [String] {
        var lines = ["", "consumer"]
        lines += keyValueLines(
            [
                (
                    "state",
                    status.consumerAlive
                        ? "attached: a process holds the consumer lock (byte 1)"
                        : "none attached: nobody holds the consumer lock (byte 1)"
                ),
                ("pid", "\(status.consumerPID)"),
                ("weights", status.consumerReadsWeights ? "read: a filling lane may be sampled" : "not read: a full lane drops"),
                (
                    "heartbeat",
                    ago(now.age(ofMonotonic: header.consumer_heartbeat_ns)) + " (monotonic \(header.consumer_heartbeat_ns) ns)"
                ),
                ("read cursor", "\(status.readCursor) (records consumed, every lane's added up)"),
            ], width: 14)
        return lines
    }

    /// The lanes' table, and the backlog.
    static func laneSection(_ status: RingStatus, now: Now) -> [String] {
        var lines = ["", "lanes (\(status.lanes.count) of \(status.maxLanes), each holds \(status.capacity) records)"]
        if status.lanes.isEmpty {
            lines.append("  (none yet: a lane is added when a thread first records)")
        } else {
            lines += laneTable(status, now: now).lines.map { "  " + $0 }
        }
        lines += keyValueLines(
            [
                ("backlog", "\(status.backlog) records in all; the fullest lane is \(oneDecimal(status.fillPercent))% full"),
                ("attempted", "\(status.writeCursor &+ status.dropped) records (written + dropped)"),
            ], width: 14)
        return lines
    }

    /// The registry's table, with each metric's cells.
    static func metricSection(_ entries: [Result<MetricDescriptor, RingCorruption>], cells: [UInt32: MetricCells]) -> [String] {
        var lines = ["", "metrics (\(entries.count))"]
        // CELL and DROPPED come from the cells, exact whatever the lanes held: a counter's
        // total (counters write no records), a gauge's last value, a histogram's or gauge's drops.
        var table = TextTable(
            ["INDEX", "KIND", "UNIT", "NAME", "LABELS", "SAMPLING", "CELL", "DROPPED", "HELP"],
            right: ["INDEX", "DROPPED"])
        for (index, entry) in entries.enumerated() {
            switch entry {
            case let .success(metric):
                let labels = metric.labels.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
                let cell = cells[metric.index] ?? MetricCells()
                table.add([
                    "\(metric.index)", metric.kind.description, metric.valuesText, metric.name,
                    labels.isEmpty ? "-" : labels, metric.samplingText, cellText(cell, kind: metric.kind),
                    metric.kind == .counter ? "-" : "\(cell.dropped)", metric.help.isEmpty ? "-" : metric.help,
                ])
            case let .failure(problem):
                table.add(["\(index)", "?", "?", "(bad entry: \(problem))", "-", "-", "-", "-", "-"])
            }
        }
        if entries.isEmpty { lines.append("  (none registered)") } else { lines += table.lines.map { "  " + $0 } }
        return lines
    }

    /// The header's bytes (`--raw`).
    static func rawSection(_ header: rs_header) -> [String] {
        ["", "header bytes (0x000 to 0x\(String(MemoryLayout<rs_header>.size - 1, radix: 16)))"] + hexDump(hexBytes(of: header))
    }

    /// One row per lane: who holds it, its cursors, and its backlog against its own capacity.
    static func laneTable(_ status: RingStatus, now: Now) -> TextTable {
        var table = TextTable(
            ["LANE", "STATE", "TID", "CLAIMS", "WRITE", "READ", "BACKLOG", "FILL", "DROPPED", "HEARTBEAT"],
            right: ["LANE", "TID", "CLAIMS", "WRITE", "READ", "BACKLOG", "FILL", "DROPPED", "HEARTBEAT"])
        for lane in status.lanes {
            table.add([
                "\(lane.index)", lane.stateText(producerAlive: status.producerAlive),
                lane.ownerTID != 0 ? "\(lane.ownerTID)" : "-", "\(lane.claims)",
                "\(lane.writeCursor)", "\(lane.readCursor)", "\(lane.backlog) of \(status.capacity)",
                oneDecimal(lane.fillPercent(capacity: status.capacity)) + "%", "\(lane.dropped)",
                ago(now.age(ofMonotonic: lane.heartbeatMonotonicNanos)),
            ])
        }
        return table
    }

    /// A metric's cell as the table shows it: `total 10`, `last 3.25`, `last -` (never set), or `-`.
    static func cellText(_ cell: MetricCells, kind: MetricKind) -> String {
        switch kind {
        case .counter: return "total \(cell.total)"
        case .gauge: return "last " + (cell.lastValue.map { "\($0)" } ?? "-")
        case .histogram: return "-"
        }
    }

    /// A metric's cells as JSON: a counter's `total`, a gauge's `last` (null if never set), and
    /// the records a histogram or gauge dropped.
    static func cellsJSON(_ cell: MetricCells, kind: MetricKind) -> JSON {
        switch kind {
        case .counter: return .object([("total", .uint(cell.total))])
        case .gauge: return .object([("last", cell.lastValue.map(JSON.double) ?? .null), ("dropped", .uint(cell.dropped))])
        case .histogram:
            return .object([
                ("dropped", .uint(cell.dropped)), ("dropped_sum", .uint(cell.droppedSum)), ("dropped_max", .uint(cell.droppedMax)),
            ])
        }
    }

    /// When the producer samples a filling lane's histograms (SAMPLING in ringside.h), and what it gathered.
    static func samplingText(_ status: RingStatus) -> String {
        guard status.sampleAbove > 0 else { return "never: a full lane drops" }
        let percent = Double(status.sampleAbove) * 100 / Double(max(1, status.capacity))
        let interval = status.drainIntervalNanos > 0 ? formatDuration(status.drainIntervalNanos, approximate: true) : "not said"
        return "histograms sampled past \(status.sampleAbove) records in a lane (\(roundedPercent(percent)) %) only where it "
            + "would fill before the collector drains it (its drain interval: \(interval)); \(status.gathered) calls gathered"
    }

    private static func ago(_ age: UInt64?) -> String {
        age.map { formatDuration($0, approximate: true) + " ago" } ?? "never"
    }

    /// The magic's bytes as text, with dots for what is not printable ASCII.
    static func magicText(_ magic: UInt64) -> String {
        String(
            decoding: withUnsafeBytes(of: magic.littleEndian) { raw in
                raw.map { (0x20..<0x7F).contains($0) ? $0 : UInt8(ascii: ".") }
            }, as: UTF8.self)
    }

    /// Hex in lines of 32 bytes, each with its offset.
    static func hexDump(_ hex: String) -> [String] {
        let characters = Array(hex)
        return stride(from: 0, to: characters.count, by: 64).map { start in
            let offset = String(start / 2, radix: 16)
            let chunk = characters[start..<min(start + 64, characters.count)]
            let groups = stride(from: 0, to: chunk.count, by: 16).map {
                String(chunk[(chunk.startIndex + $0)..<min(chunk.startIndex + $0 + 16, chunk.endIndex)])
            }
            return "  0x" + String(repeating: "0", count: max(0, 3 - offset.count)) + offset + "  " + groups.joined(separator: " ")
        }
    }

    /// `--json`'s document: the ring, its file, layout, producer and consumer, then the backlog,
    /// the lanes, the metrics and (with `--raw`) the header's bytes, in that order.
    private static func json(
        status: RingStatus, header: rs_header, entries: [Result<MetricDescriptor, RingCorruption>],
        cells: [UInt32: MetricCells], producer: ProducerLiveness, file: FileFacts?, now: Now,
        raw: Bool
    ) -> JSON {
        .members([
            ("name", .string(status.name)), ("path", .string(status.path)),
            ("file", fileJSON(file)),
            ("layout", layoutJSON(header, status: status)),
            ("producer", producerJSON(status, producer: producer, now: now)),
            ("consumer", consumerJSON(status, header: header, now: now)),
            ("backlog", .uint(status.backlog)), ("fill_percent", .double(roundedPercent(status.fillPercent))),
            ("lanes", .array(status.lanes.map { $0.json(capacity: status.capacity, producerAlive: status.producerAlive, now: now) })),
            ("metrics", metricsJSON(entries, cells: cells)),
            ("raw_header", raw ? .string(hexBytes(of: header)) : nil),
        ])
    }

    /// The file's size, mode and owner; nil (the key left out) when the file could not be read.
    private static func fileJSON(_ file: FileFacts?) -> JSON? {
        file.map {
            .object([
                ("size", .uint(UInt64($0.size))), ("mode", .string("0" + String($0.mode, radix: 8))),
                ("owner_uid", .uint(UInt64($0.owner))),
            ])
        }
    }

    /// The header's layout: its magic and version, the sizes and offsets of its parts, and when it
    /// was created.
    private static func layoutJSON(_ header: rs_header, status: RingStatus) -> JSON {
        .object([
            ("magic", .string("0x" + String(header.magic, radix: 16))), ("format_version", .uint(UInt64(header.version))),
            ("header_size", .uint(UInt64(header.header_size))), ("record_size", .uint(UInt64(header.record_size))),
            ("capacity_log2", .uint(UInt64(header.capacity_log2))), ("capacity", .uint(status.capacity)),
            ("registry_capacity", .uint(UInt64(header.registry_capacity))),
            ("registry_entry_size", .uint(UInt64(header.registry_entry_size))),
            ("registry_offset", .uint(header.registry_offset)),
            ("metric_cell_size", .uint(UInt64(header.metric_cell_size))), ("cells_offset", .uint(header.cells_offset)),
            ("lanes_offset", .uint(header.lanes_offset)), ("lane_size", .uint(header.lane_size)),
            ("lane_header_size", .uint(UInt64(header.lane_header_size))),
            ("lane_records_offset", .uint(UInt64(header.lane_records_offset))),
            ("max_lanes", .uint(UInt64(header.max_lanes))),
            // The size with the lanes allocated now (the file grows by a lane at a time).
            ("file_size", .uint(UInt64(status.fileSize))),
            ("created", .string(utcTimestamp(microseconds: true, realtimeNanos: header.created_realtime_ns))),
            ("created_realtime_ns", .uint(header.created_realtime_ns)),
            ("created_monotonic_ns", .uint(header.created_monotonic_ns)),
        ])
    }

    /// The producer: its process and whether it lives, its start and heartbeat, and the lanes'
    /// sums of what it wrote and dropped.
    private static func producerJSON(_ status: RingStatus, producer: ProducerLiveness, now: Now) -> JSON {
        .members([
            ("pid", .int(Int64(status.producerPID))), ("alive", .bool(producer.lockHeld)), ("lock_held", .bool(producer.lockHeld)),
            ("pid_exists", producer.pidExists.map(JSON.bool) ?? .null), ("how", .string(producer.explanation)),
            (
                "started",
                status.producerStartRealtimeNanos > 0
                    ? .string(utcTimestamp(microseconds: true, realtimeNanos: status.producerStartRealtimeNanos)) : .null
            ),
            ("start_realtime_ns", .uint(status.producerStartRealtimeNanos)),
            ("heartbeat_ns", .uint(status.heartbeatMonotonicNanos)),
            ("heartbeat_age_ns", now.age(ofMonotonic: status.heartbeatMonotonicNanos).map(JSON.uint) ?? .null),
            ("attaches", .uint(UInt64(status.producerAttaches))),
            // The lanes' sums: each lane's own cursors are in `lanes`.
            ("write_cursor", .uint(status.writeCursor)), ("dropped", .uint(status.dropped)),
            ("unlaned_dropped", .uint(status.unlanedDropped)),
            ("lanes_allocated", .uint(UInt64(status.lanes.count))), ("lanes_held", .uint(UInt64(status.heldLanes))),
            ("lanes_exhausted", .uint(status.lanesExhausted)),
            ("metric_count", .uint(UInt64(status.metricCount))),
            ("sample_above", .uint(UInt64(status.sampleAbove))),
        ])
    }

    /// The consumer (the collector): its process, whether it lives, its heartbeat and read cursor.
    private static func consumerJSON(_ status: RingStatus, header: rs_header, now: Now) -> JSON {
        .members([
            ("pid", .int(Int64(status.consumerPID))), ("alive", .bool(status.consumerAlive)),
            ("reads_weights", .bool(status.consumerReadsWeights)),
            ("heartbeat_ns", .uint(header.consumer_heartbeat_ns)),
            ("heartbeat_age_ns", now.age(ofMonotonic: header.consumer_heartbeat_ns).map(JSON.uint) ?? .null),
            ("read_cursor", .uint(status.readCursor)),
        ])
    }

    /// The registry's entries in order, each metric with its cells; an entry that does not decode
    /// as its index and the problem.
    private static func metricsJSON(_ entries: [Result<MetricDescriptor, RingCorruption>], cells: [UInt32: MetricCells]) -> JSON {
        .array(
            entries.enumerated().map { index, entry in
                switch entry {
                case let .success(metric):
                    return .object([
                        ("index", .uint(UInt64(metric.index))), ("kind", .string(metric.kind.description)),
                        ("unit", .string(metric.unit.description)), ("name", .string(metric.name)),
                        ("labels", metric.labelsJSON), ("sample_every", .uint(UInt64(metric.sampleEvery))),
                        ("resolution", .number(metric.resolutionText)), ("signed", .bool(metric.isSigned)),
                        ("help", .string(metric.help)),
                        ("cells", cellsJSON(cells[metric.index] ?? MetricCells(), kind: metric.kind)),
                    ])
                case let .failure(problem):
                    return .object([("index", .uint(UInt64(index))), ("error", .string(problem.description))])
                }
            })
    }
}

// MARK: - Its command line

extension InfoCommand: DumpCommand {
    static let name = "info"
    static var options: OptionSpec { OptionSpec(flags: ["--raw"]) }
    static let usage = """
        usage: ringside-dump info NAME [--json] [--raw]

        The whole header (layout, producer and consumer lines); each lane (one per thread that
        records): state, thread id, claims, cursors, backlog of its capacity, drops, heartbeat;
        and the metric registry (index, kind, unit, name, labels, sampling, help) with each
        metric's cells: a counter's exact total, a gauge's last value, the records dropped.
        --raw adds the header's first 384 bytes in hex.
        """

    static func run(parsing arguments: DumpArguments, _ context: DumpContext) throws(UsageError) -> Int32 {
        run(try arguments.ring(), context)
    }
}
