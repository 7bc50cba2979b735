import CRingside
import Ringside
import RingsideTrace

/// A file of a bot (its own or a worker's) as the recorder knows it: what a reader of its
/// recorded records needs. Its id in the bot's recording (`TraceRecord.source`) is never
/// given to another file while the recorder runs.
package struct RecordedSource: Sendable {
    /// The ring file's name (`bot`, or `bot@pid` for a worker), and the pid that wrote it.
    package var ring: String
    package var pid: Int32
    package var isWorker: Bool
    /// Its registry as last seen: a record's `metric` indexes it (a registry only grows).
    package var metrics: [MetricDescriptor] = []
    /// Each lane's holder as last read (thread id 0 and "" before a read): a lane held by another
    /// thread since says so here at the next read, at most `threadRereadNanos` later.
    package var threads: [(id: Int32, name: String)] = []
    /// When the drain last took records of it, and when it last read each lane's holder.
    var lastDrainNanos: UInt64 = 0
    var threadsReadNanos: [UInt64] = []

    /// How often a drained lane's holder is read again.
    static let threadRereadNanos: UInt64 = 100_000_000

    init(ring: String, pid: Int32, isWorker: Bool) {
        self.ring = ring
        self.pid = pid
        self.isWorker = isWorker
    }

    /// Takes what `consumer` says of its registry and of lane `lane`'s holder (at most every
    /// `threadRereadNanos` a lane), having drained it at `now`.
    mutating func update(from consumer: RingConsumer, lane: Int, nowNanos now: UInt64) {
        lastDrainNanos = now
        if consumer.metrics.count != metrics.count { metrics = consumer.metrics }
        guard lane >= 0, lane < Int(RS_MAX_LANES) else { return }
        if threads.count <= lane {
            threads += Array(repeating: (0, ""), count: lane + 1 - threads.count)
            threadsReadNanos += Array(repeating: 0, count: lane + 1 - threadsReadNanos.count)
        }
        guard threadsReadNanos[lane] == 0 || now &- threadsReadNanos[lane] >= Self.threadRereadNanos else { return }
        threadsReadNanos[lane] = now
        let thread = consumer.thread(lane: lane)
        if thread.id != threads[lane].id || thread.name != threads[lane].name { threads[lane] = thread }
    }
}
