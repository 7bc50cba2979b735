import CRingside
import Ringside
import RingsideJSON
import RingsideSystem
import RingsideText
#if canImport(Glibc)
import Glibc
#endif

/// What `ringside-dump` shares between its commands: where the rings are, whose rings it may
/// read, where it writes, and how.
struct DumpContext {
    let directory: RingDirectory
    let allowedOwners: Set<UInt32>
    let console: Console
    let json: Bool
    let raw: Bool

    func inspector(_ name: String) throws(RingError) -> RingInspector {
        try RingInspector(name, directory: directory, allowedOwners: allowedOwners)
    }

    /// Prints a ring error as the tools do (`ringside-dump: ring x: ...`) and returns status 1.
    func fail(_ error: RingError) -> Int32 {
        console.printError("ringside-dump: \(error)")
        return ExitStatus.failure
    }

    /// The ring names to report on: the directory's, or an error when the directory is missing.
    func ringNames() throws(RingError) -> [String] {
        do { _ = try System.stat(directory.path) } catch {
            throw .system(ring: "*", operation: "open ring directory \(directory.path)", errno: error.rawValue)
        }
        return directory.ringNames()
    }
}

extension RingInspector {
    /// `status()`, but a lane whose cursors look out of range is looked at again a few times
    /// before it is called corrupt. The reader loads a lane's read cursor, then its write cursor:
    /// when a collector drains and the producer refills the lane between the two loads, a sound
    /// lane looks as if it held more than its capacity for that one look. A corrupt lane stays so.
    func settledStatus() throws(RingError) -> RingStatus {
        try lookedAgain { () throws(RingError) in try status() }
    }

    /// `peek(last:includingConsumed:)`, looked at again as `settledStatus()` is.
    func settledPeek(last: Int? = nil, includingConsumed: Bool = false) throws(RingError) -> [PeekedRecord] {
        try lookedAgain { () throws(RingError) in try peek(last: last, includingConsumed: includingConsumed) }
    }

    private func lookedAgain<T>(_ look: () throws(RingError) -> T) throws(RingError) -> T {
        var attempts = 1
        while true {
            do { return try look() } catch {
                guard case .corrupt(_, _, .cursorsOutOfRange) = error, attempts < 5 else { throw error }
                attempts += 1
            }
        }
    }
}

/// Whether the producer lives, and how we know: the producer's lock on byte 0 of the file is
/// the signal (the kernel drops it when the process dies); whether the recorded pid still
/// exists is a secondary hint (pids are reused, and a pid from another namespace is unknown).
struct ProducerLiveness: Sendable {
    /// A live process holds the producer lock.
    let lockHeld: Bool
    let pid: Int32
    /// Whether a process with `pid` exists now; nil when no pid was recorded.
    let pidExists: Bool?

    init(status: RingStatus) {
        lockHeld = status.producerAlive
        pid = status.producerPID
        pidExists = processExists(status.producerPID)
    }

    var word: String { lockHeld ? "alive" : "dead" }

    /// `alive (lock held)`, `dead (lock free, pid gone)`...
    var short: String {
        if lockHeld { return pidExists == false ? "alive (lock held, pid gone)" : "alive (lock held)" }
        switch pidExists {
        case true?: return "dead (lock free, pid exists)"
        case false?: return "dead (lock free, pid gone)"
        case nil: return "dead (lock free, no pid)"
        }
    }

    /// The whole story, for `info`.
    var explanation: String {
        let pidText: String
        switch pidExists {
        case true?: pidText = "pid \(pid) exists"
        case false?: pidText = "pid \(pid) does not exist"
        case nil: pidText = "no pid recorded"
        }
        if lockHeld {
            return "alive: a process holds the producer lock (byte 0); \(pidText)"
                + (pidExists == false ? " (another pid namespace, or a child that inherited the lock)" : "")
        }
        return "dead: nobody holds the producer lock (byte 0); \(pidText)"
            + (pidExists == true ? " (not as this ring's producer: pids are reused)" : "")
    }

    var json: JSON {
        .members([
            ("pid", .int(Int64(pid))), ("alive", .bool(lockHeld)), ("lock_held", .bool(lockHeld)),
            ("pid_exists", pidExists.map(JSON.bool) ?? .null), ("how", .string(explanation)),
        ])
    }
}

/// Whether a process with this pid exists (kill with signal 0); nil for no pid.
func processExists(_ pid: Int32) -> Bool? {
    guard pid > 0 else { return nil }
    do { try System.kill(pid, 0) } catch { return error == .notPermitted }
    return true
}

/// The clocks now: the records' (coarse monotonic) and wall time.
struct Now {
    let monotonic = rs_clock_coarse_ns()
    let realtime = rs_clock_realtime_ns()

    /// How long ago a coarse monotonic time was; nil for 0 (never).
    func age(ofMonotonic time: UInt64) -> UInt64? {
        guard time > 0 else { return nil }
        return monotonic >= time ? monotonic - time : 0
    }

    func age(ofRealtime time: UInt64) -> UInt64? {
        guard time > 0 else { return nil }
        return realtime >= time ? realtime - time : 0
    }
}

extension RingStatus {
    /// How full the fullest lane is, in percent. Capacity is per lane and a lane drops records
    /// when it alone is full, so the fullest lane, not the bot's sum, says how close drops are.
    var fillPercent: Double { lanes.map { $0.fillPercent(capacity: capacity) }.max() ?? 0 }

    /// Lanes a live thread holds now: none once the producer is dead, whatever the file says
    /// (a process that exits without detaching leaves its lanes marked active).
    var heldLanes: Int { producerAlive ? lanes.filter { $0.state == .active }.count : 0 }

    /// Records dropped by full lanes (the rest were dropped by threads that found no lane).
    var laneDropped: UInt64 { dropped &- unlanedDropped }

    /// `1 lane` or `3 lanes`.
    var lanesText: String { "\(lanes.count) lane\(lanes.count == 1 ? "" : "s")" }
}

extension LaneStatus {
    /// How full the lane is, in percent of its capacity.
    func fillPercent(capacity: UInt64) -> Double { capacity == 0 ? 0 : Double(backlog) * 100 / Double(capacity) }

    /// The lane's state for people: an active lane of a dead producer says so.
    func stateText(producerAlive: Bool) -> String {
        state == .active && !producerAlive ? "active (producer dead)" : state.description
    }

    /// The lane as JSON: `info --json`'s `lanes` array.
    func json(capacity: UInt64, producerAlive: Bool, now: Now) -> JSON {
        .members([
            ("lane", .uint(UInt64(index))), ("state", .string(state.description)),
            ("held", .bool(state == .active && producerAlive)),
            ("owner_tid", .int(Int64(ownerTID))), ("claims", .uint(UInt64(claims))),
            ("write_cursor", .uint(writeCursor)), ("read_cursor", .uint(readCursor)),
            ("backlog", .uint(backlog)), ("capacity", .uint(capacity)),
            ("fill_percent", .double(roundedPercent(fillPercent(capacity: capacity)))),
            ("dropped", .uint(dropped)), ("heartbeat_ns", .uint(heartbeatMonotonicNanos)),
            ("heartbeat_age_ns", now.age(ofMonotonic: heartbeatMonotonicNanos).map(JSON.uint) ?? .null),
        ])
    }
}

/// A percentage with two decimals, for JSON.
func roundedPercent(_ percent: Double) -> Double { (percent * 100).rounded() / 100 }

/// A short name for each kind of ring error, for JSON.
func errorKind(_ error: RingError) -> String {
    switch error {
    case .invalidName: return "invalid_name"
    case .invalidMetric: return "invalid_metric"
    case .invalidExemplar: return "invalid_exemplar"
    case .metricConflict: return "metric_conflict"
    case .registryFull: return "registry_full"
    case .invalidOptions: return "invalid_options"
    case .notFound: return "not_found"
    case .permissionDenied: return "permission_denied"
    case .notARegularFile: return "not_a_regular_file"
    case .noSpace: return "no_space"
    case .producerAlive: return "producer_alive"
    case .consumerAlive: return "consumer_alive"
    case .notReady: return "not_ready"
    case .corrupt: return "corrupt"
    case .incompatibleLayout: return "incompatible_layout"
    case .unavailable: return "unavailable"
    case .system: return "system"
    }
}

func errorJSON(_ error: RingError) -> JSON {
    .object([("kind", .string(errorKind(error))), ("message", .string(error.description))])
}

/// The ring's figures as JSON: what `list --json` shows per ring.
func statusJSON(_ status: RingStatus, now: Now) -> JSON {
    let producer = ProducerLiveness(status: status)
    return .members([
        ("name", .string(status.name)), ("path", .string(status.path)),
        ("owner_uid", FileFacts(path: status.path).map { JSON.uint(UInt64($0.owner)) }),
        ("format_version", .uint(UInt64(status.formatVersion))),
        (
            "producer",
            .members([
                ("pid", .int(Int64(producer.pid))), ("alive", .bool(producer.lockHeld)), ("lock_held", .bool(producer.lockHeld)),
                ("pid_exists", producer.pidExists.map(JSON.bool) ?? .null),
                ("heartbeat_age_ns", now.age(ofMonotonic: status.heartbeatMonotonicNanos).map(JSON.uint) ?? .null),
                (
                    "started",
                    status.producerStartRealtimeNanos > 0
                        ? .string(utcTimestamp(microseconds: true, realtimeNanos: status.producerStartRealtimeNanos)) : .null
                ),
                ("attaches", .uint(UInt64(status.producerAttaches))),
            ])
        ),
        ("consumer", .object([("pid", .int(Int64(status.consumerPID))), ("alive", .bool(status.consumerAlive))])),
        // Capacity is each lane's; backlog, written, consumed and dropped are the lanes' sums;
        // fill is the fullest lane's.
        ("capacity", .uint(status.capacity)), ("backlog", .uint(status.backlog)),
        ("fill_percent", .double(roundedPercent(status.fillPercent))),
        ("written", .uint(status.writeCursor)), ("consumed", .uint(status.readCursor)), ("dropped", .uint(status.dropped)),
        ("unlaned_dropped", .uint(status.unlanedDropped)),
        ("lanes_allocated", .uint(UInt64(status.lanes.count))), ("max_lanes", .uint(UInt64(status.maxLanes))),
        ("lanes_held", .uint(UInt64(status.heldLanes))), ("lanes_exhausted", .uint(status.lanesExhausted)),
        ("metrics", .uint(UInt64(status.metricCount))), ("max_metrics", .uint(UInt64(status.maxMetrics))),
        ("file_size", .uint(UInt64(status.fileSize))),
        ("created", .string(utcTimestamp(microseconds: true, realtimeNanos: status.createdRealtimeNanos))),
        ("age_ns", now.age(ofRealtime: status.createdRealtimeNanos).map(JSON.uint) ?? .null),
    ])
}

/// The owner, mode and size of a ring's file as `lstat` sees it, for rings that cannot be read.
struct FileFacts {
    let size: Int
    let mode: UInt32
    let owner: UInt32

    init?(path: String) {
        guard let info = try? System.lstat(path) else { return nil }
        size = Int(info.st_size)
        mode = UInt32(info.st_mode & 0o7777)
        owner = info.st_uid
    }
}
