import Foundation
import RingsideExport
import RingsideSystem
import RingsideTestSupport
import Synchronization

/// The soak's OTLP/HTTP receiver: a loopback server of its own, one connection at a time (the
/// collector sends one export a connection), that fails during every other period (`failNanos`,
/// a minute: the first period takes, the second fails, ...) and takes exports otherwise.
///
/// A failing period's attempts are answered `503 Service Unavailable` and cut (the connection
/// closed without an answer) in turn: both are retried by the collector. An export taken is
/// gunzipped and decoded (`decodeRequest`), and its totals kept: each bot's histograms' counts
/// and counters' totals, by `bot/metric`, summed over the metric's series. An export whose totals
/// are below the last one's (a cumulative value that went back), or that cannot be decoded, is
/// noted as a problem.
final class SoakReceiver: Sendable {
    /// What the receiver has seen.
    struct Figures: Sendable {
        var taken = 0
        var refused = 0
        var cut = 0
        /// The last export taken: its totals by `bot/metric`.
        var lastTotals: [String: UInt64] = [:]
        /// What went wrong: an export not decoded, a total that went back (the first few).
        var problems: [String] = []
        var problemCount = 0
    }

    let port: Int
    private let listener: Int32
    private let failNanos: UInt64
    private let startNanos: UInt64
    private let figures = Locked(Figures())
    /// Set at the end: every export is taken from then on, so the last snapshot gets through.
    private let takingAll = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// Listens on 127.0.0.1 (an ephemeral port) and serves on a thread of its own; the periods
    /// count from now.
    init(failPeriodNanos: UInt64) throws(BenchError) {
        do { (listener, port) = try listenOnLoopback("the soak's OTLP receiver") } catch {
            throw BenchError("\(error)")
        }
        failNanos = failPeriodNanos
        startNanos = DispatchTime.now().uptimeNanoseconds
        let thread = Thread { [self] in
            serve()
            finished.signal()
        }
        thread.name = "soak-otlp"
        thread.start()
    }

    /// The path the collector is given: `--otlp-endpoint`.
    var endpoint: String { "http://127.0.0.1:\(port)/v1/metrics" }

    var snapshot: Figures { figures.withLock { $0 } }

    /// Whether attempts now fail (a failing period, and not yet `takeEverything`).
    var isFailing: Bool {
        !takingAll.load(ordering: .acquiring) && ((DispatchTime.now().uptimeNanoseconds - startNanos) / failNanos) % 2 == 1
    }

    /// Takes every export from now on.
    func takeEverything() { takingAll.store(true, ordering: .releasing) }

    /// Stops accepting (the serving thread returns) and closes the socket.
    func stop() {
        try? System.shutdown(listener, Int32(SHUT_RDWR))
        finished.wait()
        System.close(listener)
    }

    private func serve() {
        var attempt = 0
        while true {
            let connection: Int32
            do { connection = try System.accept(listener) } catch {
                if error.rawValue == ECONNABORTED { continue }
                return  // shut down
            }
            defer { System.close(connection) }
            // A collector that stalls mid-request is let go after 5 s (its own timeout is 10 s).
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            guard let (head, body) = readHTTPRequest(connection) else { continue }
            if isFailing {
                attempt += 1
                if attempt % 2 == 0 {
                    figures.withLock { $0.cut += 1 }
                    continue  // closed without an answer
                }
                figures.withLock { $0.refused += 1 }
                answer(connection, "503 Service Unavailable")
                continue
            }
            let gzipped = head.contains { $0.lowercased().hasPrefix("content-encoding:") && $0.lowercased().contains("gzip") }
            answer(connection, take(gzipped ? Zlib.decompress(body, .gzip) : body) ? "200 OK" : "400 Bad Request")
        }
    }

    /// Decodes an export and keeps its totals; false (and a problem noted) when it is not one.
    private func take(_ body: [UInt8]?) -> Bool {
        let resources: [DecodedResource]
        do {
            guard let body else { throw BenchError("not gzip") }
            resources = try decodeRequest(body)
        } catch {
            note("an export that is not an OTLP request: \(error)")
            return false
        }
        let totals = Self.totals(resources)
        figures.withLock { figures in
            for (key, value) in totals.sorted(by: { $0.key < $1.key }) {
                if let before = figures.lastTotals[key], value < before {
                    figures.problemCount += 1
                    if figures.problems.count < 5 { figures.problems.append("\(key) went back from \(before) to \(value)") }
                }
            }
            figures.taken += 1
            figures.lastTotals = totals
        }
        return true
    }

    private func note(_ problem: String) {
        figures.withLock { figures in
            figures.problemCount += 1
            if figures.problems.count < 5 { figures.problems.append(problem) }
        }
    }

    /// Each bot's (`service.name`'s) histograms' counts and counters' integer totals, by
    /// `bot/metric`, summed over the metric's series (and over its per-worker resources).
    static func totals(_ resources: [DecodedResource]) -> [String: UInt64] {
        var totals: [String: UInt64] = [:]
        for resource in resources {
            let bot = resource.attributes["service.name"] ?? "?"
            for metric in resource.metrics {
                let key = "\(bot)/\(metric.name)"
                switch metric.kind {
                case 10: totals[key, default: 0] += metric.points.reduce(0) { $0 + $1.count }
                case 7: totals[key, default: 0] += metric.points.reduce(0) { $0 + UInt64(clamping: $1.asInt ?? 0) }
                default: break
                }
            }
        }
        return totals
    }

    private func answer(_ connection: Int32, _ status: String) {
        let response = Array("HTTP/1.1 \(status)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        _ = response.withUnsafeBytes { try? System.send(connection, $0, flags: Int32(MSG_NOSIGNAL)) }
    }
}
