@testable import RingsideCollector
@testable import RingsideExport
import RingsideCommandLine
import RingsideHTTP
import Testing
import RingsideHTTPClient

@Suite("Collector command line and SLO rules")
struct CollectorOptionsTests {
    @Test("defaults are the documented ones")
    func defaults() throws {
        let options = try #require(try CollectorOptions.parse([]))
        #expect(options.listen == "127.0.0.1:9464")
        #expect(options.windowNanos == [1_000_000_000, 5_000_000_000, 60_000_000_000])
        #expect(options.quantiles == [0.5, 0.9, 0.95, 0.99, 0.999])
        #expect(options.pollNanos == 100_000_000)
        #expect(options.dumpIntervalNanos == 60_000_000_000)
        #expect(options.rings.isEmpty && !options.demo && options.jsonDumpPath == nil)
        #expect(options.maxSeries == 100_000 && options.maxSeriesPerRing == 4096 && options.maxSeriesBytes == 1 << 30)
        #expect(try CollectorOptions.parse(["--max-series-bytes", "256M"])?.maxSeriesBytes == 256 << 20)
        #expect(options.logFormat == .text)
        #expect(options.historySeconds == 3600 && options.historyMaxSeries == 2_000)
        #expect(options.threadSampleIntervalNanos == 1_000_000_000)
        #expect(options.stateMaxBytes == 64 << 20 && options.stateExpirySeconds == 7 * 24 * 3600)
        #expect(options.recorderNanos == 10_000_000_000 && options.recorderMaxBytes == 256 << 20)
    }

    @Test("--recorder-seconds takes seconds or a duration from 1s to 10m, or 0 for off; --recorder-max-bytes 1M to 64G")
    func recorder() throws {
        #expect(try CollectorOptions.parse(["--recorder-seconds", "30"])?.recorderNanos == 30_000_000_000)
        #expect(try CollectorOptions.parse(["--recorder-seconds=2m"])?.recorderNanos == 120_000_000_000)
        #expect(try CollectorOptions.parse(["--recorder-seconds", "1.5"])?.recorderNanos == 1_500_000_000)
        #expect(try CollectorOptions.parse(["--recorder-seconds", "0"])?.recorderNanos == 0)
        #expect(try CollectorOptions.parse(["--recorder-max-bytes", "64M"])?.recorderMaxBytes == 64 << 20)
        #expect(try CollectorOptions.parse(["--recorder-max-bytes=1G"])?.recorderMaxBytes == 1 << 30)
        #expect(try CollectorOptions.parse(["--recorder-max-bytes", "1048576"])?.recorderMaxBytes == 1 << 20)
        #expect(CollectorOptions.usage.contains("--recorder-seconds S") && CollectorOptions.usage.contains("--recorder-max-bytes N"))
        let changed = try #require(try CollectorOptions.parse(["--recorder-seconds", "5"]))
        #expect(ReloadPlan.startOnlyChanges(from: CollectorOptions(), to: changed) == ["--recorder-*"])
        #expect(ReloadPlan.effective(changed, running: CollectorOptions()).recorderNanos == 10_000_000_000)
    }

    @Test("--state-max-bytes takes 1M to 4G; --state-expiry a duration of 1h or more, or 0 for never")
    func state() throws {
        #expect(try CollectorOptions.parse(["--state-max-bytes", "16M"])?.stateMaxBytes == 16 << 20)
        #expect(try CollectorOptions.parse(["--state-max-bytes=4G"])?.stateMaxBytes == 4 << 30)
        #expect(try CollectorOptions.parse(["--state-expiry", "24h"])?.stateExpirySeconds == 86_400)
        #expect(try CollectorOptions.parse(["--state-expiry=1h"])?.stateExpirySeconds == 3_600)
        #expect(try CollectorOptions.parse(["--state-expiry", "0"])?.stateExpirySeconds == nil)
        #expect(CollectorOptions.usage.contains("--state-max-bytes N") && CollectorOptions.usage.contains("--state-expiry DUR"))
    }

    @Test("--thread-sample-interval takes a duration from 100ms to 1h, or 0 to read no thread")
    func threadSampleInterval() throws {
        #expect(try CollectorOptions.parse(["--thread-sample-interval", "1s"])?.threadSampleIntervalNanos == 1_000_000_000)
        #expect(try CollectorOptions.parse(["--thread-sample-interval=250ms"])?.threadSampleIntervalNanos == 250_000_000)
        #expect(try CollectorOptions.parse(["--thread-sample-interval", "100ms"])?.threadSampleIntervalNanos == 100_000_000)
        #expect(try CollectorOptions.parse(["--thread-sample-interval", "1h"])?.threadSampleIntervalNanos == 3_600_000_000_000)
        #expect(try CollectorOptions.parse(["--thread-sample-interval", "0"])?.threadSampleIntervalNanos == 0)
        #expect(CollectorOptions.usage.contains("--thread-sample-interval DUR"))
    }

    @Test("--history takes a duration from 10s to 24h, or 0 to disable it; --history-max-series a count")
    func history() throws {
        #expect(try CollectorOptions.parse(["--history", "1h"])?.historySeconds == 3600)
        #expect(try CollectorOptions.parse(["--history=90s"])?.historySeconds == 90)
        #expect(try CollectorOptions.parse(["--history", "1.5m"])?.historySeconds == 90)
        #expect(try CollectorOptions.parse(["--history", "24h"])?.historySeconds == 86_400)
        #expect(try CollectorOptions.parse(["--history", "10s"])?.historySeconds == 10)
        #expect(try CollectorOptions.parse(["--history", "0"])?.historySeconds == 0)
        #expect(try CollectorOptions.parse(["--history-max-series", "12"])?.historyMaxSeries == 12)
    }

    @Test("--otlp-*: /v1/metrics added to an endpoint without a path, the defaults, headers in order")
    func otlp() throws {
        #expect(try CollectorOptions.parse([])?.otlp == nil)
        let plain = try #require(try CollectorOptions.parse(["--otlp-endpoint", "http://otel:4318"])?.otlp)
        #expect(plain.endpoint.description == "http://otel:4318/v1/metrics")
        #expect(plain.intervalNanos == 10_000_000_000 && plain.timeoutNanos == 10_000_000_000 && plain.headers.isEmpty)
        #expect(try CollectorOptions.parse(["--otlp-endpoint", "http://otel:4318/"])?.otlp?.endpoint.path == "/v1/metrics")
        let full = try #require(
            try CollectorOptions.parse([
                "--otlp-header", "X-Scope-OrgID=desk=7", "--otlp-interval=2s", "--otlp-endpoint=http://[::1]:9090/api/v1/otlp/v1/metrics",
                "--otlp-timeout", "500ms", "--otlp-header", "Authorization=Bearer abc",
            ])?.otlp)
        #expect(full.endpoint.host == "::1" && full.endpoint.port == 9090 && full.endpoint.path == "/api/v1/otlp/v1/metrics")
        #expect(full.intervalNanos == 2_000_000_000 && full.timeoutNanos == 500_000_000)
        #expect(full.headers == [HTTPHeader("X-Scope-OrgID", "desk=7"), HTTPHeader("Authorization", "Bearer abc")])
        #expect(CollectorOptions.usage.contains("--otlp-endpoint URL"))
    }

    @Test("every flag is read, in both --flag value and --flag=value forms")
    func flags() throws {
        let options = try #require(
            try CollectorOptions.parse([
                "--dir", "/tmp/rings", "--ring", "bot-a", "--ring=bot-b", "--listen", "127.0.0.1:0", "--windows", "250ms,10s",
                "--quantiles=0.99,0.5", "--json-dump", "/tmp/x.json", "--dump-interval", "5s", "--poll", "20ms",
                "--slo", "lat:p99<100us@10s", "--allow-uid", "1001", "--demo", "--max-series", "5000",
                "--max-series-per-ring=50", "--log-format", "json", "--native-histograms", "-2",
            ]))
        #expect(options.logFormat == .json)
        #expect(options.nativeHistogramSchema == -2)
        #expect(options.maxSeries == 5000 && options.maxSeriesPerRing == 50)
        #expect(options.directory.path == "/tmp/rings")
        #expect(options.rings == ["bot-a", "bot-b"])
        #expect(options.windowNanos == [250_000_000, 10_000_000_000])
        #expect(options.quantiles == [0.5, 0.99])
        #expect(options.jsonDumpPath == "/tmp/x.json" && options.dumpIntervalNanos == 5_000_000_000)
        #expect(options.pollNanos == 20_000_000 && options.allowedUIDs == [1001] && options.demo)
        #expect(options.sloRules.map(\.statisticName) == ["p99"])
        #expect(try CollectorOptions.parse(["--help"]) == nil)
        #expect(try CollectorOptions.invocation(["--help"]) == .help)
        #expect(try CollectorOptions.invocation(["--dir", "/x", "--version"]) == .version)
        #expect(try CollectorOptions.parse(["--version"]) == nil)
    }

    @Test(
        "a bad flag or value is one line saying what is wrong",
        arguments: [
            (["--bogus"], "unknown option --bogus"),
            (["stray"], "unexpected argument stray"),
            (["--listen"], "--listen needs a value"),
            (["--listen", "9464"], "expected HOST:PORT"),
            (["--windows", "5x"], "--windows: 5x is not a duration"),
            (["--windows", "1s,1s"], "windows repeat"),
            (["--windows", "10ms"], "from 100ms to 24h"),
            (["--windows", "1s,2s,3s,4s,5s,6s,7s,8s,9s,10s,11s,12s,13s,14s,15s,16s,17s"], "at most 16 windows"),
            (["--quantiles", "1.5"], "not a quantile"),
            (["--quantiles", "0.5,,0.9"], "comma-separated"),
            (["--poll", "0s"], "not a duration"),
            (["--ring", "../x"], "invalid ring name"),
            (["--slo", "lat:p99<100us@7s"], "window 7s is not one of --windows"),
            (["--slo", "lat:p99=100us@1s"], "expected '<', '<=', '>' or '>='"),
            (["--allow-uid", "me"], "not a user id"),
            (["--max-series", "0"], "--max-series: 0 is not a number of series"),
            (["--max-series-per-ring", "lots"], "--max-series-per-ring: lots is not a number of series"),
            (["--max-series-bytes", "512K"], "--max-series-bytes 512K: expected a number of bytes from 1M to 1024G"),
            (["--max-series-bytes", "2T"], "--max-series-bytes 2T: expected a number of bytes"),
            (["--history", "5s"], "--history: 5s must be whole seconds from 10s to 24h (or 0 to disable the history)"),
            (["--history", "25h"], "--history: 25h must be whole seconds from 10s to 24h"),
            (["--history", "10.5s"], "--history: 10.5s must be whole seconds"),
            (["--history", "soon"], "--history: soon is not a duration"),
            (["--history"], "--history needs a value"),
            (["--history-max-series", "0"], "--history-max-series: 0 is not a number of series"),
            (["--log-format", "xml"], "--log-format xml: use text or json"),
            (["--log-format"], "--log-format needs a value"),
            (["--native-histograms", "9"], "--native-histograms: 9 is not a schema from -4 to 8 (3: buckets 9 % wide, 5: 2 %, 8: 0.3 %)"),
            (["--native-histograms", "x"], "--native-histograms: x is not a schema from -4 to 8 (3: buckets 9 % wide, 5: 2 %, 8: 0.3 %)"),
            (["--thread-sample-interval", "50ms"], "--thread-sample-interval: 50ms must be from 100ms to 1h (or 0 to read no thread)"),
            (["--thread-sample-interval", "2h"], "--thread-sample-interval: 2h must be from 100ms to 1h"),
            (["--thread-sample-interval", "often"], "--thread-sample-interval: often is not a duration"),
            (["--thread-sample-interval"], "--thread-sample-interval needs a value"),
            (["--otlp-endpoint", "ftp://otel:4318"], "--otlp-endpoint ftp://otel:4318: the scheme must be http or https"),
            (["--otlp-endpoint", "http://h", "--otlp-ca-file", "/etc/ca.pem"], "--otlp-ca-file needs an https:// endpoint"),
            (["--otlp-endpoint", "https://h", "--otlp-cert-file", "/etc/c.pem"], "a client certificate and its key are given together"),
            (["--otlp-endpoint", "http://h", "--otlp-temporality", "sometimes"], "--otlp-temporality sometimes: use cumulative or delta"),
            (["--otlp-endpoint", "http://h", "--otlp-resource-attribute", "=v"], "expected KEY=VALUE"),
            (["--otlp-temporality", "delta"], "--otlp-temporality needs --otlp-endpoint URL"),
            (["--otlp-endpoint", "otel:4318"], "--otlp-endpoint otel:4318: expected http://HOST[:PORT][/PATH]"),
            (["--otlp-endpoint", "http://otel:99999"], "the port must be a number from 1 to 65535"),
            (["--otlp-endpoint"], "--otlp-endpoint needs a value"),
            (["--otlp-interval", "5s"], "--otlp-interval needs --otlp-endpoint URL"),
            (["--otlp-endpoint", "http://h", "--otlp-interval", "10ms"], "--otlp-interval 10ms: must be from 100ms to 1h"),
            (["--otlp-endpoint", "http://h", "--otlp-interval", "often"], "--otlp-interval: often is not a duration"),
            (["--otlp-endpoint", "http://h", "--otlp-timeout", "10m"], "--otlp-timeout 10m: must be from 100ms to 5m"),
            (["--otlp-endpoint", "http://h", "--otlp-header", "Authorization: Bearer x"], "--otlp-header: expected NAME=VALUE"),
            (["--otlp-endpoint", "http://h", "--otlp-header", "X Key=v"], "is not a header name"),
            (["--otlp-endpoint", "http://h", "--otlp-header", "Content-Encoding=br"], "the exporter writes it itself"),
            (["--otlp-endpoint", "http://h", "--otlp-header", "Host=h2"], "written by the client itself"),
            (["--otlp-header=X-Key=v"], "--otlp-header needs --otlp-endpoint URL"),
            (["--state-max-bytes", "512K"], "--state-max-bytes 512K: expected a number of bytes from 1M to 4G"),
            (["--state-max-bytes", "8G"], "--state-max-bytes 8G: expected a number of bytes from 1M to 4G"),
            (["--state-expiry", "30m"], "--state-expiry: 30m must be 1h at least (or 0: never)"),
            (["--state-expiry", "soon"], "--state-expiry: soon is not a duration"),
            (["--recorder-seconds", "500ms"], "--recorder-seconds: 500ms must be from 1s to 10m (or 0 to keep no records)"),
            (["--recorder-seconds", "11m"], "--recorder-seconds: 11m must be from 1s to 10m"),
            (["--recorder-seconds", "-1"], "--recorder-seconds: -1 is not a duration"),
            (["--recorder-seconds", "soon"], "--recorder-seconds: soon is not a duration (seconds, or a number and"),
            (["--recorder-seconds"], "--recorder-seconds needs a value"),
            (["--recorder-max-bytes", "512K"], "--recorder-max-bytes 512K: expected a number of bytes from 1M to 64G"),
            (["--recorder-max-bytes", "65G"], "--recorder-max-bytes 65G: expected a number of bytes from 1M to 64G"),
            (["--recorder-max-bytes", "256MiB"], "--recorder-max-bytes 256MiB: expected a number of bytes"),
        ])
    func badArguments(arguments: [String], message: String) {
        #expect {
            try CollectorOptions.parse(arguments)
        } throws: { error in
            let text = "\(error)"
            return text.contains(message) && !text.contains("\n")
        }
    }

    @Test("durations read and print in their shortest form")
    func durations() throws {
        #expect(try parseDuration("250ms", flag: "") == 250_000_000)
        #expect(try parseDuration("1m", flag: "") == 60_000_000_000)
        #expect(try parseDuration("1.5s", flag: "") == 1_500_000_000)
        #expect(try parseDuration("100us", flag: "") == 100_000)
        #expect(formatDuration(60_000_000_000) == "1m")
        #expect(formatDuration(1_500_000_000) == "1500ms")
        #expect(throws: UsageError.self) { try parseDuration("-1s", flag: "--x") }
    }

    @Test("SLO rules parse into selector, statistic, bound and window")
    func sloRules() throws {
        let rule = try SLORule(parsing: #"order_fill_latency{symbol="AAPL",ring="bot-a"}:p99<100us@1m"#)
        let selector = SLORule.Selector(metric: "order_fill_latency", labels: ["symbol": "AAPL", "ring": "bot-a"])
        #expect(rule.objective == .distribution(selector, .quantile(0.99), threshold: 100_000, thresholdIsTime: true))
        #expect(!rule.inclusive && rule.windowNanos == 60_000_000_000 && rule.severity == "P1" && !rule.isRatio)
        #expect(rule.threshold(in: .microseconds) == 100)
        #expect(rule.threshold(in: .bytes) == nil)
        #expect(selector.matches(ring: "bot-a", metric: "order_fill_latency", labels: ["symbol": "AAPL", "side": "buy"]))
        #expect(!selector.matches(ring: "bot-b", metric: "order_fill_latency", labels: ["symbol": "AAPL"]))

        func statistic(_ text: String) throws -> SLORule.Statistic? {
            if case let .distribution(_, statistic, _, _) = try SLORule(parsing: text).objective { return statistic }
            return nil
        }
        #expect(try statistic("md:p99.9<=10us@5s") == .quantile(0.999))
        #expect(try statistic("md:p999<10us@5s") == .quantile(0.999))
        #expect(try statistic("md:p5<10us@5s") == .quantile(0.05))
        #expect(try statistic("md:max<5ms@1s") == .max)
        #expect(try SLORule(parsing: "queue_depth:mean<100@1s").threshold(in: .none) == 100)
        #expect(try SLORule(parsing: "md:p99.9<=10us@5s").inclusive)
        for bad in ["md:p99<10us", "md:p99<10us@soon", "md{x=1}:p99<1s@1s", "md:p100<1s@1s", "9md:p99<1s@1s", "md:q99<1s@1s"] {
            #expect(throws: SLORule.ParseError.self, "\(bad)") { try SLORule(parsing: bad) }
        }
    }

    @Test("availability rules are a ratio of counters over a period; a severity after a rule labels its series")
    func availabilityAndSeverity() throws {
        let rule = try SLORule(parsing: #"orders_rejected{venue="X"}/orders_total<0.05%@30d severity=P0"#)
        #expect(
            rule.objective
                == .ratio(
                    bad: SLORule.Selector(metric: "orders_rejected", labels: ["venue": "X"]),
                    total: SLORule.Selector(metric: "orders_total", labels: [:]), bound: 0.0005))
        #expect(rule.isRatio && rule.windowNanos == 30 * 86_400 * 1_000_000_000 && rule.severity == "P0")
        #expect(rule.text == #"orders_rejected{venue="X"}/orders_total<0.05%@30d"#, "the options are not part of its name")
        #expect(rule.objectiveRatio == 1 - 0.0005 && rule.statisticName == "ratio")
        #expect(
            try SLORule(parsing: "e/r<=0.001@1h").objective
                == .ratio(
                    bad: .init(metric: "e", labels: [:]), total: .init(metric: "r", labels: [:]), bound: 0.001))
        #expect(try SLORule(parsing: #"md{venue="a b"}:p99<10us@5s severity=P2"#).severity == "P2")
        #expect(try SLORule(parsing: "md:p99<10us@5s").objectiveRatio == 0.99)
        for bad in [
            "e/r<5%", "e/r<0%@1h", "e/r<100%@1h", "e/r<x@1h", "e/r<0.1%@91d", "e/r<0.1%@500ms", "md:p99<1s@1s severity=",
            "md:p99<1s@1s severity=P 1", "md:p99<1s@1s sev=P1", "md:p99<1s@1s severity=P1;",
        ] {
            #expect(throws: SLORule.ParseError.self, "\(bad)") { try SLORule(parsing: bad) }
        }
        // A ratio's period need not be one of the windows; a distribution's must.
        #expect(try CollectorOptions.parse(["--slo", "e/r<0.05%@30d"])?.sloRules.count == 1)
        #expect(throws: UsageError.self) { try CollectorOptions.parse(["--slo", "md:p99<1s@30d"]) }
    }

    @Test("quantile keys name 0.5 p50 and 0.999 p999")
    func quantileKeys() {
        #expect([0.5, 0.9, 0.95, 0.99, 0.999, 0.9999, 0.05].map(quantileKey) == ["p50", "p90", "p95", "p99", "p999", "p9999", "p05"])
    }
}
