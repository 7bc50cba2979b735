import Glibc

/// The passwords waiting for bcrypt, and which is checked next: fairly between clients, so that
/// wrong passwords, from any number of connections, cannot keep a right one out. The password
/// worker checks one at a time (a check costs what its hash's cost says: some 250 ms at cost 12);
/// the desk decides the order. Owned by the server's loop.
///
/// - Checks wait by *asker*: the client's host (`SocketAddress.hostKey`: an IPv4 address, an IPv6
///   /64) and the user it names (each configured user apart; every unknown name as one). At most
///   `perAsker` credentials wait for each; past that a request is answered `429` at once.
/// - The next check is the first of the asker with the fewest recent failures (each halves a
///   minute later), ties taken in turn: an asker that has not failed goes ahead of every asker
///   that has, however many connections or requests those send. A flood makes its own asker
///   wait, not others.
/// - A password that failed is remembered (a salted digest, as `VerifiedPasswords` keeps those
///   that verified), and asked again is refused `401` at once, with no check: repeating a wrong
///   password costs nothing.
/// - Requests with the same credentials wait on one check.
/// - Credentials turned away (`429`) and asked for again go ahead of first attempts in their
///   asker's queue: a client that retries its one password is checked before guesses that
///   never repeat, even when they share its host and its user.
final class PasswordDesk {
    /// Who asks: the client's host, and the configured user it names (nil: a name no one has).
    struct Asker: Hashable {
        var host: [UInt8]
        var user: [UInt8]?
    }

    /// What became of a request: waiting for its check, refused as a password known to be wrong,
    /// or turned away because its asker has `perAsker` waiting.
    enum Outcome: Equatable {
        case waiting
        case knownWrong
        case turnedAway
    }

    /// One credential's check, and the requests (the loop's tickets) waiting on it.
    private final class Check {
        let digest: [UInt8]
        let verification: AccessRules.Verification
        let isRetry: Bool
        var tickets: [UInt64]

        init(digest: [UInt8], verification: AccessRules.Verification, isRetry: Bool, ticket: UInt64) {
            self.digest = digest
            self.verification = verification
            self.isRetry = isRetry
            tickets = [ticket]
        }
    }

    private struct Queue {
        var checks: [Check] = []
        var failures = DecayingCount()
        /// When this asker was last served (the desk's sequence): ties go to the one served longest ago.
        var served: UInt64 = 0
    }

    /// Credentials waiting per asker, at most.
    static let perAsker = 4
    /// Askers remembered at most (those with nothing waiting are forgotten first, fewest failures first).
    static let maxAskers = 4096

    private var queues: [Asker: Queue] = [:]
    private var checking: (id: UInt64, asker: Asker, check: Check)?
    private var knownWrong = DigestRing(capacity: 4096)
    private var turnedAway = DigestRing(capacity: 4096)
    private var sequence: UInt64 = 0
    private let salt = OpenSSL.randomBytes(32)

    init() {}

    /// Whether a check is at the worker.
    var isChecking: Bool { checking != nil }

    /// Takes a request whose credentials need a check. Also returns the tickets of requests
    /// pushed out of the queue to make room for a retry: answer them `429` as turned away.
    func ask(ticket: UInt64, _ verification: AccessRules.Verification, host: [UInt8], now: Int64) -> (Outcome, pushedOut: [UInt64]) {
        let digest = digest(of: verification)
        if knownWrong.contains(digest) { return (.knownWrong, []) }
        let asker = Asker(host: host, user: verification.rules.users[verification.user] == nil ? nil : verification.user)
        if let checking, checking.check.digest == digest {
            checking.check.tickets.append(ticket)
            return (.waiting, [])
        }
        if queues[asker] == nil { makeRoom(now: now) }
        var queue = queues[asker, default: Queue()]
        defer { queues[asker] = queue }
        if let same = queue.checks.first(where: { $0.digest == digest }) {
            same.tickets.append(ticket)
            return (.waiting, [])
        }
        let isRetry = turnedAway.contains(digest)
        var pushedOut: [UInt64] = []
        if queue.checks.count >= Self.perAsker {
            // Full: a retry takes the place of the latest first attempt; anything else is turned away.
            guard isRetry, let last = queue.checks.lastIndex(where: { !$0.isRetry }) else {
                turnedAway.insert(digest)
                return (.turnedAway, [])
            }
            let removed = queue.checks.remove(at: last)
            turnedAway.insert(removed.digest)
            pushedOut = removed.tickets
        }
        let check = Check(digest: digest, verification: verification, isRetry: isRetry, ticket: ticket)
        let position = isRetry ? (queue.checks.firstIndex { !$0.isRetry } ?? queue.checks.count) : queue.checks.count
        queue.checks.insert(check, at: position)
        return (.waiting, pushedOut)
    }

    /// The next check to hand to the worker (nil: one is there already, or none waits): the first
    /// of the asker with the fewest recent failures, ties to the one served longest ago.
    func next(now: Int64) -> (id: UInt64, verification: AccessRules.Verification)? {
        guard checking == nil else { return nil }
        var best: (asker: Asker, failures: Double, served: UInt64)?
        for (asker, queue) in queues where !queue.checks.isEmpty {
            let failures = queue.failures.value(now: now)
            if let current = best, (current.failures, current.served) <= (failures, queue.served) { continue }
            best = (asker, failures, queue.served)
        }
        guard let asker = best?.asker, var queue = queues[asker] else { return nil }
        sequence += 1
        let check = queue.checks.removeFirst()
        queue.served = sequence
        queues[asker] = queue
        checking = (sequence, asker, check)
        return (sequence, check.verification)
    }

    /// The check `id` came back: the tickets that waited on it. A password that did not match is
    /// remembered as wrong, and counts against its asker.
    func finish(id: UInt64, matched: Bool, now: Int64) -> [UInt64] {
        guard let checking, checking.id == id else { return [] }
        self.checking = nil
        if !matched {
            knownWrong.insert(checking.check.digest)
            queues[checking.asker, default: Queue()].failures.add(now: now)
        }
        return checking.check.tickets
    }

    /// A request that stopped waiting (its connection closed or its wait ran out): its check is
    /// dropped when no one else waits on it, and its credentials count as turned away.
    func withdraw(ticket: UInt64) {
        if let checking, let index = checking.check.tickets.firstIndex(of: ticket) {
            checking.check.tickets.remove(at: index)  // the worker has it: its answer still counts
            return
        }
        for (asker, queue) in queues {
            guard let index = queue.checks.firstIndex(where: { $0.tickets.contains(ticket) }) else { continue }
            let check = queue.checks[index]
            check.tickets.removeAll { $0 == ticket }
            if check.tickets.isEmpty {
                queues[asker]?.checks.remove(at: index)
                turnedAway.insert(check.digest)
            }
            return
        }
    }

    /// Forgets askers with nothing waiting, fewest failures first, until there is room for one more.
    private func makeRoom(now: Int64) {
        guard queues.count >= Self.maxAskers else { return }
        let idle = queues.filter { $0.value.checks.isEmpty && $0.key != checking?.asker }
            .map { (asker: $0.key, failures: $0.value.failures.value(now: now)) }
            .sorted { $0.failures < $1.failures }
        for entry in idle.prefix(queues.count - Self.maxAskers + 1) { queues[entry.asker] = nil }
    }

    /// A salted digest of the credentials and the hash they are checked against.
    private func digest(of verification: AccessRules.Verification) -> [UInt8] {
        let hash = verification.rules.users[verification.user] ?? verification.rules.unknownUserSetting
        return OpenSSL.sha256([salt, verification.user, [0], Array(hash.utf8), [0], verification.password])
    }
}

/// A count whose every unit halves each `halfLifeMillis`: recent failures weigh, old ones fade.
struct DecayingCount {
    static let halfLifeMillis: Double = 60_000
    private var amount: Double = 0
    private var at: Int64 = 0

    func value(now: Int64) -> Double {
        amount * exp2(-Double(max(0, now - at)) / Self.halfLifeMillis)
    }

    mutating func add(now: Int64) {
        amount = value(now: now) + 1
        at = now
    }
}

/// A set of digests that forgets the oldest past `capacity`.
struct DigestRing {
    private var members: Set<[UInt8]> = []
    private var order: [[UInt8]] = []
    private var next = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    func contains(_ digest: [UInt8]) -> Bool { members.contains(digest) }

    mutating func insert(_ digest: [UInt8]) {
        guard members.insert(digest).inserted else { return }
        if order.count < capacity {
            order.append(digest)
        } else {
            members.remove(order[next])
            order[next] = digest
            next = (next + 1) % capacity
        }
    }
}
