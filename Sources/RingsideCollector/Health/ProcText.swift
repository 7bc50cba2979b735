// The text of `/proc` files, parsed: the fields of `stat`, the three numbers of `schedstat`, the
// context switch lines of `status` (proc(5)). Pure functions of bytes, so that what another
// process's files say (cut short, garbage, a name full of parentheses) is tested without one; no
// input makes them trap, and anything unexpected is nil. Each parser is an initializer in an
// extension of its type, so that the type keeps its memberwise initializer.

/// The fields of a `/proc/PID/stat` or `/proc/PID/task/TID/stat` line.
struct ProcStat {
    /// Fields 3 (state) onwards, each as its bytes.
    private let fields: [ArraySlice<UInt8>]
    /// Field 2 without its parentheses: the kernel's name for the task (`comm`).
    let name: String

    /// Splits `text`. The name (field 2) is in parentheses and may hold spaces and parentheses
    /// itself, so the fields are counted from the last `)`; nil without one, or without a `(` before it.
    init?(_ text: ArraySlice<UInt8>) {
        guard let close = text.lastIndex(of: UInt8(ascii: ")")), let open = text.firstIndex(of: UInt8(ascii: "(")),
            open < close
        else { return nil }
        name = String(decoding: text[text.index(after: open)..<close], as: UTF8.self)
        fields = text[text.index(after: close)...].split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\n") })
    }

    init?(_ text: String) { self.init(Array(text.utf8)[...]) }

    /// Field `number` (1-based, as proc(5) numbers them; 3 or more) as an unsigned integer.
    func unsigned(_ number: Int) -> UInt64? {
        let offset = number - 3
        guard offset >= 0, offset < fields.count else { return nil }
        return parseUnsigned(fields[offset])
    }

    /// Field `number` as a signed integer (a few fields may be negative).
    func signed(_ number: Int) -> Int64? {
        let offset = number - 3
        guard offset >= 0, offset < fields.count else { return nil }
        var digits = fields[offset]
        let negative = digits.first == UInt8(ascii: "-")
        if negative { digits = digits.dropFirst() }
        guard let magnitude = parseUnsigned(digits), magnitude <= UInt64(Int64.max) else { return nil }
        return negative ? -Int64(magnitude) : Int64(magnitude)
    }
}

/// What the thread sampler takes from a thread's `stat`: the CPU it last ran on (field 39,
/// `processor`) and when it started (field 22, `starttime`, clock ticks after boot).
struct ThreadStat: Equatable {
    var processor: Int32
    var startTicks: UInt64
    var name: String
}

extension ThreadStat {
    init?(_ text: ArraySlice<UInt8>) {
        guard let stat = ProcStat(text), let processor = stat.signed(39), let start = stat.unsigned(22),
            let cpu = Int32(exactly: processor), cpu >= 0
        else { return nil }
        self.init(processor: cpu, startTicks: start, name: stat.name)
    }
}

/// What the thread sampler takes from a process's `stat`: CPU time (fields 14 and 15, in clock
/// ticks), major faults (12), threads (20), when it started (22), resident pages (24).
struct ProcessStat: Equatable {
    var majorFaults: UInt64
    var cpuTicks: UInt64
    var threads: Int
    var startTicks: UInt64
    var residentPages: UInt64

    init(majorFaults: UInt64, cpuTicks: UInt64, threads: Int, startTicks: UInt64, residentPages: UInt64) {
        self.majorFaults = majorFaults
        self.cpuTicks = cpuTicks
        self.threads = threads
        self.startTicks = startTicks
        self.residentPages = residentPages
    }

    init?(_ text: ArraySlice<UInt8>) {
        guard let stat = ProcStat(text), let majorFaults = stat.unsigned(12), let user = stat.unsigned(14),
            let system = stat.unsigned(15), let threads = stat.signed(20), threads >= 0, let start = stat.unsigned(22),
            let resident = stat.signed(24)
        else { return nil }
        let (cpu, overflow) = user.addingReportingOverflow(system)
        guard !overflow, let count = Int(exactly: threads) else { return nil }
        // rss is signed in the kernel and counted lazily: a moment's negative is none.
        self.init(majorFaults: majorFaults, cpuTicks: cpu, threads: count, startTicks: start, residentPages: UInt64(max(0, resident)))
    }
}

/// `/proc/PID/task/TID/schedstat`: `run_ns wait_ns timeslices`, the time on a CPU, the time
/// runnable and waiting for one, and how many times it was given one.
struct SchedStat: Equatable {
    var runNanos, waitNanos, timeslices: UInt64
}

extension SchedStat {
    /// Exactly three unsigned numbers, separated by spaces, and a newline or not.
    init?(_ text: ArraySlice<UInt8>) {
        var line = text
        if line.last == UInt8(ascii: "\n") { line = line.dropLast() }
        let numbers = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard numbers.count == 3, let run = parseUnsigned(numbers[0]), let wait = parseUnsigned(numbers[1]),
            let slices = parseUnsigned(numbers[2])
        else { return nil }
        self.init(runNanos: run, waitNanos: wait, timeslices: slices)
    }
}

/// The `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` lines of a `status`.
struct ContextSwitches: Equatable {
    var voluntary: UInt64
    var involuntary: UInt64
}

extension ContextSwitches {
    /// Nil unless both lines are there, once each, with a number.
    init?(status text: ArraySlice<UInt8>) {
        var voluntary: UInt64?, involuntary: UInt64?
        for line in text.split(separator: UInt8(ascii: "\n")) {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let key = line[..<colon]
            let value = line[line.index(after: colon)...].drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            if key.elementsEqual(Self.voluntaryKey) {
                guard voluntary == nil else { return nil }
                voluntary = parseUnsigned(value)
                if voluntary == nil { return nil }
            } else if key.elementsEqual(Self.involuntaryKey) {
                guard involuntary == nil else { return nil }
                involuntary = parseUnsigned(value)
                if involuntary == nil { return nil }
            }
        }
        guard let voluntary, let involuntary else { return nil }
        self.init(voluntary: voluntary, involuntary: involuntary)
    }

    private static let voluntaryKey = Array("voluntary_ctxt_switches".utf8)
    private static let involuntaryKey = Array("nonvoluntary_ctxt_switches".utf8)
}

/// Who a process or thread is, from its `status`: its thread group (`Tgid`, the process's pid) and
/// its credentials, each line once.
struct TaskIdentity: Equatable {
    var threadGroup: Int32
    var credentials: Credentials
}

extension TaskIdentity {
    /// Nil unless `Tgid`, `Uid` and `Gid` are each there once, the last two with four numbers.
    init?(status text: ArraySlice<UInt8>) {
        var group: Int32?, uids: [UInt32]?, gids: [UInt32]?
        for line in text.split(separator: UInt8(ascii: "\n")) {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let key = line[..<colon]
            let value = line[line.index(after: colon)...]
            if key.elementsEqual(Self.groupKey) {
                guard group == nil, let number = Self.numbers(value, count: 1)?.first, let pid = Int32(exactly: number) else { return nil }
                group = pid
            } else if key.elementsEqual(Self.uidKey) {
                guard uids == nil, let numbers = Self.numbers(value, count: 4) else { return nil }
                uids = numbers
            } else if key.elementsEqual(Self.gidKey) {
                guard gids == nil, let numbers = Self.numbers(value, count: 4) else { return nil }
                gids = numbers
            }
        }
        guard let group, let uids, let gids else { return nil }
        self.init(threadGroup: group, credentials: Credentials(uids: uids, gids: gids))
    }

    /// Exactly `count` numbers below 2^32, each after spaces or tabs.
    private static func numbers(_ text: ArraySlice<UInt8>, count: Int) -> [UInt32]? {
        let words = text.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") })
        guard words.count == count else { return nil }
        var numbers: [UInt32] = []
        for word in words {
            guard let value = parseUnsigned(word), let number = UInt32(exactly: value) else { return nil }
            numbers.append(number)
        }
        return numbers
    }

    private static let groupKey = Array("Tgid".utf8)
    private static let uidKey = Array("Uid".utf8)
    private static let gidKey = Array("Gid".utf8)
}

/// A task's user and group ids, each four: real, effective, saved and filesystem.
struct Credentials: Equatable {
    var uids: [UInt32]
    var gids: [UInt32]

    /// The one user it runs as: its four uids are one, and so are its four gids. Nil for a
    /// set-user-ID or set-group-ID program, or one that changed only some of its ids: it has
    /// rights its starter's user lacks, as the kernel judges it (it lets a user read another
    /// process's private files only when its real, effective and saved ids are all that user's).
    var soleUser: UInt32? {
        guard let uid = uids.first, let gid = gids.first, uids.allSatisfy({ $0 == uid }), gids.allSatisfy({ $0 == gid }) else {
            return nil
        }
        return uid
    }
}

/// Decimal digits as an unsigned number: nil when empty, when anything else is there, or past 2^64 - 1.
func parseUnsigned(_ digits: ArraySlice<UInt8>) -> UInt64? {
    guard !digits.isEmpty, digits.count <= 20 else { return nil }
    var value: UInt64 = 0
    for byte in digits {
        guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
        let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
        let (sum, overflowSum) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
        guard !overflowTimes, !overflowSum else { return nil }
        value = sum
    }
    return value
}
