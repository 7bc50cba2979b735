import Foundation
import RingsideTestSupport
import Testing

@Suite("the systemd unit")
struct SystemdUnitTests {
    @Test("the unit file names its hardening lines, keeps /dev/shm shared, and explains RemoveIPC (read from the file, not run)")
    func unitFileNamesItsHardening() throws {
        let text = try String(contentsOfFile: kitFile("tools/systemd/ringside-collector.service"), encoding: .utf8)
        let settings = Set(text.split(separator: "\n").filter { !$0.hasPrefix("#") && $0.contains("=") }.map(String.init))
        for line in [
            "NoNewPrivileges=yes", "ProtectSystem=strict", "ReadWritePaths=/dev/shm", "ProtectHome=yes",
            "PrivateTmp=yes", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "MemoryDenyWriteExecute=yes",
            "SystemCallFilter=@system-service", "RemoveIPC=no", "CapabilityBoundingSet=",
        ] {
            #expect(settings.contains(line), "missing \(line)")
        }
        // A private /dev would hide the bots' rings.
        #expect(!settings.contains("PrivateDevices=yes"))
        #expect(settings.contains { $0.hasPrefix("User=") })
        #expect(settings.contains { $0.hasPrefix("ExecStart=/usr/local/bin/ringside-collector") })
        #expect(text.contains("RemoveIPC") && text.contains("logind"))
    }
}

extension SystemdUnitTests {
    /// The shipped unit and configuration, as an operator installs them, in a machine booted by
    /// systemd: the collector's user, a bot of another user sharing its group, the collector's
    /// figures of it, a restart, a reload, and systemd's own rating of the hardening.
    @Test(
        "the shipped unit runs under a real systemd: it serves, sees another user's bot with its process and thread figures, restarts, reloads, and rates OK or better",
        .timeLimit(.minutes(5)))
    func unitRunsUnderSystemd() throws {
        guard try requiredRoot("booting a container with systemd-nspawn"), let nspawn = try requiredSystemTool("systemd-nspawn") else {
            return
        }
        let collector = try builtExecutable("ringside-collector"), producer = try builtExecutable("ringside-test-producer")
        // The Swift runtime the test's builds link (a release built with --static-swift-stdlib needs none).
        var binds = [
            (collector, "/usr/local/bin/ringside-collector"), (producer, "/usr/local/bin/ringside-test-producer"),
            (kitFile("tools/systemd/ringside-collector.service"), "/etc/systemd/system/ringside-collector.service"),
        ]
        let ldd = try runProcess("/usr/bin/ldd", [collector])
        if let library = ldd.outputLines.first(where: { $0.contains("libswiftCore.so") })?.split(separator: " ").dropFirst(2).first {
            let directory = (String(library) as NSString).deletingLastPathComponent
            binds.append((directory, directory))
        }
        let machine = try SystemdContainer(nspawn: nspawn, binds: binds)
        defer { machine.stop() }

        // As the unit's head says: its user; then its configuration, allowing the bot's user.
        try #require(try machine.run(["useradd", "--system", "--user-group", "trading"]).status == 0)
        try #require(try machine.run(["useradd", "--uid", "1500", "--gid", "trading", "--no-create-home", "bot1"]).status == 0)
        let shipped = try String(contentsOfFile: kitFile("tools/systemd/collector.yml"), encoding: .utf8)
        try #require(shipped.contains("# allow-uid: [1500]"))
        try FileManager.default.createDirectory(atPath: machine.path("/etc/ringside"), withIntermediateDirectories: true)
        try shipped.replacingOccurrences(of: "# allow-uid: [1500]", with: "allow-uid: [1500]")
            .write(toFile: machine.path("/etc/ringside/collector.yml"), atomically: true, encoding: .utf8)
        let started = try machine.run(["systemctl", "start", "ringside-collector"])
        #expect(started.status == 0, "\(started.output)")

        // A bot of user bot1, its file in the collector's group (mode 0660), three threads holding lanes.
        let bot = try machine.start([
            "setpriv", "--reuid=1500", "--regid=trading", "--clear-groups", "/usr/local/bin/ringside-test-producer", "lanes",
            "--dir", "/dev/shm", "--ring", "b1", "--threads", "3", "--count", "10", "--hold", "--mode", "660",
        ])
        defer { bot.kill() }
        #expect(bot.readLine()?.hasPrefix("ready ") == true)

        /// /metrics inside, once it shows the bot's process and its three threads.
        func figures() throws -> String? {
            try eventually(seconds: 30) { () -> String? in
                let page = try machine.run(["curl", "-s", "http://127.0.0.1:9464/metrics"]).output
                let threads = page.split(separator: "\n").filter {
                    $0.hasPrefix(#"ringside_thread_cpu_seconds_total{ring="b1",uid="1500""#)
                }
                return page.contains(#"ringside_bot_process_threads{ring="b1",uid="1500"}"#) && threads.count == 3 ? page : nil
            }
        }
        if try figures() == nil {
            let journal = try machine.run(["journalctl", "-u", "ringside-collector", "--no-pager"]).output
            Issue.record("no process or thread figures of bot1's bot: \(journal)")
        }

        // A restart: the service comes back, serves, and sees the bot again.
        #expect(try machine.run(["systemctl", "restart", "ringside-collector"]).status == 0)
        #expect(try figures() != nil, "not after a restart")

        // A reload: a new SLO, with its severity, without a restart (lane_values is unitless: its
        // bound is a number; one of time would be refused as one it cannot judge).
        let path = machine.path("/etc/ringside/collector.yml")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try text.replacingOccurrences(
            of: "  # - market_data_latency", with: "  - lane_values:p99<1000000@1m severity=P2\n  # - market_data_latency"
        )
        .write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try machine.run(["systemctl", "reload", "ringside-collector"]).status == 0)
        let reloaded = try eventually(seconds: 30) { () -> Bool? in
            let page = try machine.run(["curl", "-s", "http://127.0.0.1:9464/metrics"]).output
            return page.contains(#"ringside_slo_violated{slo="lane_values:p99<1000000@1m",severity="P2"}"#) ? true : nil
        }
        #expect(reloaded == true, "the reload's SLO never showed")
        let status = try machine.run(["systemctl", "show", "ringside-collector", "-p", "NRestarts", "-p", "ActiveState", "-p", "MainPID"])
        #expect(status.output.contains("NRestarts=0") && status.output.contains("ActiveState=active"), "\(status.output)")

        // systemd's own rating of the hardening: OK or better.
        let security = try machine.run(["systemd-analyze", "security", "ringside-collector", "--no-pager"])
        let overall = security.outputLines.first { $0.contains("Overall exposure level") } ?? security.output
        print("systemd-analyze security: \(overall)")
        let rating = overall.split(separator: " ").map(String.init)
        #expect(["SAFE", "OK"].contains { rating.contains($0) }, "\(overall)")
    }
}
