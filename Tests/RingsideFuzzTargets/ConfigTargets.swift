import RingsideCollector
import RingsideHTTP

/// The two configuration files an operator writes, through their real readers.
///
/// - config-file: the input is `--config FILE`, read as the collector reads it at start and at
///   each reload (`CollectorOptions.invocation`: the file within its bound, UTF-8, the YAML
///   reader, the options it gives, each checked as its flag is: durations, sizes, SLO rules,
///   addresses, OTLP endpoints and headers).
/// - web-config: the input is a web configuration's text (`WebConfig.parse`: the YAML reader, TLS
///   settings, users and their bcrypt hashes, headers).
///
/// Checks: a refusal names the file, and a line it names is one the file has.
enum ConfigTargets {
    static let configFile = FuzzTarget(
        name: "config-file",
        covers: "--config FILE: the file's reader, the YAML reader, every option's checks",
        run: runConfigFile,
        seeds: { configSeeds })

    static let webConfig = FuzzTarget(
        name: "web-config",
        covers: "--web-config-file's text: the YAML reader, TLS settings, users, headers",
        run: runWebConfig,
        seeds: { webConfigSeeds })

    static func runConfigFile(_ bytes: [UInt8]) {
        func finding(_ what: String) -> Never { FuzzFinding.report("config-file", what) }
        FuzzScratch.empty()
        let path = FuzzScratch.write("collector.yml", bytes)
        do {
            _ = try CollectorOptions.invocation(["--config", path])
        } catch {
            let message = error.description
            if !message.contains("--config \(path)") { finding("a refusal that does not name the file: \(message)") }
            let prefix = "--config \(path): line "
            guard message.hasPrefix(prefix) else { return }
            let line = Int(message.dropFirst(prefix.count).prefix { $0.isASCII && $0.isNumber }) ?? 0
            if !(1...lineCount(bytes)).contains(line) { finding("line \(line) named, of \(lineCount(bytes)): \(message)") }
        }
        runOTELVariables(bytes)
    }

    /// The input as the `OTEL_*` lists' values (`OTLPEnvironment`: `k=v` pairs, percent-decoded):
    /// a refusal is one line naming the variable.
    static func runOTELVariables(_ bytes: [UInt8]) {
        guard let text = String(validating: bytes, as: UTF8.self), !text.contains("\0") else { return }  // an environment has neither
        for variable in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_RESOURCE_ATTRIBUTES"] {
            do {
                let environment = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", variable: text]
                _ = try CollectorOptions.invocation([], environment: environment)
            } catch {
                let message = error.description
                if !message.hasPrefix(variable) || message.contains("\n") {
                    FuzzFinding.report("config-file", "\(variable)'s refusal does not name it on one line: \(message)")
                }
            }
        }
    }

    static func runWebConfig(_ bytes: [UInt8]) {
        func finding(_ what: String) -> Never { FuzzFinding.report("web-config", what) }
        guard let text = String(validating: bytes, as: UTF8.self) else { return }  // refused before it is parsed
        do {
            let config = try WebConfig.parse(text, directory: "/nonexistent-fuzz-directory")
            _ = config.referencedFiles
        } catch {
            if let line = error.line, !(1...lineCount(bytes)).contains(line) {
                finding("line \(line) named, of \(lineCount(bytes)): \(error)")
            }
        }
    }

    /// Lines of a file: its newlines, and one more for a last line without one (at least 1).
    static func lineCount(_ bytes: [UInt8]) -> Int {
        bytes.reduce(1) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
    }

    static let configSeeds = [
        FuzzSeed(
            "docs-example",
            """
            # /etc/ringside/collector.yml
            dir: /dev/shm
            listen: 0.0.0.0:9464
            web-config-file: /etc/ringside/web.yml
            windows: [1s, 5s, 1m]
            allow-uid: [1500]
            json-dump: /var/lib/ringside-collector/latest.json
            slo:
              - order_fill_latency:p99<100us@1m severity=P1
              - market_data_latency:p99<10us@1m severity=P2
              - orders_rejected/orders_total<0.05%@30d severity=P0
              - kill_switch_active:max<1@1m severity=P0
              - daily_pnl:min>-50000@1d severity=P0
              - slippage_bps:p95<50@1m severity=P1
              - orders_filled/orders_sent>=90%@1h severity=P1
              - orders_sent:rate>1@5m severity=P2
            otlp-endpoint: http://127.0.0.1:4318
            web-enable-lifecycle: true

            """),
        FuzzSeed(
            "slo-every-form",
            """
            windows: [1s, 5s, 1m, 5m]
            slo:
              - kill_switch_active:max<1@1m severity=P0
              - daily_pnl:min>-50000@1d severity=P0
              - 'daily_pnl{desk="fx"}:min>=-1e6@90d'
              - slippage_bps:p95<50@5m
              - slippage_bps:p50>-12.5@1m
              - clock_offset:p99<=-5us@1s
              - 'order_fill_latency{symbol="A>B"}:min>1us@5s'
              - orders_sent:rate>1@5m severity=P2
              - orders_sent:rate<=1000@1s
              - orders_filled/orders_sent>=90%@1h
              - orders_rejected/orders_total<0.05%@30d severity=P0
              - queue_depth:mean<100@1m

            """),
        FuzzSeed(
            "every-value-kind",
            """
            ---
            listen: "127.0.0.1:0"
            windows:
              - 1s
              - 10s
            quantiles: [0.5, 0.99, 0.999]
            max-series-bytes: 64M
            state-max-bytes: 1M
            state-expiry: 24h
            poll: 5ms
            history: 0
            ring: [a, 'b.c', "d-e"]
            otlp-endpoint: http://collector:4318/v1/metrics
            otlp-interval: 10s
            otlp-header: ["x-token: abc", 'tenant: t1']
            slo: {}
            web-enable-lifecycle: false  # a comment
            log-format: json

            """),
        FuzzSeed("empty", ""),
        FuzzSeed("nested-lists", "slo:\n  - - - x\n"),
        FuzzSeed("command-line-only", "demo: true\n"),
        FuzzSeed("otel-lists", " X-Key = a%20b ,,team=fx%E2%82%AC,bad%zz=1,=v,k=%FF"),
    ]

    static let webConfigSeeds = [
        FuzzSeed(
            "docs-example",
            """
            tls_server_config:
              cert_file: server.crt
              key_file: server.key
              # client_auth_type: RequireAndVerifyClientCert
              # client_ca_file: ca.crt
            basic_auth_users:
              prometheus: $2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG

            """),
        FuzzSeed(
            "every-key",
            """
            tls_server_config:
              cert_file: /etc/ringside/server.crt
              key_file: "/etc/ringside/server.key"
              client_auth_type: RequireAndVerifyClientCert
              client_ca_file: ca.crt
              min_version: TLS12
              max_version: TLS13
              cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]
              curve_preferences: [CurveP256, X25519]
              prefer_server_cipher_suites: true
            http_server_config:
              http2: false
              headers:
                Strict-Transport-Security: max-age=31536000
                X-Frame-Options: deny
            basic_auth_users:
              alice: '$2b$12$abcdefghijklmnopqrstuuQ6wP2lK3j8g0VZ6sP8mJ9n3Qm6rJ1Wy'
              bob: "$2a$04$abcdefghijklmnopqrstuu4W0rQb7u1sWcJ0TnqkXy1N1b6vU3gAe"

            """),
        FuzzSeed("empty", ""),
        FuzzSeed("flow", "basic_auth_users: {a: b}\nhttp_server_config: {headers: {}}\n"),
    ]
}
