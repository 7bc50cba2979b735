import RingsideJSON
import RingsideText

/// A ``TraceModel`` in the Trace Event Format (JSON), which Perfetto's UI and chrome://tracing
/// open: `M` events name each process and thread, an `X` (complete) event per slice, a `C`
/// event per counter sample. Times are microseconds after the model's origin, written with
/// their nanoseconds as decimals (`1234.567`), exactly; the origin's wall-clock time is in
/// `otherData`.
package enum ChromeTraceJSON {
    package static func encode(_ model: TraceModel) -> String {
        let pids = traceIDs(model)
        var events: [JSON] = []
        for (process, pid) in zip(model.processes, pids) {
            events.append(metadata("process_name", pid: pid, tid: 0, args: [("name", .string(process.name))]))
            for thread in process.threads {
                for row in 0..<thread.rows {
                    let tid = TraceModel.threadID(lane: thread.lane, row: row)
                    events.append(metadata("thread_name", pid: pid, tid: tid, args: [("name", .string(thread.name(row: row)))]))
                    // A thread's rows side by side, in lane order.
                    events.append(
                        metadata(
                            "thread_sort_index", pid: pid, tid: tid, args: [("sort_index", .uint(UInt64(thread.lane) << 16 | UInt64(row)))])
                    )
                }
            }
        }
        for slice in model.slices {
            events.append(
                .object([
                    ("ph", .string("X")), ("cat", .string("ringside")), ("name", .string(slice.name)),
                    ("pid", .int(Int64(pids[Int(slice.source)]))),
                    ("tid", .uint(UInt64(TraceModel.threadID(lane: slice.lane, row: slice.row)))),
                    ("ts", .number(microseconds(slice.startNanos))), ("dur", .number(microseconds(slice.durationNanos))),
                    ("args", .object(slice.args.map { ($0.key, .string($0.value)) })),
                ]))
        }
        for sample in model.counters {
            events.append(
                .object([
                    ("ph", .string("C")), ("cat", .string("ringside")), ("name", .string(sample.name)),
                    ("pid", .int(Int64(pids[Int(sample.source)]))), ("ts", .number(microseconds(sample.timeNanos))),
                    ("args", .object([("value", sample.value.json)])),
                ]))
        }
        return JSON.object([
            ("displayTimeUnit", .string("ns")),
            (
                "otherData",
                .object([
                    ("origin", .string(utcTimestamp(microseconds: false, realtimeNanos: model.originRealtimeNanos))),
                    ("origin_realtime_ns", .uint(model.originRealtimeNanos)),
                    ("unreadable_records", .uint(model.unreadableRecords)),
                ])
            ),
            ("traceEvents", .array(events)),
        ]).text + "\n"
    }

    /// The `pid` each process is shown with: its own, unless two share one or one is unknown
    /// (then 1, 2, ... in order, so that no two files merge).
    static func traceIDs(_ model: TraceModel) -> [Int32] {
        let pids = model.processes.map(\.pid)
        return Set(pids).count == pids.count && pids.allSatisfy({ $0 > 0 }) ? pids : pids.indices.map { Int32($0 + 1) }
    }

    /// Nanoseconds as microseconds with three decimals: `1234.567`.
    static func microseconds(_ nanos: UInt64) -> String {
        let fraction = String(nanos % 1000)
        return "\(nanos / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    private static func metadata(_ kind: String, pid: Int32, tid: UInt32, args: [(String, JSON)]) -> JSON {
        .object([
            ("ph", .string("M")), ("name", .string(kind)), ("pid", .int(Int64(pid))), ("tid", .uint(UInt64(tid))), ("args", .object(args)),
        ])
    }
}
