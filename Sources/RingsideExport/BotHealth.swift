import RingsideSnapshot
import RingsideText

/// A bot's telemetry as `/health?ring=NAME` judges it from a snapshot's files (the bot's own
/// `ringside.NAME` and its workers' `ringside.NAME@PID`): alive when a producer process holds
/// one of them, running, and wrote a record (or attached) within the bound; else why not.
package struct BotHealth: Sendable, Equatable {
    package enum State: String, Sendable {
        /// A live producer wrote within the bound.
        case alive
        /// A live producer, but no record (nor attach) for longer than the bound.
        case stale
        /// Every producer holding a file is stopped (SIGSTOP, a debugger): alive, recording nothing.
        case stopped
        /// No process holds any of its files: what they hold is drained, nothing more comes.
        case dead
        /// A live file's records are not read: too many of them were invalid lately.
        case quarantined
        /// Its files are refused (corrupt, another user's, another consumer's, ...).
        case skipped
        /// No file of that name is known: never attached (a misspelt name?), or refused before it was read.
        case unknown
    }

    package let name: String
    package let state: State
    /// Why it is not alive, for a person (nil when alive).
    package let reason: String?
    /// Seconds since a live producer of it last wrote a record or attached (its freshest file);
    /// nil when none is live.
    package let heartbeatAgeSeconds: Double?
    /// The pid of the producer of its own file (0: not known).
    package let producerPID: Int32
    /// Its files the collector knows.
    package let files: Int

    package var isAlive: Bool { state == .alive }

    /// How long a live bot may go without a record before it is stale, by default (`max_age=`
    /// changes it per request).
    package static let defaultMaxAgeSeconds: Double = 60

    /// Judges `bot` from `snapshot`'s files at CLOCK_REALTIME `nowNanos`: their heartbeats' ages
    /// are the snapshot's plus the time since it was built (a snapshot of quiet rings stands for
    /// as long as they stay quiet).
    package init(bot: String, in snapshot: Snapshot, nowNanos: UInt64, maxAgeSeconds: Double) {
        self.init(
            bot: bot, files: snapshot.rings.filter { $0.bot == bot }, sinceBuilt: Self.sinceBuilt(snapshot, nowNanos: nowNanos),
            maxAgeSeconds: maxAgeSeconds)
    }

    /// Every bot that has a file in `snapshot`, by name.
    package static func all(in snapshot: Snapshot, nowNanos: UInt64, maxAgeSeconds: Double) -> [BotHealth] {
        let sinceBuilt = sinceBuilt(snapshot, nowNanos: nowNanos)
        return Dictionary(grouping: snapshot.rings, by: \.bot).sorted { $0.key < $1.key }.map {
            BotHealth(bot: $0.key, files: $0.value, sinceBuilt: sinceBuilt, maxAgeSeconds: maxAgeSeconds)
        }
    }

    /// Seconds since `snapshot` was built (0 for one made by hand, or a clock set back).
    private static func sinceBuilt(_ snapshot: Snapshot, nowNanos now: UInt64) -> Double {
        snapshot.generatedRealtimeNanos == 0 ? 0 : Double(now &- min(now, snapshot.generatedRealtimeNanos)) / 1e9
    }

    private init(bot: String, files: [RingSnapshot], sinceBuilt: Double, maxAgeSeconds: Double) {
        name = bot
        self.files = files.count
        producerPID = files.first { $0.worker == nil }?.producerPID ?? 0
        let attached = files.filter { $0.state != .skipped }
        let live = attached.filter { $0.state == .live }
        let age = live.map(\.heartbeatAgeSeconds).min().map { $0 + sinceBuilt }
        heartbeatAgeSeconds = age
        (state, reason) = Self.judge(bot, files: files, attached: attached, live: live, age: age ?? 0, maxAgeSeconds: maxAgeSeconds)
    }

    private static func judge(
        _ bot: String, files: [RingSnapshot], attached: [RingSnapshot], live: [RingSnapshot], age: Double, maxAgeSeconds: Double
    ) -> (State, String?) {
        func pids(_ rings: [RingSnapshot]) -> String {
            rings.map { $0.producerPID == 0 ? $0.name : "\($0.name): pid \($0.producerPID)" }.joined(separator: ", ")
        }
        guard !files.isEmpty else {
            let why = "the bot never attached in its ring directory, or the name is misspelt"
            return (.unknown, "no file ringside.\(bot) is known to the collector: \(why)")
        }
        guard !attached.isEmpty else {
            let problems = files.map { "\($0.name): \($0.problem ?? "refused")" }.joined(separator: "; ")
            return (.skipped, "the collector does not read its files: \(problems)")
        }
        guard !live.isEmpty else {
            let stopped = attached.filter { $0.state == .producerStopped }
            if !stopped.isEmpty {
                return (.stopped, "its producer is stopped (SIGSTOP or a debugger), recording nothing (\(pids(stopped)))")
            }
            return (.dead, "its producer is dead: no process holds its files (\(pids(attached)))")
        }
        if let quarantined = live.first(where: \.quarantined) {
            return (.quarantined, "the records of \(quarantined.name) are not read: \(quarantined.problem ?? "too many were invalid")")
        }
        guard age <= maxAgeSeconds else {
            return (.stale, "no record for \(formatSeconds(age)), more than max_age \(formatSeconds(maxAgeSeconds)) (\(pids(live)))")
        }
        return (.alive, nil)
    }
}
