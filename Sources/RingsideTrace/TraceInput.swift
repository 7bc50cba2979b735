import Ringside

/// One raw record as a reader drained or peeked it: the file it came from (an index into the
/// trace's sources), its lane, and its 32 bytes. Exemplar records are records too, in lane order.
package struct TraceRecord: Sendable {
    package var source: UInt32
    package var lane: UInt32
    package var record: RingRecord

    package init(source: UInt32, lane: UInt32, record: RingRecord) {
        self.source = source
        self.lane = lane
        self.record = record
    }
}

/// One bot file (the bot's, or a worker's `<bot>@<pid>`): what a trace needs to name and read
/// its records.
package struct TraceSource: Sendable {
    /// The ring's name: `bot` or `bot@pid`.
    package var ringName: String
    package var bot: String
    package var pid: Int32
    package var isWorker: Bool
    /// The registry by index; nil for an entry that does not decode (its records are skipped).
    package var metrics: [MetricDescriptor?]
    /// Thread names by lane ("" when the thread named none: it is shown as "lane N").
    package var threadNames: [String]
    /// CLOCK_REALTIME less CLOCK_MONOTONIC for this file (wrapping): records hold monotonic times.
    package var wallClockOffsetNanos: UInt64
    /// Counter totals and gauge values read from the file's cells, when known, as of
    /// `finalValuesMonotonicNanos` (postmortem: the producer's last heartbeat).
    package var finalValues: [(metric: MetricDescriptor, value: MetricValue)]
    package var finalValuesMonotonicNanos: UInt64
    /// Samples of counter tracks from outside the file, already on the wall clock: the collector's
    /// thread-health figures of the file's lane threads (`"THREAD cpu"` and the like).
    package var sampledCounters: [(name: String, realtimeNanos: UInt64, value: Double)] = []

    package init(
        ringName: String, bot: String, pid: Int32, isWorker: Bool, metrics: [MetricDescriptor?], threadNames: [String],
        wallClockOffsetNanos: UInt64, finalValues: [(metric: MetricDescriptor, value: MetricValue)] = [],
        finalValuesMonotonicNanos: UInt64 = 0
    ) {
        self.ringName = ringName
        self.bot = bot
        self.pid = pid
        self.isWorker = isWorker
        self.metrics = metrics
        self.threadNames = threadNames
        self.wallClockOffsetNanos = wallClockOffsetNanos
        self.finalValues = finalValues
        self.finalValuesMonotonicNanos = finalValuesMonotonicNanos
    }

    /// Its process's track name: `bot NAME (pid P)` or `NAME worker (pid P)`.
    package var processName: String { isWorker ? "\(bot) worker (pid \(pid))" : "bot \(bot) (pid \(pid))" }

    /// Lane `lane`'s thread track name: the thread's name, else `lane N`.
    package func threadName(lane: UInt32) -> String {
        Int(lane) < threadNames.count && !threadNames[Int(lane)].isEmpty ? threadNames[Int(lane)] : "lane \(lane)"
    }

    /// The metric a record names, if registered and decoded.
    func metric(_ index: UInt32) -> MetricDescriptor? { Int(index) < metrics.count ? metrics[Int(index)] : nil }

    /// A monotonic time on the wall clock.
    func wallNanos(ofMonotonic time: UInt64) -> UInt64 { time &+ wallClockOffsetNanos }
}
