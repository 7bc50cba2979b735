import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideCollector
import RingsideTestSupport
import Synchronization
import Testing

/// Every suite of this target, one at a time: they kill processes, fill CPUs and time how soon a
/// death is noticed, so they do not run against each other (they still run beside other targets).
@Suite("Reliability: faults, SIGBUS and load", .serialized)
struct ReliabilityTests {}

/// A process's CPU time so far (user + system) in seconds, from /proc/PID/stat.
func cpuSeconds(of pid: Int32) -> Double? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return nil }
    // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// A JSON document (the collector's `/latest` dump) read from a file, or nil if there is none yet.
func readJSON(_ path: String) -> [String: Any]? {
    guard let data = FileManager.default.contents(atPath: path) else { return nil }
    return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
}

/// The `rings` entry named `ring` of a `/latest` document.
func ringEntry(_ document: [String: Any]?, _ ring: String) -> [String: Any]? {
    (document?["rings"] as? [[String: Any]])?.first { $0["name"] as? String == ring }
}

/// The `windows[window]` object of the first series of `metric` in a `/latest` document.
func windowEntry(_ document: [String: Any]?, metric: String, window: String) -> [String: Any]? {
    let series = (document?["series"] as? [[String: Any]])?.first { $0["metric"] as? String == metric }
    return (series?["windows"] as? [String: [String: Any]])?[window]
}

/// Truncates a file to `size` bytes, as someone with write access to the ring directory might.
func truncateFile(_ path: String, to size: Int) throws {
    guard truncate(path, off_t(size)) == 0 else {
        throw TestSupportError("truncate \(path): \(String(cString: strerror(errno)))")
    }
}

/// The problem /latest shows for a skipped ring, once it shows one.
func skippedProblem(_ port: Int, _ ring: String) -> String? {
    guard let body = try? httpGet(port: port, path: "/latest").body, let document = try? jsonObject(body),
        let rings = document["rings"] as? [[String: Any]],
        let entry = rings.first(where: { $0["name"] as? String == ring && $0["state"] as? String == "skipped" })
    else { return nil }
    return entry["problem"] as? String
}
