import Ringside
import RingsideJSON

/// What a trace shows, built by ``TraceBuilder`` and written by ``ChromeTraceJSON`` and
/// ``PerfettoTrace``: a process per file, a thread per lane, slices and counter samples. Times
/// are nanoseconds after `originRealtimeNanos` (a whole second of the wall clock, at or before
/// the earliest event), so they stay small and exact.
package struct TraceModel: Sendable {
    package struct Process: Sendable {
        /// The source's index: the key of its threads, slices and counters.
        package var source: UInt32
        package var name: String
        package var pid: Int32
        package var threads: [Thread]
    }

    /// A lane's thread. Its slices that overlap without nesting (two latencies whose measures
    /// overlap) go on rows of their own, as a viewer's track holds nested slices only: row 0 is
    /// the thread's, row k another track named `NAME #k+1`.
    package struct Thread: Sendable {
        package var lane: UInt32
        package var name: String
        /// At least 1.
        package var rows: Int

        /// Row `row`'s track name.
        package func name(row: Int) -> String { row == 0 ? name : "\(name) #\(row + 1)" }
    }

    /// The id of lane `lane`'s row `row` among its process's threads (the JSON's `tid`): the lane's
    /// number for its first row (lanes are fewer than 2^16).
    package static func threadID(lane: UInt32, row: Int) -> UInt32 { UInt32(row) << 16 | lane }

    /// A recorded time: [start, start + duration] on a lane's thread, named by its metric.
    package struct Slice: Sendable {
        package var source: UInt32
        package var lane: UInt32
        /// Its row on its lane's thread (see ``Thread``).
        package var row: Int
        package var name: String
        package var startNanos: UInt64
        package var durationNanos: UInt64
        /// The value with its unit, then the exemplar's pairs (`exemplar.KEY`), in order.
        package var args: [(key: String, value: String)]
    }

    /// One sample of a counter track (a gauge, a histogram value that is not a time, a counter's total).
    package struct CounterSample: Sendable {
        package var source: UInt32
        /// The track's name: the metric with its labels.
        package var name: String
        package var timeNanos: UInt64
        package var value: MetricValue
    }

    package var originRealtimeNanos: UInt64
    package var processes: [Process]
    /// By start time.
    package var slices: [Slice]
    /// By time.
    package var counters: [CounterSample]
    /// Records that could not be read: an unknown metric, a kind that is not the metric's, a
    /// stray or malformed exemplar part. Counted, not shown.
    package var unreadableRecords: UInt64

    /// The counter tracks, each once: (source, name), in order of first sample.
    package var counterTracks: [(source: UInt32, name: String)] {
        var seen: Set<String> = []
        var tracks: [(source: UInt32, name: String)] = []
        for sample in counters where seen.insert("\(sample.source)/\(sample.name)").inserted {
            tracks.append((sample.source, sample.name))
        }
        return tracks
    }
}

extension MetricValue {
    /// The value as JSON writes it: a whole number, a double, or a number of steps as its exact
    /// decimal (the trace's counter samples, and `ringside-dump records --json`'s values).
    package var json: JSON {
        switch self {
        case let .unsigned(value): return .uint(value)
        case let .double(value): return .double(value)
        case .steps: return .number(text)
        }
    }

    /// The value as a `Double`, for readers that take no exact decimal (Perfetto's counters).
    package var doubleValue: Double {
        switch self {
        case let .unsigned(value): return Double(value)
        case let .double(value): return value
        case .steps: return Double(text) ?? .nan
        }
    }
}
