import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Testing

/// The real `ringside-collector`'s HTTP edge under hostile files and clients: slow readers of a
/// large capture or of a streamed page, a FIFO or another user's file as its web configuration, a stop while a costly
/// password is hashed.
@Suite("The collector's HTTP edge: captures streamed, web configuration files refused, SIGTERM prompt")
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

    /// `count` clients of a 4 KiB receive window that each ask for `path`: the caller reads each
    /// one's status line, then nothing more, so what it was sent stays in the collector, or not.
    func slowReaders(_ count: Int, port: Int, path: String) throws -> [RawClient] {
        try (0..<count).map { _ in
            let reader = try RawClient(port: port, timeoutSeconds: 20, receiveBuffer: 4096)
            try reader.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
            return reader
        }
    }

    @Test(
        "64 slow readers of a 16 MiB capture file: the collector's anonymous memory grows by less than two copies of it (not 64), the rest are told 503 to retry, and /health answers meanwhile"
    )
    func slowReadersOfALargeCapture() throws {
        let captures = try TemporaryDirectory("ringside-captures")
        defer { captures.remove() }
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(
                ["--dir", directory.path, "--poll", "10ms", "--capture-dir", captures.path, "--capture-after", "100ms"])
            defer { collector.kill() }
            let bot = try CaptureProbe.kitBot("big-bot", in: directory, count: 100, start: 1000, step: 1)
            defer { bot.kill() }
            _ = try eventually(seconds: 30) {
                try CaptureProbe.totalCount(port: port, ring: "big-bot", metric: "order_fill_latency") == 100
            }
            try #require(try CaptureProbe.post(port: port, path: "/api/capture?bot=big-bot").status == 202)
            let capture = try #require(try CaptureProbe.finished(port: port, trigger: "request"))
            let name = try #require((capture["files"] as? [String])?.first { $0.hasSuffix(".hlog") })
            // The file grows to 16 MiB as the collector's own (one link, its owner): served as it is now.
            let size = 16 << 20
            let handle = try #require(FileHandle(forWritingAtPath: captures.path + "/" + name))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(repeating: UInt8(ascii: "#"), count: size))
            try handle.close()
            let whole = try httpGetWithHeaders(port: port, path: "/api/captures/" + name, timeoutSeconds: 30)
            #expect(whole.status == 200 && whole.body.count > size)
            let before = try #require(residentKiB(of: collector.pid)).anonymous

            var readers = try slowReaders(64, port: port, path: "/api/captures/" + name)
            let statuses = readers.map { $0.readStatus() }
            let during = try #require(residentKiB(of: collector.pid)).anonymous
            #expect(try httpGet(port: port, path: "/health").status == 200)
            let streaming = statuses.filter { $0 == 200 }.count
            #expect(streaming >= 1 && statuses.allSatisfy { $0 == 200 || $0 == 503 }, "\(statuses)")
            let grownMiB = Double(during - before) / 1024
            #expect(
                grownMiB < 32, "anonymous memory grew by \(grownMiB) MiB for \(streaming) slow readers of 16 MiB (before \(before) KiB)")
            readers.removeAll()
            #expect(try httpGetWithHeaders(port: port, path: "/api/captures/" + name, timeoutSeconds: 30).body.count == whole.body.count)
        }
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

    @Test(
        "8 slow readers of a plain /metrics page past what is kept: 4 are sent it as it is written, the rest told 503 with Retry-After; /health answers meanwhile, and once they go the page is whole again"
    )
    func slowReadersOfAStreamedPage() throws {
        try withRingDirectory { directory in
            // 2,000 histograms write some 9 MB of text; 32 MiB keep plain pages of 2 MiB at most.
            let holder = try ChildProcess(
                testProducer: "scale-series", ring: "paged", in: directory, ["--series", "2000", "--metrics", "2000", "--first", "0"])
            defer {
                holder.send(SIGKILL)
                holder.waitForExit()
            }
            let ready = holder.readLine()
            try #require(ready?.hasPrefix("ready") == true, "\(ready ?? "no line"): \(holder.waitForExit().standardError)")
            let (collector, port) = try startCollector(["--dir", directory.path, "--max-series-bytes", "32M", "--poll", "10ms"])
            defer { collector.kill() }
            let last = #"fill_latency_seconds_count{ring="paged0",symbol="S0001999"} 1"#
            let whole = eventually(seconds: 60) { () -> Int? in
                guard let page = try? httpGet(port: port, path: "/metrics", timeoutSeconds: 30), page.body.contains(last) else {
                    return nil
                }
                return page.body.utf8.count
            }
            let bytes = try #require(whole, "the 2,000 series never showed")
            #expect(bytes > 4 << 20, "\(bytes) bytes: a page the readers' windows cannot hold")

            var readers = try slowReaders(8, port: port, path: "/metrics")
            let statuses = readers.map { $0.readStatus() }
            #expect(statuses.filter { $0 == 200 }.count == 4 && statuses.filter { $0 == 503 }.count == 4, "\(statuses)")
            let refused = try httpGetWithHeaders(port: port, path: "/metrics")
            #expect(refused.status == 503 && refused.header("Retry-After") == "1", "\(refused.status) \(refused.text)")
            #expect(try httpGet(port: port, path: "/health").status == 200)
            readers.removeAll()
            let again = eventually(seconds: 30) { () -> Bool? in
                guard let page = try? httpGet(port: port, path: "/metrics", timeoutSeconds: 30), page.status == 200 else { return nil }
                return page.body.contains(last)
            }
            #expect(again == true, "the page was not served whole once the readers went")
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
