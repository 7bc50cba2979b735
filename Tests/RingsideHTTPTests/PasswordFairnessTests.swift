import RingsideSystem
import Foundation
import Glibc
@testable import RingsideHTTP
import RingsideSnapshot
import RingsideTestSupport
import Synchronization
import Testing

/// The order of the password checks (`PasswordDesk`), step by step, then a real server under a
/// flood of wrong passwords while a scraper whose password was never verified scrapes each second.
@Suite("Passwords are checked fairly: a flood of wrong ones cannot keep a right one out")
struct PasswordFairnessTests {
    /// Rules with two users (the hashes are never computed here: the desk only orders checks).
    static let rules: AccessRules = {
        let hash = "$2y$12$zvWwBPyUnYGVygRW3yflSO6oEQBKWMvEkQncMQqg5pJ1RS9FVkYfy"
        return AccessRules(try! WebConfig.parse("basic_auth_users:\n  prometheus: \(hash)\n  grafana: \(hash)\n", directory: "/"))
    }()

    static let scraperHost: [UInt8] = [127, 0, 0, 1]
    static let otherHost: [UInt8] = [127, 0, 0, 2]

    func credentials(_ user: String, _ password: String) -> AccessRules.Verification {
        .init(user: Array(user.utf8), password: Array(password.utf8), rules: Self.rules)
    }

    @Test("an asker that has not failed is checked before every asker that has, however many requests they sent")
    func freshAskersGoFirst() {
        let desk = PasswordDesk()
        var ticket: UInt64 = 0
        func ask(_ user: String, _ password: String, host: [UInt8]) -> PasswordDesk.Outcome {
            ticket += 1
            return desk.ask(ticket: ticket, credentials(user, password), host: host, now: 0).0
        }
        // A guesser from another host, and one with unknown names from the scraper's own host: each fails once.
        #expect(ask("prometheus", "guess-1", host: Self.otherHost) == .waiting)
        #expect(ask("nobody-1", "guess", host: Self.scraperHost) == .waiting)
        for _ in 0..<2 {
            let check = desk.next(now: 0)!
            #expect(!desk.finish(id: check.id, matched: false, now: 0).isEmpty)
        }
        for n in 2...4 {
            #expect(ask("prometheus", "guess-\(n)", host: Self.otherHost) == .waiting)
            #expect(ask("nobody-\(n)", "guess", host: Self.scraperHost) == .waiting)
        }
        #expect(ask("prometheus", "right", host: Self.scraperHost) == .waiting)
        let next = desk.next(now: 1)
        #expect(next.map { String(decoding: $0.verification.password, as: UTF8.self) } == "right")
    }

    @Test("a wrong password asked again is refused at once; the same credentials asked together wait on one check")
    func knownWrongAndShared() {
        let desk = PasswordDesk()
        for ticket in 1...3 as ClosedRange<UInt64> {
            #expect(desk.ask(ticket: ticket, credentials("prometheus", "guess"), host: Self.otherHost, now: 0).0 == .waiting)
        }
        let check = desk.next(now: 0)!
        #expect(desk.next(now: 0)?.id == nil, "one check at a time")
        #expect(desk.finish(id: check.id, matched: false, now: 0) == [1, 2, 3])
        #expect(desk.ask(ticket: 4, credentials("prometheus", "guess"), host: Self.scraperHost, now: 0).0 == .knownWrong)
        #expect(desk.next(now: 0)?.id == nil)
    }

    @Test(
        "past 4 waiting for one host and user, a request is turned away; asked again, it takes the place of the latest first attempt, and goes first"
    )
    func retriesGoAheadOfGuesses() {
        let desk = PasswordDesk()
        for ticket in 1...UInt64(PasswordDesk.perAsker) {
            #expect(desk.ask(ticket: ticket, credentials("prometheus", "guess-\(ticket)"), host: Self.scraperHost, now: 0).0 == .waiting)
        }
        #expect(desk.ask(ticket: 10, credentials("prometheus", "right"), host: Self.scraperHost, now: 0) == (.turnedAway, []))
        #expect(
            desk.ask(ticket: 11, credentials("grafana", "other"), host: Self.scraperHost, now: 0).0 == .waiting, "another user waits apart")
        let (outcome, pushedOut) = desk.ask(ticket: 12, credentials("prometheus", "right"), host: Self.scraperHost, now: 0)
        #expect(outcome == .waiting && pushedOut == [UInt64(PasswordDesk.perAsker)])
        var order: [String] = []
        while let check = desk.next(now: 0) {
            order.append(String(decoding: check.verification.password, as: UTF8.self))
            _ = desk.finish(id: check.id, matched: false, now: 0)
        }
        #expect(order.first == "right" || order.prefix(2).contains("right"), "\(order)")
        #expect(order.firstIndex(of: "right")! < order.firstIndex(of: "guess-1")!, "\(order)")
    }

    @Test("a request that stops waiting leaves the desk; its credentials asked again count as a retry")
    func withdrawn() {
        let desk = PasswordDesk()
        #expect(desk.ask(ticket: 1, credentials("prometheus", "right"), host: Self.scraperHost, now: 0).0 == .waiting)
        desk.withdraw(ticket: 1)
        #expect(desk.next(now: 0)?.id == nil)
        for ticket in 2...UInt64(PasswordDesk.perAsker + 1) {
            _ = desk.ask(ticket: ticket, credentials("prometheus", "guess-\(ticket)"), host: Self.scraperHost, now: 0)
        }
        let (outcome, pushedOut) = desk.ask(ticket: 20, credentials("prometheus", "right"), host: Self.scraperHost, now: 0)
        #expect(outcome == .waiting && pushedOut.count == 1)
    }

    /// Who floods: the address it comes from, and the user and password of its `n`th request.
    typealias Attacker = (source: String, user: @Sendable (Int) -> String, password: @Sendable (Int) -> String)

    /// Runs a server whose users are `prometheus` (password `right`) and `grafana`, hashed at cost
    /// 12 by `htpasswd -B -C 12`, floods it with `attackers` at 100 requests a second in all (40
    /// threads, each a request every 400 ms on a new connection, waiting 1 s at most for its
    /// answer), and meanwhile scrapes `/metrics` from 127.0.0.1 as `prometheus` each second,
    /// `scrapes` times, waiting up to 10 s for each answer. Nil when the tools are missing.
    func scrapeUnderFlood(
        _ attackers: [Attacker], scrapes: Int
    ) throws -> (statuses: [Int?], summary: String, counters: WebSecurityStats)? {
        guard let fixtures = try TLSFixtures.make() else { return nil }
        defer { fixtures.remove() }
        let config =
            "basic_auth_users:\n  prometheus: \(try fixtures.bcrypt("right", cost: 12))\n  grafana: \(try fixtures.bcrypt("g", cost: 12))\n"
        let security = try WebSecurity(path: try fixtures.write("web.yml", config))
        let server = try HTTPServer(listen: "127.0.0.1:0", security: security, quick: testQuick, handler: testRoutes)
        defer { server.stop() }
        try server.start()
        let port = server.boundPort
        let flood = Flood()
        let threads = 40
        let started = monotonicSeconds()
        for index in 0..<threads {
            let attacker = attackers[index % attackers.count]
            Thread.detachNewThread {
                var n = index << 20
                while !flood.stopped {
                    let started = monotonicSeconds()
                    n += 1
                    let status = try? sendOnce(
                        port: port, source: attacker.source, user: attacker.user(n), password: attacker.password(n), timeout: 1)
                    flood.count(status)
                    let left = 0.4 - (monotonicSeconds() - started)
                    if left > 0 { usleep(UInt32(left * 1e6)) }
                }
                flood.finished()
            }
        }
        defer { flood.stop(threads: threads) }
        sleep(1)  // the flood is on before the first scrape
        var statuses: [Int?] = []
        for _ in 0..<scrapes {
            let started = monotonicSeconds()
            statuses.append(try? sendOnce(port: port, source: "127.0.0.1", user: "prometheus", password: "right", timeout: 10))
            let left = 1 - (monotonicSeconds() - started)
            if left > 0 { usleep(UInt32(left * 1e6)) }
        }
        flood.stop(threads: threads)
        let rate = Double(flood.statuses.values.reduce(0, +)) / (monotonicSeconds() - started)
        let counters = security.counters
        return (statuses, "scrapes \(statuses), flood \(flood.statuses) (\(Int(rate)) a second), counters \(counters)", counters)
    }

    /// The issue's attack, and more: 100 wrong passwords a second over new connections, from
    /// another host under the scraper's user name, from the scraper's host under unknown names
    /// and under another user's, and the scraper's own user with one wrong password over and
    /// over; meanwhile a scraper whose password was never verified scrapes each second.
    @Test(
        "under 100 wrong passwords a second (bcrypt cost 12), a never-verified right password gets at least 95 % of scrapes at 1 s through")
    func floodCannotKeepTheRightOneOut() throws {
        let attackers: [Attacker] = [
            ("127.0.0.2", { _ in "prometheus" }, { "guess-\($0)" }),
            ("127.0.0.1", { "user-\($0)" }, { "guess-\($0)" }),
            ("127.0.0.1", { _ in "prometheus" }, { _ in "guess" }),
            ("127.0.0.1", { _ in "grafana" }, { "guess-\($0)" }),
        ]
        guard let (statuses, summary, counters) = try scrapeUnderFlood(attackers, scrapes: 20) else { return }
        let through = statuses.filter { $0 == 200 }.count
        #expect(through >= 19, "\(through) of 20 scrapes through: \(summary)")
        // The flood was real: wrong passwords were refused by the hundred, and checked with bcrypt.
        #expect(counters.authWrong + counters.authThrottled >= 500, "\(summary)")
        #expect(counters.passwordChecks >= 10, "\(summary)")
    }

    /// What no server can tell from the scraper without a check: guesses at the scraper's own
    /// address under its own name. The scraper's password, turned away once, goes ahead of them
    /// when asked again.
    @Test("guesses from the scraper's own address under its own name cost a never-verified scraper one scrape at most")
    func guessesUnderTheScrapersName() throws {
        let attackers: [Attacker] = [("127.0.0.1", { _ in "prometheus" }, { "guess-\($0)" })]
        guard let (statuses, summary, counters) = try scrapeUnderFlood(attackers, scrapes: 8) else { return }
        #expect(statuses.dropFirst().allSatisfy { $0 == 200 }, "every scrape after the first gets through: \(summary)")
        #expect(counters.authThrottled >= 100, "\(summary)")
    }
}

/// One request on a new connection from `source`; its status (nil: none within `timeout` seconds).
private func sendOnce(port: Int, source: String, user: String, password: String, timeout: Int) throws -> Int? {
    let client = try RawClient(port: port, timeoutSeconds: timeout, source: source)
    let token = Data("\(user):\(password)".utf8).base64EncodedString()
    try client.send("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(token)\r\nConnection: close\r\n\r\n")
    return client.readStatus()
}

/// The flood's threads: a stop flag, the statuses they got, and how many have finished.
private final class Flood: Sendable {
    private let state = Locked<(stopped: Bool, finished: Int, statuses: [Int: Int])>((false, 0, [:]))

    var stopped: Bool { state.withLock { $0.stopped } }
    var statuses: [Int: Int] { state.withLock { $0.statuses } }

    /// Counts a status; none (a timeout) counts as 0.
    func count(_ status: Int??) { state.withLock { $0.statuses[(status ?? nil) ?? 0, default: 0] += 1 } }
    func finished() { state.withLock { $0.finished += 1 } }

    /// Stops the threads and waits (10 s at most) until `threads` have finished.
    func stop(threads: Int) {
        state.withLock { $0.stopped = true }
        _ = eventually(seconds: 10) { state.withLock { $0.finished >= threads } }
    }
}
