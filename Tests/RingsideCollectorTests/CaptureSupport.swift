import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// What the capture tests share: a real collector's `/api/captures` read, `POST /api/capture`
/// sent, a capture waited for, and its trace read as a person reads it.
enum CaptureProbe {
    /// `/api/captures`, parsed.
    static func list(port: Int) throws -> [String: Any] { try jsonObject(httpGet(port: port, path: "/api/captures").body) }

    /// The captures listed, newest first.
    static func captures(port: Int) throws -> [[String: Any]] { try list(port: port)["captures"] as? [[String: Any]] ?? [] }

    /// The captures listed of trigger `kind`.
    static func captures(port: Int, trigger kind: String) throws -> [[String: Any]] {
        try captures(port: port).filter { $0["trigger"] as? String == kind }
    }

    /// `/api/captures`' count of `kind` under `key` ("written" or "suppressed"): 0 when absent.
    static func count(port: Int, _ key: String, trigger kind: String) throws -> Int {
        (try list(port: port)[key] as? [String: Any])?[kind] as? Int ?? 0
    }

    /// `POST path` on a connection of its own, with `headers` (each `Name: value`).
    static func post(port: Int, path: String = "/api/capture", headers: [String] = []) throws -> RawClient.Response {
        let client = try RawClient(port: port, timeoutSeconds: 10)
        try client.send(
            "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers.map { $0 + "\r\n" }.joined()
                + "Content-Length: 0\r\nConnection: close\r\n\r\n")
        return try client.readResponse()
    }

    /// Polls `/api/captures` (generously) until a capture of trigger `kind` is written or failed;
    /// returns it, or nil if none came.
    static func finished(port: Int, trigger kind: String, seconds: Double = 60) throws -> [String: Any]? {
        try eventually(seconds: seconds) {
            try captures(port: port, trigger: kind).first { $0["status"] as? String != "pending" }
        }
    }

    /// The value of a sample of `/metrics` (its whole name with labels), or nil.
    static func metric(port: Int, _ sample: String) throws -> Double? {
        try httpGet(port: port, path: "/metrics").body.split(separator: "\n").first { $0.hasPrefix(sample + " ") }
            .flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    /// The collector's `/latest` series of `metric` in `ring`: its `total_count` (records drained).
    static func totalCount(port: Int, ring: String, metric: String) throws -> Int? {
        let series = try jsonObject(httpGet(port: port, path: "/latest").body)["series"] as? [[String: Any]] ?? []
        return series.first { $0["ring"] as? String == ring && $0["metric"] as? String == metric }?["total_count"] as? Int
    }

    /// A `kit` test producer: histogram `order_fill_latency{symbol="AAPL"}` (ns) gets `start`,
    /// `start + step`, ... (`count` values); then it sets a gauge every 10 ms until killed.
    static func kitBot(_ ring: String, in directory: RingDirectory, count: Int, start: Int, step: Int) throws -> ChildProcess {
        let bot = try ChildProcess(
            testProducer: "kit", ring: ring, in: directory, ["--count", "\(count)", "--start", "\(start)", "--step", "\(step)"])
        let ready = bot.readLine() ?? ""
        guard ready.hasPrefix("ready ") else { throw TestSupportError("the kit bot \(ring) did not start: \(ready)") }
        return bot
    }

    /// The values a `kit` bot records.
    static func kitValues(count: Int, start: Int, step: Int) -> [Int] { (0..<count).map { start + $0 * step } }
}

/// A capture's `.trace.json` (the Trace Event Format), read as its viewer reads it.
struct CapturedTrace {
    /// A complete event (`X`): a recorded time.
    struct Slice {
        let name: String
        let pid: Int
        let tid: Int
        /// Its duration in nanoseconds (the JSON's microseconds with three decimals).
        let nanos: Int
        let args: [String: String]
    }

    let slices: [Slice]
    /// Each thread's name (`thread_name` metadata) by "pid/tid"; a row "NAME #2" is NAME's.
    let threadNames: [String: String]
    let processNames: [String]
    /// Counter samples (`C`) by track name.
    let counters: [String: [Double]]

    /// Reads `capture`'s trace file in `directory` (the capture as `/api/captures` lists it).
    init(_ capture: [String: Any], in directory: String) throws {
        let files = capture["files"] as? [String] ?? []
        let name = try #require(files.first { $0.hasSuffix(".trace.json") }, "no trace file in \(capture)")
        let trace = try jsonObject(String(contentsOfFile: directory + "/" + name, encoding: .utf8))
        let events = try #require(trace["traceEvents"] as? [[String: Any]])
        func metadata(_ kind: String) -> [[String: Any]] { events.filter { $0["ph"] as? String == "M" && $0["name"] as? String == kind } }
        var threads: [String: String] = [:]
        for event in metadata("thread_name") {
            let name = (event["args"] as? [String: Any])?["name"] as? String ?? ""
            threads["\(event["pid"] as? Int ?? -1)/\(event["tid"] as? Int ?? -1)"] = name.components(separatedBy: " #").first ?? name
        }
        threadNames = threads
        processNames = metadata("process_name").compactMap { ($0["args"] as? [String: Any])?["name"] as? String }
        slices = events.filter { $0["ph"] as? String == "X" }.map { event in
            Slice(
                name: event["name"] as? String ?? "", pid: event["pid"] as? Int ?? -1, tid: event["tid"] as? Int ?? -1,
                nanos: Int(((event["dur"] as? Double) ?? -1) * 1000 + 0.5),
                args: (event["args"] as? [String: Any] ?? [:]).compactMapValues { $0 as? String })
        }
        var counters: [String: [Double]] = [:]
        for event in events where event["ph"] as? String == "C" {
            if let value = (event["args"] as? [String: Any])?["value"] as? Double {
                counters[event["name"] as? String ?? "", default: []].append(value)
            }
        }
        self.counters = counters
    }

    /// The name of the thread a slice was recorded on, if the trace names it.
    func thread(of slice: Slice) -> String? { threadNames["\(slice.pid)/\(slice.tid)"] }

    /// The durations, sorted, of the slices named `name` of process `pid` (any with nil).
    func durations(_ name: String, pid: Int? = nil) -> [Int] {
        slices.filter { $0.name == name && (pid == nil || $0.pid == pid) }.map(\.nanos).sorted()
    }
}
