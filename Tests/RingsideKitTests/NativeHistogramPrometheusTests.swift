import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// Two hosts for collectors: two network namespaces, each joined to this one by a veth pair,
/// where they can be made (as root, with iproute2); else two loopback addresses. Either way
/// Prometheus, in this namespace, scrapes each collector at its own address.
private final class TwoHosts {
    let namespaces: Bool
    /// The address each host's collector listens on (port included for loopback: port 0 there).
    let listen: [String]
    private let names: [String]
    private let ip: String?

    var description: String {
        namespaces
            ? "two network namespaces (\(names.joined(separator: ", "))) joined to the test's by veth pairs"
            : "two loopback addresses (127.0.0.2, 127.0.0.3): network namespaces could not be made here"
    }

    init() {
        let pid = Int(getpid())
        let names = ["rs\(pid % 100_000)a", "rs\(pid % 100_000)b"]
        // A /30 per host in 10.S.T.0, from the pid, so parallel runs do not collide.
        let prefixes = (0..<2).map { "10.\(100 + pid % 100).\((pid / 100 % 120) * 2 + $0)" }
        let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) }
        var made: [String] = []
        var listen: [String] = []
        if let ip, getuid() == 0 {
            for (host, name) in names.enumerated() {
                let outside = "\(prefixes[host]).1", inside = "\(prefixes[host]).2"
                let steps: [[String]] = [
                    ["netns", "add", name],
                    ["link", "add", name, "type", "veth", "peer", "name", name + "p"],
                    ["link", "set", name + "p", "netns", name],
                    ["addr", "add", outside + "/30", "dev", name],
                    ["link", "set", name, "up"],
                    ["netns", "exec", name, ip, "addr", "add", inside + "/30", "dev", name + "p"],
                    ["netns", "exec", name, ip, "link", "set", name + "p", "up"],
                    ["netns", "exec", name, ip, "link", "set", "lo", "up"],
                ]
                made.append(name)
                if !steps.allSatisfy({ (try? runProcess(ip, $0, mergingErrors: true))?.status == 0 }) { break }
                listen.append(inside + ":9464")
            }
        }
        if listen.count == 2 {
            namespaces = true
            self.listen = listen
        } else {
            if let ip { Self.delete(made, ip: ip) }
            made = []
            namespaces = false
            self.listen = ["127.0.0.2:0", "127.0.0.3:0"]
        }
        self.names = made
        self.ip = ip
    }

    /// Starts a collector on host `host` with `arguments`; returns it and its scrape address.
    func collector(_ host: Int, _ arguments: [String]) throws -> (ChildProcess, String) {
        let collector =
            namespaces
            ? try ChildProcess(
                ip!,
                [
                    "netns", "exec", names[host], try builtExecutable("ringside-collector"),
                    "--listen", listen[host],
                ] + arguments)
            : try ChildProcess("ringside-collector", ["--listen", listen[host]] + arguments)
        guard let line = collector.waitForErrorLine(containing: "listening on http://"),
            let address = line.components(separatedBy: "http://").last?.split(separator: " ").first
        else {
            throw TestSupportError("the collector on host \(host) did not start: \(collector.waitForExit().standardError)")
        }
        return (collector, String(address))
    }

    /// Deletes the namespaces and their veth pairs.
    func remove() {
        if let ip { Self.delete(names, ip: ip) }
    }

    /// A veth pair goes with its namespace once one end is inside; before that it is deleted itself.
    private static func delete(_ names: [String], ip: String) {
        for name in names {
            _ = try? runProcess(ip, ["link", "del", name], mergingErrors: true)
            _ = try? runProcess(ip, ["netns", "del", name], mergingErrors: true)
        }
    }
}

@Suite("native histograms: exact percentiles across hosts, in a real Prometheus")
struct NativeHistogramPrometheusTests {
    @Test(
        "histogram_quantile over two hosts' native histograms is within 1 % of the exact quantiles (classic printed beside)",
        .timeLimit(.minutes(5)))
    func mergedAcrossHosts() throws {
        guard let prometheusPath = try requiredSystemTool("prometheus") else { return }
        let hosts = TwoHosts()
        defer { hosts.remove() }
        print("native histograms: the hosts are \(hosts.description)")
        let directories = [try TemporaryRingDirectory(), try TemporaryRingDirectory()]
        defer { directories.forEach { $0.remove() } }

        // Lognormal latencies: host a a 40 us median, host b 120 us, as trading bots on two hosts.
        var random = SplitMix64(seed: 2026)
        var everything: [UInt64] = []
        for (host, median) in [(0, 40_000.0), (1, 120_000.0)] {
            let bot = try Bot.attach(
                "bot", directory: directories[host].path,
                options: .init(laneCapacity: 1 << 17))
            let latency = try bot.histogram("order_fill_latency", unit: .nanoseconds)
            for _ in 0..<50_000 {
                let u = Double.random(in: Double.ulpOfOne..<1, using: &random)
                let v = Double.random(in: 0..<1, using: &random)
                let value = UInt64(median * exp(0.6 * (-2 * log(u)).squareRoot() * cos(2 * Double.pi * v)))
                latency.record(value)
                everything.append(value)
            }
        }
        everything.sort()

        var collectors: [ChildProcess] = []
        defer { collectors.forEach { $0.kill() } }
        var targets: [String] = []
        for host in 0..<2 {
            let (collector, address) = try hosts.collector(
                host,
                [
                    "--dir", directories[host].path, "--poll", "20ms",
                    "--native-histograms", "5",
                ])
            collectors.append(collector)
            targets.append(address)
        }
        let config = kitPrometheusConfig(targets.map { ($0, [:]) })
        let native = try PrometheusServer(executable: prometheusPath, config: config, arguments: ["--enable-feature=native-histograms"])
        defer { native.stop() }
        let classic = try PrometheusServer(executable: prometheusPath, config: config)
        defer { classic.stop() }

        let scraped = try eventually(seconds: 30) { () -> Bool? in
            let counts = try native.query("histogram_count(order_fill_latency_seconds)")
            let buckets = try classic.query(#"order_fill_latency_seconds_count"#)
            return counts.count == 2 && counts.allSatisfy({ $0.value == 50_000 }) && buckets.count == 2 ? true : nil
        }
        try #require(scraped == true, "Prometheus did not scrape both hosts' 50,000 values within 30 s")
        #expect(
            try native.query("order_fill_latency_seconds_bucket").isEmpty,
            "with native buckets in the family, Prometheus 2.42 keeps the native form only")

        // The quantiles are of both hosts' histograms, each server's at a moment it had both whole.
        let nativeMoment = try #require(
            try native.settledMoment(where: "histogram_count(order_fill_latency_seconds) == 50000", count: 2))
        let classicMoment = try #require(try classic.settledMoment(where: "order_fill_latency_seconds_count == 50000", count: 2))
        var report: [String] = []
        for q in [0.5, 0.99, 0.999] {
            let exact = Double(everything[Int((q * Double(everything.count)).rounded(.up)) - 1]) * 1e-9
            let estimate = try #require(try native.scalar("histogram_quantile(\(q), sum(order_fill_latency_seconds))", at: nativeMoment))
            let classicEstimate = try classic.scalar(
                "histogram_quantile(\(q), sum by (le) (order_fill_latency_seconds_bucket))", at: classicMoment)
            let error = (estimate - exact) / exact
            report.append(
                String(
                    format: "q%@ exact %.1f us, native %.1f us (%+.2f %%), classic %.1f us (%+.1f %%)",
                    "\(q)", exact * 1e6, estimate * 1e6, error * 100, (classicEstimate ?? .nan) * 1e6,
                    ((classicEstimate ?? .nan) - exact) / exact * 100))
            #expect(abs(error) <= 0.01, "q \(q): native histogram_quantile \(estimate) s, exact \(exact) s")
        }
        print("native histograms (schema 5, two hosts): " + report.joined(separator: "; "))

        // The shipped rules, native ones included, evaluate without error on native histograms.
        let evaluated = try eventually(seconds: 10) { () -> [[String: Any]]? in
            let rules = try native.rules()
            return rules.count >= 16 && rules.allSatisfy({ ($0["lastEvaluation"] as? String)?.hasPrefix("0001") == false })
                ? rules : nil
        }
        let rules = try #require(evaluated, "the rules were not all evaluated within 10 s")
        #expect(rules.contains { ($0["name"] as? String)?.hasSuffix("_native") == true })
        for rule in rules {
            #expect(rule["health"] as? String == "ok", "rule \(rule["name"] ?? "?"): \(rule["lastError"] ?? "")")
        }
    }
}
