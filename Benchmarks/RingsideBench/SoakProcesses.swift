import Foundation
import Ringside
import RingsideSystem
import RingsideTestSupport
import Synchronization

// The soak's processes (the collector, the producers) and what it reads of them: /proc, and the
// collector's /metrics and /latest.

/// The real `ringside-collector`, started beside the benchmark's binary, its log read as it comes
/// (a collector whose log pipe is full would block) and its last lines kept for a failure's message.
final class SoakCollector: Sendable {
    let process: ChildProcess
    let port: Int
    private let log = Locked(LogTail())
    private let logDone = DispatchSemaphore(value: 0)

    struct LogTail {
        var lines: [String] = []
        var count = 0
    }

    init(directory: String, otlpEndpoint: String, scratch: ScratchDirectory) throws(BenchError) {
        do {
            (process, port) = try startCollector(["--dir", directory, "--otlp-endpoint", otlpEndpoint])
        } catch { throw BenchError("starting ringside-collector: \(error)") }
        scratch.own(processGroup: process.pid)
        let thread = Thread { [self] in
            while let line = process.readErrorLine() {
                log.withLock { tail in
                    tail.count += 1
                    tail.lines.append(line)
                    if tail.lines.count > 40 { tail.lines.removeFirst(tail.lines.count - 20) }
                }
            }
            logDone.signal()
        }
        thread.name = "soak-collector-log"
        thread.start()
    }

    var pid: Int32 { process.pid }

    /// The collector's last log lines, and how many it wrote in all.
    var logTail: (lines: [String], count: Int) { log.withLock { ($0.lines.suffix(10), $0.count) } }

    /// Whether the process still runs (not a zombie waiting to be reaped).
    var isRunning: Bool { statusKiB(of: pid, "VmRSS") != nil }

    /// Stops it with SIGTERM; its exit status (nil if it was still running `seconds` later, then killed).
    func stop(seconds: Double) -> Int32? {
        process.send(SIGTERM)
        let ended = eventually(seconds: seconds) { !isRunning }
        if !ended { process.kill() }
        logDone.wait()
        let status = process.waitForExit().status
        return ended ? status : nil
    }

    /// A GET of `path`: its body, or nil when the collector did not answer 200.
    func get(_ path: String) -> String? {
        guard let (status, body) = try? httpGet(port: port, path: path, timeoutSeconds: 10), status == 200 else { return nil }
        return body
    }
}

/// A producer process: `ringside-test-producer blast` or `worker-pool`, started in a group of its
/// own (a pool's workers in it) that the scratch directory kills if the soak is cut short.
final class SoakProducer {
    let ring: String
    let process: ChildProcess
    private let scratch: ScratchDirectory

    init(_ mode: String, ring: String, directory: String, options: [String], scratch: ScratchDirectory) throws(BenchError) {
        self.ring = ring
        self.scratch = scratch
        do { process = try ChildProcess(testProducer: mode, ring: ring, in: RingDirectory(directory), options) } catch {
            throw BenchError("starting ringside-test-producer \(mode): \(error)")
        }
        scratch.own(processGroup: process.pid)
        let line = process.readLine() ?? ""
        guard line.hasPrefix("attached ") else {
            throw BenchError("ringside-test-producer \(mode) into \(ring) did not start: \(line) \(process.waitForExit().standardError)")
        }
    }

    /// Stops it with SIGTERM; its last line, or a reason it has none.
    func stop() -> Result<String, BenchError> {
        process.send(SIGTERM)
        let line = process.readLine()
        let exit = process.waitForExit()
        scratch.disown(processGroup: process.pid)
        guard exit.status == 0, let line else {
            return .failure(BenchError("\(ring): exit status \(exit.status), printed \(line ?? "nothing"): \(exit.standardError)"))
        }
        return .success(line)
    }
}

// MARK: - Readings

/// The collector's process as /proc shows it at one moment.
struct ProcessReading {
    var rssKiB = 0, anonKiB = 0, shmemKiB = 0
    var descriptors = 0, mappings = 0
    /// CPU time so far (user and system), in clock ticks.
    var cpuTicks: UInt64 = 0

    /// Nil once the process is gone.
    init?(pid: Int32) {
        guard let rss = statusKiB(of: pid, "VmRSS"), let anon = statusKiB(of: pid, "RssAnon") else { return nil }
        rssKiB = rss
        anonKiB = anon
        shmemKiB = statusKiB(of: pid, "RssShmem") ?? 0
        descriptors = openDescriptorCount(of: pid)
        mappings = mappingCount(of: pid)
        cpuTicks = Self.cpuTicks(of: pid) ?? 0
    }

    /// utime + stime of /proc/PID/stat (fields 14 and 15).
    static func cpuTicks(of pid: Int32) -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")  // from field 3, the state
        guard fields.count > 13, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
        return user + system
    }

    static let ticksPerSecond = Double((try? System.sysconf(_SC_CLK_TCK)) ?? 100)
}

/// The figures of `/metrics` the soak samples: a Prometheus text page's samples of a family,
/// summed over its series (those whose labels hold `matching`, when given).
struct MetricsPage {
    let text: String

    func sum(_ family: String, matching: String? = nil) -> Double {
        var total = 0.0
        for line in text.split(separator: "\n") where line.hasPrefix(family) {
            let rest = line.dropFirst(family.count)
            guard rest.first == "{" || rest.first == " " else { continue }
            if let matching, !rest.contains(matching) { continue }
            if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { total += value }
        }
        return total
    }
}

/// What `/latest` says of the soak's bots at the end.
struct LatestFigures {
    /// Each series' figures, by `ring/metric`: a histogram's count and dropped records, a counter's total.
    var totalCount: [String: UInt64] = [:]
    var droppedRecords: [String: UInt64] = [:]
    var counterTotal: [String: UInt64] = [:]
    /// Each file's figures, by name (`bot` or `bot@pid`).
    var files: [String: File] = [:]
    /// The OTLP exporter's figures (`collector.otlp`).
    var otlp: OTLP?

    struct OTLP {
        var sent: UInt64, failed: UInt64, dropped: UInt64, retries: UInt64, timeouts: UInt64
    }

    struct File {
        var bot: String
        var isWorker: Bool
        var written: UInt64, dropped: UInt64, drained: UInt64, backlog: UInt64
    }

    init?(_ body: String?) {
        guard let body, let document = try? jsonObject(body) else { return nil }
        func number(_ value: Any?) -> UInt64? { (value as? NSNumber)?.uint64Value }
        for series in document["series"] as? [[String: Any]] ?? [] {
            guard let ring = series["ring"] as? String, let metric = series["metric"] as? String else { continue }
            let key = "\(ring)/\(metric)"
            if let count = number(series["total_count"]) { totalCount[key, default: 0] += count }
            if let dropped = number(series["dropped_records"]) { droppedRecords[key, default: 0] += dropped }
            if series["kind"] as? String == "counter", let total = number(series["total"]) { counterTotal[key, default: 0] += total }
        }
        if let otlp = (document["collector"] as? [String: Any])?["otlp"] as? [String: Any] {
            self.otlp = OTLP(
                sent: number(otlp["exports_sent"]) ?? 0, failed: number(otlp["exports_failed"]) ?? 0,
                dropped: number(otlp["exports_dropped"]) ?? 0, retries: number(otlp["retries"]) ?? 0,
                timeouts: number(otlp["timeouts"]) ?? 0)
        }
        for ring in document["rings"] as? [[String: Any]] ?? [] {
            guard let name = ring["name"] as? String else { continue }
            files[name] = File(
                bot: ring["bot"] as? String ?? name, isWorker: ring["worker_pid"] != nil,
                written: number(ring["records_total"]) ?? 0, dropped: number(ring["dropped_total"]) ?? 0,
                drained: number(ring["drained_total"]) ?? 0, backlog: number(ring["backlog"]) ?? 0)
        }
    }
}
