import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Testing

/// The real `ringside-collector`'s HTTP edge under hostile files and clients: a FIFO or another
/// user's file as its web configuration, a stop while a costly password is hashed.
@Suite("The collector's HTTP edge: web configuration files refused, SIGTERM prompt")
struct HTTPEdgeProcessTests {
    /// Waits for `collector` to exit after `signal`, 10 s at most (then it is killed and the test
    /// fails): its exit status, or nil.
    func stop(_ collector: ChildProcess, with signal: Int32 = SIGTERM) -> Int32? {
        let exited = DispatchSemaphore(value: 0)
        let status = LockedStatus()
        collector.send(signal)
        Thread.detachNewThread {
            status.set(collector.waitForExit().status)
            exited.signal()
        }
        guard exited.wait(timeout: .now() + 10) == .success else {
            Issue.record("the collector did not stop within 10 s of signal \(signal)")
            collector.kill()
            _ = exited.wait(timeout: .now() + 10)
            return nil
        }
        return status.value
    }

    @Test(
        "a FIFO, or a link to another user's file, as --web-config-file: the collector does not start (exit 2) and says what it is; a FIFO put there while it runs is refused unread, and SIGTERM stops it"
    )
    func fifoAndForeignWebConfig() throws {
        guard let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let fifo = fixtures.path("web.fifo")
        #expect(mkfifo(fifo, 0o666) == 0 && chown(fifo, 65534, 65534) == 0)
        let collector = try builtExecutable("ringside-collector")
        let atStart = try runProcess(collector, ["--listen", "127.0.0.1:0", "--web-config-file", fifo], timeoutSeconds: 20)
        #expect(atStart.status == 2, "\(atStart.errors)")
        #expect(atStart.errors.contains("\(fifo): is a FIFO (named pipe) owned by uid 65534"), "\(atStart.errors)")
        let theirs = try fixtures.write("theirs.yml", "")
        #expect(chown(theirs, 65534, 65534) == 0 && symlink(theirs, fixtures.path("link.yml")) == 0)
        let linked = try runProcess(
            collector, ["--listen", "127.0.0.1:0", "--web-config-file", fixtures.path("link.yml")], timeoutSeconds: 20)
        #expect(linked.status == 2 && linked.errors.contains("is owned by uid 65534"), "\(linked.errors)")

        let path = try fixtures.write("web.yml", "basic_auth_users:\n  alice: \(try fixtures.bcrypt("a-pass", cost: 4))\n")
        try withRingDirectory { directory in
            let (running, port) = try startCollector(["--dir", directory.path, "--web-config-file", path])
            defer { running.kill() }
            #expect(unlink(path) == 0 && mkfifo(path, 0o644) == 0)
            usleep(1_200_000)  // the next request looks at the files (once a second at most)
            let answered = (try? httpGet(port: port, path: "/metrics").status) == 401
            #expect(answered, "the server answers, the running configuration's password still asked")
            if answered {
                let line = running.waitForErrorLine(containing: "keeping the running configuration")
                #expect(line?.contains("is a FIFO (named pipe)") == true, "\(line ?? "")")
            }
            #expect((try? httpGet(port: port, path: "/health").status) == 200)
            #expect(stop(running) == 0)
        }
    }

    @Test("SIGTERM while a password is being hashed at a cost that takes minutes: the collector stops within seconds, not after the hash")
    func stopsWhileHashing() throws {
        guard let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        // A hash of cost 22 (its form is all the file's check asks): one check takes minutes.
        let slow = "$2y$22$" + String(repeating: "a", count: 53)
        let path = try fixtures.write("web.yml", "basic_auth_users:\n  alice: \(slow)\n")
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--web-config-file", path])
            defer { collector.kill() }
            let client = try RawClient(port: port, timeoutSeconds: 1)
            try client.send("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YWxpY2U6d3Jvbmc=\r\n\r\n")
            #expect(client.readStatus() == nil, "the check goes on")
            #expect(stop(collector) == 0)
        }
    }
}

/// An exit status set by one thread and read by another.
private final class LockedStatus: @unchecked Sendable {
    private let lock = NSLock()
    private var status: Int32?
    func set(_ value: Int32) { lock.withLock { status = value } }
    var value: Int32? { lock.withLock { status } }
}
