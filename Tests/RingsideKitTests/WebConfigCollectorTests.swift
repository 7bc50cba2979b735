import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Testing

/// The real `ringside-collector` with `--web-config-file`, read by curl and scraped by a real
/// Prometheus 2.42, with certificates made by the openssl CLI and passwords hashed by htpasswd.
@Suite("--web-config-file: the real collector over TLS with passwords, for curl and Prometheus")
struct WebConfigCollectorTests {
    /// Runs `body` with a collector serving the web configuration `config` (written as `web.yml`
    /// beside the certificates) over a ring directory with one bot.
    func withCollector<T>(
        _ fixtures: TLSFixtures, config: String, _ body: (_ collector: ChildProcess, _ port: Int) throws -> T
    ) throws -> T {
        let path = try fixtures.write("web.yml", config)
        return try withRingDirectory { directory in
            let bot = try ChildProcess(testProducer: "hold", ring: "tls-bot", in: directory)
            defer { bot.kill() }
            _ = bot.readLine()
            let (collector, port) = try startCollector(["--dir", directory.path, "--web-config-file", path, "--poll", "10ms"])
            defer { collector.kill() }
            return try body(collector, port)
        }
    }

    /// A value of the collector's own /metrics, read with the password.
    func metric(_ curlPath: String, _ port: Int, _ fixtures: TLSFixtures, _ sample: String) throws -> Double? {
        let page = try curl(
            curlPath, "https://127.0.0.1:\(port)/metrics", ["--cacert", fixtures.path("ca.crt"), "-u", "prometheus:scrape-me"])
        guard page.status == 200 else { return nil }
        return page.body.split(separator: "\n").first { $0.hasPrefix(sample + " ") }.flatMap { Double($0.split(separator: " ").last!) }
    }

    @Test(
        "curl: TLS with the right CA; the right password reads the metrics, a wrong one or none gets 401 with WWW-Authenticate: Basic; /health and /-/healthy need none; an unknown CA and plain HTTP are refused; /metrics counts each refusal"
    )
    func curlOverTLSWithPasswords() throws {
        guard let curlPath = try requiredSystemTool("curl"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let config = try serverTLSWithPassword(fixtures, "scrape-me")
        try withCollector(fixtures, config: config) { collector, port in
            let base = "https://127.0.0.1:\(port)"
            let ca = ["--cacert", fixtures.path("ca.crt")]
            let metrics = try curl(curlPath, base + "/metrics", ca + ["-u", "prometheus:scrape-me"])
            #expect(metrics.status == 200 && metrics.body.contains("ringside_collector_rings "), "\(metrics.errors)")
            for route in ["/latest", "/-/ready", "/api/history", "/", "/nowhere"] {
                let refused = try curl(curlPath, base + route, ca)
                #expect(refused.status == 401 && refused.headers.contains("WWW-Authenticate: Basic"), "\(route)")
            }
            let wrong = try curl(curlPath, base + "/metrics", ca + ["-u", "prometheus:guess"])
            #expect(wrong.status == 401 && !wrong.body.contains("ringside_"))
            #expect(try curl(curlPath, base + "/metrics", ca + ["-u", "grafana:scrape-me"]).status == 401)
            for open in ["/health", "/-/healthy"] {
                #expect(try curl(curlPath, base + open, ca).status == 200, "\(open)")
            }
            // The server's certificate is signed by a CA curl does not trust: no answer at all.
            let untrusted = try curl(curlPath, base + "/health", ["--cacert", fixtures.path("other-ca.crt")])
            #expect(untrusted.status == 0 && untrusted.errors.contains("certificate"), "\(untrusted.errors)")
            let plain = try curl(curlPath, "http://127.0.0.1:\(port)/metrics")
            #expect(plain.status == 400 && plain.body.contains("use https://"))

            // /metrics is rendered ahead (each publish): the counts show at the next one at the latest.
            let missing = "ringside_http_auth_failures_total{reason=\"missing\"}",
                wrongPassword = "ringside_http_auth_failures_total{reason=\"wrong\"}"
            #expect(eventually { (try? metric(curlPath, port, fixtures, missing)) == 5 })
            #expect(eventually { (try? metric(curlPath, port, fixtures, wrongPassword)) == 2 })
            // curl's refusal of the certificate (its alert may reach the server after curl is gone), and the plain request.
            #expect(eventually { (try? metric(curlPath, port, fixtures, "ringside_http_tls_handshake_failures_total")) == 2 })
            #expect(try metric(curlPath, port, fixtures, "ringside_http_tls_enabled") == 1)
            // The log says so, once a minute at most.
            #expect(collector.waitForErrorLine(containing: "requests refused with 401") != nil)
        }
    }

    @Test(
        "client certificates: RequireAndVerifyClientCert refuses a client without one and one another CA signed, and serves one the client CA signed"
    )
    func clientCertificates() throws {
        guard let curlPath = try requiredSystemTool("curl"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let config = serverTLS + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt"
        try withCollector(fixtures, config: config) { collector, port in
            let url = "https://127.0.0.1:\(port)/metrics"
            let ca = ["--cacert", fixtures.path("ca.crt")]
            let none = try curl(curlPath, url, ca)
            #expect(none.status == 0, "\(none.errors)")
            let intruder = try curl(
                curlPath, url, ca + ["--cert", fixtures.path("other-client.crt"), "--key", fixtures.path("other-client.key")])
            #expect(intruder.status == 0, "\(intruder.errors)")
            let certificate = ["--cert", fixtures.path("client.crt"), "--key", fixtures.path("client.key")]
            let client = try curl(curlPath, url, ca + certificate)
            #expect(client.status == 200 && client.body.contains("ringside_collector_rings 1"), "\(client.errors)")
            let counted = eventually {
                (try? curl(curlPath, url, ca + certificate))?.body.contains("ringside_http_tls_handshake_failures_total 2") == true
            }
            #expect(counted)
            #expect(collector.waitForErrorLine(containing: "TLS handshakes failed") != nil)
        }
    }

    @Test("Prometheus 2.42 scrapes over TLS with basic_auth and the CA: up is 1; with a wrong password, or without the CA, up is 0")
    func prometheusScrapesOverTLS() throws {
        guard let prometheusPath = try requiredSystemTool("prometheus"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let config = try serverTLSWithPassword(fixtures, "scrape-me")
        try withCollector(fixtures, config: config) { _, port in
            func job(_ name: String, password: String, ca: Bool) -> String {
                """
                  - job_name: \(name)
                    scheme: https
                \(ca ? "    tls_config:\n      ca_file: \(fixtures.path("ca.crt"))\n" : "")\
                    basic_auth:
                      username: prometheus
                      password: \(password)
                    static_configs:
                      - targets: ["127.0.0.1:\(port)"]

                """
            }
            let scrape =
                "global:\n  scrape_interval: 1s\nscrape_configs:\n" + job("good", password: "scrape-me", ca: true)
                + job("wrong-password", password: "guess", ca: true) + job("unknown-ca", password: "scrape-me", ca: false)
            let prometheus = try PrometheusServer(executable: prometheusPath, config: scrape)
            defer { prometheus.stop() }
            let ups = eventually(seconds: 30) { () -> [String: Double]? in
                guard let result = try? prometheus.query("up") else { return nil }
                let values = Dictionary(result.map { ($0.labels["job"] ?? "", $0.value) }, uniquingKeysWith: { $1 })
                return values.count == 3 && values["good"] == 1 ? values : nil
            }
            #expect(ups == ["good": 1, "wrong-password": 0, "unknown-ca": 0])
            // Samples came over TLS, and the collector counted the refusals Prometheus met.
            let scraped = eventually(seconds: 30) { () -> (Double, Double)? in
                guard let wrong = try? prometheus.scalar("ringside_http_auth_failures_total{job=\"good\",reason=\"wrong\"}"),
                    let handshakes = try? prometheus.scalar("ringside_http_tls_handshake_failures_total{job=\"good\"}"),
                    wrong >= 1, handshakes >= 1
                else { return nil }
                return (wrong, handshakes)
            }
            #expect(scraped != nil)
            #expect(try prometheus.scalarOnceScraped("ringside_collector_rings{job=\"good\"}") == 1)
        }
    }

    @Test("a rotated certificate (files replaced) is served to new connections without a restart")
    func rotatedCertificateIsServed() throws {
        guard let curlPath = try requiredSystemTool("curl"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let config = serverTLS
        try withCollector(fixtures, config: config) { collector, port in
            let url = "https://127.0.0.1:\(port)/health"
            #expect(try curl(curlPath, url, ["--cacert", fixtures.path("ca.crt")]).status == 200)
            #expect(try curl(curlPath, url, ["--cacert", fixtures.path("other-ca.crt")]).status == 0)
            // A new certificate from another CA, put in place as an operator's renewal does: by renames.
            try fixtures.makeCertificate(
                "renewed", signedBy: "other-ca", commonName: "127.0.0.1", extensions: "subjectAltName=IP:127.0.0.1")
            #expect(rename(fixtures.path("renewed.key"), fixtures.path("server.key")) == 0)
            #expect(rename(fixtures.path("renewed.crt"), fixtures.path("server.crt")) == 0)
            let served = eventually(seconds: 15) { (try? curl(curlPath, url, ["--cacert", fixtures.path("other-ca.crt")]))?.status == 200 }
            #expect(served)
            #expect(try curl(curlPath, url, ["--cacert", fixtures.path("ca.crt")]).status == 0)
            #expect(collector.waitForErrorLine(containing: "reloaded (files changed)") != nil)
        }
    }

    @Test(
        "a malformed web configuration at start is a usage error naming the line and the reason (exit 2); at a reload the running one stays, the refusal is logged once and /metrics says so"
    )
    func malformedConfig() throws {
        guard let curlPath = try requiredSystemTool("curl"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let bad = try fixtures.write("bad.yml", serverTLS + "  client_auth: yes\n")
        for flag in ["--web-config-file", "--web.config.file"] {
            let run = try runProcess(try builtExecutable("ringside-collector"), ["--listen", "127.0.0.1:0", flag, bad])
            #expect(run.status == 2)
            #expect(
                run.errors.contains("\(flag) \(bad): line 4: unknown key \"client_auth\" in tls_server_config"), "\(run.errors)")
        }
        let missing = try runProcess(try builtExecutable("ringside-collector"), ["--web-config-file", fixtures.path("nowhere.yml")])
        #expect(missing.status == 2 && missing.errors.contains("No such file or directory"), "\(missing.errors)")

        let good = try serverTLSWithPassword(fixtures, "scrape-me")
        try withCollector(fixtures, config: good) { collector, port in
            try fixtures.write("web.yml", good + "\n  cert_file: other.crt\n")
            // Looked at when a request comes: the running configuration answers meanwhile.
            let refused = eventually(seconds: 15) {
                (try? metric(curlPath, port, fixtures, "ringside_http_web_config_last_reload_successful")) == 0
            }
            #expect(refused)
            #expect(try metric(curlPath, port, fixtures, "ringside_http_web_config_reloads_total{result=\"failure\"}") == 1)
            let line = collector.waitForErrorLine(containing: "keeping the running configuration")
            #expect(line?.contains("line 6: the password of user \"cert_file\" is not a bcrypt hash") == true, "\(line ?? "")")
            for _ in 0..<3 { _ = try metric(curlPath, port, fixtures, "ringside_http_tls_enabled") }
            #expect(try metric(curlPath, port, fixtures, "ringside_http_web_config_reloads_total{result=\"failure\"}") == 1)
        }
    }

    @Test("OpenSSL and libcrypt are linked by the collector, never by a bot or the ring tools: ldd names neither for them")
    func botsLinkNoTLS() throws {
        guard let ldd = try requiredSystemTool("ldd") else { return }
        let collector = try runProcess(ldd, [try builtExecutable("ringside-collector")])
        #expect(collector.output.contains("libssl.so") && collector.output.contains("libcrypt.so"), "\(collector.output)")
        for bot in ["ringside-test-producer", "ringside-emit"] {
            let linked = try runProcess(ldd, [try builtExecutable(bot)])
            #expect(linked.status == 0)
            #expect(!linked.output.contains("libssl") && !linked.output.contains("libcrypt.so"), "\(bot): \(linked.output)")
        }
    }
}

/// The collector's web configuration for TLS with the fixtures' server certificate and key.
private let serverTLS = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"

/// That, and one user, `prometheus`, whose password is `password`.
private func serverTLSWithPassword(_ fixtures: TLSFixtures, _ password: String) throws -> String {
    serverTLS + "basic_auth_users:\n  prometheus: \(try fixtures.bcrypt(password))"
}
