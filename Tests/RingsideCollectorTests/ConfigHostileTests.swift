import Foundation
import Glibc
import RingsideTestSupport
import Testing

/// Round four's configuration attack, against the real collector: a file of 25,000 nested list
/// items (50 KB) killed it with SIGSEGV (the reader's stack) at start, at a reload by SIGHUP or
/// `POST /-/reload`, and as the web configuration.
@Suite("A hostile configuration file is refused with its line; a reload of one leaves the collector running as it was")
struct ConfigHostileTests {
    /// The attack's file: `slo:` and a list nested 25,000 deep.
    static let deepFile = "slo:\n  " + String(repeating: "- ", count: 25_000) + "order_fill_latency:p99<1ms@1m\n"

    @Test("at start, as --config or as --web-config-file: one line naming the file and the line, exit status 2 or 1, no crash")
    func refusedAtStart() throws {
        try withRingDirectory { directory in
            let files = try TemporaryDirectory("ringside-hostile-config")
            defer { files.remove() }
            let path = files.path + "/deep.yml"
            try Self.deepFile.write(toFile: path, atomically: true, encoding: .utf8)

            let asConfig = try runProcess("ringside-collector", ["--dir", directory.path, "--config", path, "--listen", "127.0.0.1:0"])
            #expect(asConfig.status == 2, "exit status \(String(describing: asConfig.status)): \(asConfig.errors)")
            #expect(asConfig.errors.contains(path) && asConfig.errors.contains("line 2: nested more than"), "\(asConfig.errors)")

            let asWeb = try runProcess(
                "ringside-collector", ["--dir", directory.path, "--web-config-file", path, "--listen", "127.0.0.1:0"])
            #expect(asWeb.status == 1 || asWeb.status == 2, "exit status \(String(describing: asWeb.status)): \(asWeb.errors)")
            #expect(asWeb.errors.contains(path) && asWeb.errors.contains("nested more than"), "\(asWeb.errors)")
        }
    }

    @Test("a reload of the file, by SIGHUP and by POST /-/reload, is refused; the collector keeps serving its SLOs")
    func refusedAtReload() throws {
        try withRingDirectory { directory in
            let files = try TemporaryDirectory("ringside-hostile-config")
            defer { files.remove() }
            let path = files.path + "/collector.yml"
            try "slo: [order_fill_latency:p99<100us@1m]\nweb-enable-lifecycle: true\n".write(
                toFile: path, atomically: true, encoding: .utf8)
            let (collector, port) = try startCollector(["--config", path, "--dir", directory.path])
            defer { collector.kill() }

            try (Self.deepFile + "web-enable-lifecycle: true\n").write(toFile: path, atomically: true, encoding: .utf8)
            collector.send(SIGHUP)
            let refused = collector.waitForErrorLine(containing: "reload refused")
            #expect(refused?.contains("nested more than") == true, "\(String(describing: refused))")
            let client = try RawClient(port: port, timeoutSeconds: 15)
            try client.send("POST /-/reload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            let answer = try client.readResponse()
            #expect(answer.status == 500 && answer.text.contains("line 2"), "\(answer.status) \(answer.text)")

            #expect(try httpGet(port: port, path: "/health").status == 200)
            let slos = try jsonObject(httpGet(port: port, path: "/latest").body)["slos"] as? [[String: Any]]
            #expect(slos?.compactMap { $0["rule"] as? String } == ["order_fill_latency:p99<100us@1m"], "the running SLOs stay")
        }
    }

    @Test("the web configuration changed to the file while the collector runs: kept as it was, the collector serving")
    func webConfigReread() throws {
        try withRingDirectory { directory in
            let files = try TemporaryDirectory("ringside-hostile-config")
            defer { files.remove() }
            let path = files.path + "/web.yml"
            try "http_server_config:\n  headers: {X-Frame-Options: deny}\n".write(toFile: path, atomically: true, encoding: .utf8)
            let (collector, port) = try startCollector(["--web-config-file", path, "--dir", directory.path])
            defer { collector.kill() }

            try Self.deepFile.write(toFile: path, atomically: true, encoding: .utf8)
            // The files are looked at when a request comes, at most once a second.
            usleep(1_200_000)
            _ = try httpGet(port: port, path: "/health")
            let line = collector.waitForErrorLine(containing: "keeping the running configuration")
            #expect(line?.contains("nested more than") == true, "\(String(describing: line))")
            let headers = try httpGetWithHeaders(port: port, path: "/health")
            #expect(headers.status == 200 && headers.header("X-Frame-Options") == "deny", "the running configuration stays")
        }
    }

    @Test(
        "a --config that is a FIFO, another user's file or one others can write is refused at start with one line, and at a reload the running configuration stays",
        arguments: ["fifo", "nobody's", "group-writable"])
    func untrustedConfigFile(_ kind: String) throws {
        guard try requiredRoot("a file of user nobody") else { return }
        try withRingDirectory { directory in
            let files = try TemporaryDirectory("ringside-hostile-config")
            defer { files.remove() }
            try #require(chmod(files.path, 0o1777) == 0)
            let path = files.path + "/collector.yml"
            func plant() throws {
                try? FileManager.default.removeItem(atPath: path)
                switch kind {
                case "fifo": try #require(try plantAsNobody(.fifo, at: path))
                case "nobody's":
                    try "slo: [order_fill_latency:p99<1ms@1m]\n".write(toFile: path, atomically: false, encoding: .utf8)
                    try #require(chown(path, 65534, 65534) == 0)
                default:
                    try "slo: [order_fill_latency:p99<1ms@1m]\n".write(toFile: path, atomically: false, encoding: .utf8)
                    try #require(chmod(path, 0o664) == 0)
                }
            }
            try plant()
            let started = try runProcess(
                "ringside-collector", ["--dir", directory.path, "--config", path, "--listen", "127.0.0.1:0"], timeoutSeconds: 30)
            #expect(started.status == 2, "\(kind): \(String(describing: started.status)) \(started.errors)")
            let expected =
                kind == "fifo" ? "is a FIFO (named pipe) owned by uid 65534" : kind == "nobody's" ? "owned by uid 65534" : "mode 0664"
            #expect(started.errors.contains(path) && started.errors.contains(expected), "\(started.errors)")

            try? FileManager.default.removeItem(atPath: path)
            try "slo: [order_fill_latency:p99<100us@1m]\n".write(toFile: path, atomically: false, encoding: .utf8)
            let (collector, port) = try startCollector(["--config", path, "--dir", directory.path])
            defer { collector.kill() }
            func runningRules() -> [String]? {
                let latest = (try? httpGet(port: port, path: "/latest"))?.body ?? ""
                let slos = (try? jsonObject(latest))?["slos"] as? [[String: Any]]
                return slos?.compactMap { $0["rule"] as? String }
            }
            // Shown before the reload (the first snapshot can come after the listener answers).
            let rule = "order_fill_latency:p99<100us@1m"
            try #require(eventually(seconds: 30) { runningRules() == [rule] }, "\(String(describing: runningRules()))")
            try plant()
            collector.send(SIGHUP)
            let refused = collector.waitForErrorLine(containing: "reload refused")
            #expect(refused?.contains(expected) == true, "\(String(describing: refused))")
            #expect(runningRules() == [rule], "the running SLOs stay")
        }
    }
}
