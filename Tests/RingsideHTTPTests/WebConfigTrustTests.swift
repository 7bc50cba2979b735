import Dispatch
import Foundation
import Glibc
@testable import RingsideHTTP
import RingsideTestSupport
import Testing

/// The web configuration and the files it names, checked as sshd checks its keys: each test plants
/// what another user could (a FIFO, a file or link of uid 65534, a group-writable file, a
/// directory others can write) and expects a refusal at once that names it, never a wait.
@Suite("The web configuration's files: trusted only when no other user could change them, never waited on")
struct WebConfigTrustTests {
    static let nobody: uid_t = 65534

    /// The fixtures' TLS lines, and a user, so a configuration loads whole.
    static func config(_ fixtures: TLSFixtures, extra: String = "") throws -> String {
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\(extra)basic_auth_users:\n  alice: "
            + (try fixtures.bcrypt("a-pass", cost: 4)) + "\n"
    }

    /// `WebSecurity.check(path:)`'s refusal, made on a thread of its own: if it has not returned
    /// within 10 s (it waits on a FIFO), the test fails and the FIFO's reader is let go by a
    /// writer that opens and closes it.
    func refusal(_ path: String, fifo: String? = nil) -> String? {
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do { try WebSecurity.check(path: path) } catch { outcome.set("\(error)") }
            done.signal()
        }
        if done.wait(timeout: .now() + 10) == .timedOut {
            Issue.record("the check of \(path) has not returned in 10 s: it waits on the FIFO")
            if let fifo {
                let writer = open(fifo, O_WRONLY | O_NONBLOCK)
                if writer >= 0 { close(writer) }
            }
            _ = done.wait(timeout: .now() + 10)
        }
        return outcome.value
    }

    @Test(
        "a FIFO at the web configuration's path, or at its cert_file, key_file or client_ca_file, is refused at once as a FIFO of its owner"
    )
    func fifosAreRefusedUnopened() throws {
        guard let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let fifo = fixtures.path("planted.fifo")
        #expect(mkfifo(fifo, 0o666) == 0 && chown(fifo, Self.nobody, Self.nobody) == 0)
        let cases: [(name: String, config: String, reason: String)] = [
            ("the file", "", "is a FIFO (named pipe) owned by uid 65534, not a regular file of \(TrustedFile.trustedOwnersText)"),
            ("cert_file", "tls_server_config:\n  cert_file: planted.fifo\n  key_file: server.key\n", "cert_file \(fifo): is a FIFO"),
            ("key_file", "tls_server_config:\n  cert_file: server.crt\n  key_file: planted.fifo\n", "key_file \(fifo): is a FIFO"),
            (
                "client_ca_file",
                "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n"
                    + "  client_ca_file: planted.fifo\n",
                "client_ca_file \(fifo): is a FIFO"
            ),
        ]
        for sample in cases {
            let path = sample.config.isEmpty ? fifo : try fixtures.write("web-\(sample.name).yml", sample.config)
            let reason = refusal(path, fifo: fifo)
            #expect(reason?.contains(sample.reason) == true, "\(sample.name): \(reason ?? "accepted")")
        }
    }

    @Test(
        "another user's file, a group- or world-writable one, a link to another user's file, another user's link, a directory others can write or another user owns: each refused saying who and what to do"
    )
    func untrustedFilesAreRefused() throws {
        guard let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let good = try fixtures.write("web.yml", try Self.config(fixtures))
        #expect(refusal(good) == nil, "root's own file, mode 0644, in root's 0700 directory")

        #expect(chown(good, Self.nobody, Self.nobody) == 0)
        #expect(refusal(good)?.contains("is owned by uid 65534, not by the collector's \(TrustedFile.trustedOwnersText)") == true)
        #expect(chown(good, 0, 0) == 0 && chmod(good, 0o664) == 0)
        #expect(refusal(good)?.contains("has mode 0664: writable by its group (gid 0), who could change") == true, "\(refusal(good) ?? "")")
        #expect(chmod(good, 0o646) == 0)
        #expect(refusal(good)?.contains("has mode 0646: writable by others") == true)
        #expect(chmod(good, 0o644) == 0)

        // The issue's attack: a link to a file another user can edit.
        let theirs = try fixtures.write("theirs.yml", "")
        #expect(chown(theirs, Self.nobody, Self.nobody) == 0)
        #expect(symlink(theirs, fixtures.path("link.yml")) == 0)
        #expect(refusal(fixtures.path("link.yml"))?.contains("owned by uid 65534") == true)
        // A link of theirs to a good file: they could point it elsewhere.
        #expect(
            symlink(good, fixtures.path("their-link.yml")) == 0 && lchown(fixtures.path("their-link.yml"), Self.nobody, Self.nobody) == 0)
        let theirLink = refusal(fixtures.path("their-link.yml"))
        #expect(theirLink?.contains("the symbolic link \(fixtures.path("their-link.yml")) on its path is owned by uid 65534") == true)

        // A directory on the path that others can write (not sticky), or another user owns.
        let open = fixtures.path("open")
        #expect(mkdir(open, 0o755) == 0 && chmod(open, 0o777) == 0)
        let inOpen = try fixtures.write(
            "open/web.yml", try Self.config(fixtures).replacingOccurrences(of: ": server.", with: ": ../server."))
        #expect(
            refusal(inOpen)?.contains("the directory \(open) on its path has mode 0777: writable by its group (gid 0) and others") == true)
        #expect(chmod(open, 0o1777) == 0)
        #expect(refusal(inOpen) == nil, "sticky, as /tmp: others cannot replace what is not theirs")
        #expect(chmod(open, 0o755) == 0 && chown(open, Self.nobody, Self.nobody) == 0)
        #expect(refusal(inOpen)?.contains("the directory \(open) on its path is owned by uid 65534") == true)
        // A link in a trusted directory to a file in that directory: its directory is checked too.
        #expect(symlink(inOpen, fixtures.path("to-open.yml")) == 0)
        #expect(refusal(fixtures.path("to-open.yml"))?.contains("the directory \(open) on its path is owned by uid 65534") == true)

        // A certificate file the configuration names, group-writable.
        #expect(chmod(fixtures.path("server.key"), 0o620) == 0)
        #expect(refusal(good)?.contains("key_file \(fixtures.path("server.key")): has mode 0620: writable by its group") == true)
    }

    @Test("a web configuration over 1 MiB is refused, read no further; an encrypted key is refused, never asked for")
    func hugeAndEncryptedFiles() throws {
        guard let fixtures = try TLSFixtures.make(), let openssl = try requiredSystemTool("openssl") else { return }
        defer { fixtures.remove() }
        let huge = try fixtures.write("huge.yml", "# " + String(repeating: "x", count: 2 << 20) + "\n")
        #expect(refusal(huge)?.contains("larger than 1 MiB") == true)
        let encrypted = fixtures.path("encrypted.key")
        let made = try runProcess(
            openssl, ["pkey", "-in", fixtures.path("server.key"), "-aes256", "-passout", "pass:secret", "-out", encrypted],
            mergingErrors: true)
        try #require(made.status == 0, "\(made.output)")
        let path = try fixtures.write("encrypted.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: encrypted.key\n")
        #expect(refusal(path)?.contains("key_file \(encrypted): not a PEM private key (or an encrypted one)") == true)
    }

    @Test("a certificate file with its chain after it, and a client CA file of two CAs, load from memory as from the files")
    func chainsAndBundlesLoad() throws {
        guard let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let chain =
            try String(contentsOfFile: fixtures.path("server.crt"), encoding: .utf8)
            + String(contentsOfFile: fixtures.path("ca.crt"), encoding: .utf8)
        try fixtures.write("chain.crt", chain)
        let bundle =
            try String(contentsOfFile: fixtures.path("other-ca.crt"), encoding: .utf8)
            + String(contentsOfFile: fixtures.path("ca.crt"), encoding: .utf8)
        try fixtures.write("bundle.crt", bundle)
        let text =
            "tls_server_config:\n  cert_file: chain.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n"
            + "  client_ca_file: bundle.crt\n"
        #expect(refusal(try fixtures.write("chain.yml", text)) == nil)
        try fixtures.write("broken.crt", chain + "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
        let broken = refusal(try fixtures.write("broken.yml", "tls_server_config:\n  cert_file: broken.crt\n  key_file: server.key\n"))
        #expect(broken?.contains("a certificate of its chain is not PEM") == true, "\(broken ?? "accepted")")
    }

    @Test(
        "at a re-read, a link to another user's file that opens the endpoint is refused: the running passwords stay, logged once, counted; a FIFO put there waits nothing and the server stops at once"
    )
    func reloadRefusesUntrustedVersions() throws {
        guard let curlPath = try requiredSystemTool("curl"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let lines = CapturedLines()
        let path = try fixtures.write("web.yml", "basic_auth_users:\n  alice: \(try fixtures.bcrypt("a-pass", cost: 4))\n")
        let security = try WebSecurity(path: path, openPaths: ["/health"])
        let server = try HTTPServer(listen: "127.0.0.1:0", log: lines.log, security: security, quick: testQuick, handler: testRoutes)
        try server.start()
        let url = "http://127.0.0.1:\(server.boundPort)/metrics"
        #expect(try curl(curlPath, url).status == 401)

        // Another user's file, with no users: were it read, /metrics would be open to all.
        let theirs = try fixtures.write("theirs.yml", "http_server_config:\n  http2: true\n")
        #expect(chown(theirs, Self.nobody, Self.nobody) == 0)
        #expect(rename(try makeLink(to: theirs, in: fixtures), path) == 0)
        let refused = eventually(seconds: 10) {
            _ = try? curl(curlPath, url)
            return security.counters.reloadFailures == 1
        }
        #expect(refused)
        #expect(try curl(curlPath, url).status == 401, "the running configuration's password is still asked")
        #expect(try curl(curlPath, url, ["-u", "alice:a-pass"]).status == 200)
        let said = lines.all.filter { $0.contains("keeping the running configuration") }
        #expect(said.count == 1 && said[0].contains("owned by uid 65534"), "\(lines.all)")

        // Then a FIFO: refused unopened; the loop keeps answering; stop returns at once.
        #expect(unlink(path) == 0 && mkfifo(path, 0o644) == 0)
        let fifoRefused = eventually(seconds: 10) {
            _ = try? curl(curlPath, url)
            return security.counters.reloadFailures == 2
        }
        #expect(fifoRefused)
        #expect(try curl(curlPath, "http://127.0.0.1:\(server.boundPort)/health").status == 200)
        #expect(lines.all.contains { $0.contains("is a FIFO (named pipe)") })
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            server.stop()
            stopped.signal()
        }
        #expect(stopped.wait(timeout: .now() + 10) == .success, "the server did not stop")
    }

    /// A link (root's) to `target`, made beside it under a fresh name.
    private func makeLink(to target: String, in fixtures: TLSFixtures) throws -> String {
        let link = fixtures.path("link-\(UInt32.random(in: 0...UInt32.max)).yml")
        guard symlink(target, link) == 0 else { throw TestSupportError("symlink: errno \(errno)") }
        return link
    }
}

/// A value set by one thread and read by another.
private final class Outcome: @unchecked Sendable {
    private let lock = NSLock()
    private var text: String?
    func set(_ value: String) { lock.withLock { text = value } }
    var value: String? { lock.withLock { text } }
}
