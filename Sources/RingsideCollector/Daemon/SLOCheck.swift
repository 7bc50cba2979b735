import CRingside
import Ringside
import RingsideCommandLine
import RingsideSnapshot

/// The SLO rules checked against the series the collector knows, at start and at reload: a rule
/// whose selector names a series it cannot judge (`SLORule.problem(judging:ofBot:windows:)`) is
/// refused, in one line naming the rule and why. Series that appear later are the publisher's
/// to count and say (`SLOState`).
enum SLOCheck {
    /// Why a reload's rules cannot run: a new or changed rule's window is not one of the running
    /// windows, or it names a series of the last snapshot it cannot judge; nil when they can. The
    /// rules that run unchanged are left to the publisher (it counts and says what they cannot judge).
    static func reloadProblem(_ rules: [SLORule], running: [SLORule], windows: [UInt64], series last: Snapshot) -> String? {
        let added = rules.filter { !running.contains($0) }
        for rule in added {
            if let problem = rule.windowProblem(windows: windows) {
                return "--slo '\(rule.text)': \(problem) (the running ones: --windows changes at the next start)"
            }
        }
        let names = Set(added.flatMap { $0.selectors.map(\.metric) })
        guard !names.isEmpty else { return nil }
        var named: [(bot: String, metric: MetricDescriptor)] = []
        for series in last.series where names.contains(series.metric.name) { named.append((series.ring, series.metric)) }
        for rule in added {
            if let problem = rule.problem(judgingAll: named, windows: windows) { return "--slo '\(rule.text)': \(problem)" }
        }
        return nil
    }

    /// Why the collector must not go on with its rules: the first SLO of a snapshot that names a
    /// series it cannot judge.
    static func startProblem(_ snapshot: Snapshot) -> String? {
        guard let slo = snapshot.slos.first(where: { $0.unjudgedSeries > 0 }) else { return nil }
        return "--slo '\(slo.rule)': \(slo.unjudgedProblem ?? "names a series it cannot judge")"
    }
}

/// The start's check of the SLO rules: once every bot found at the start is taken up, the first
/// snapshot judged after it says whether a rule names a series it cannot judge; then the
/// collector stops, with status 2, as for a bad flag. A start that does not settle within 30 s
/// (a directory of many thousands of bots) leaves the rules to the publisher.
struct SLOStartCheck {
    enum Verdict: Equatable {
        case waiting
        case passed
        case refused(String)
    }

    private let deadlineNanos: UInt64
    private var settledNanos: UInt64?

    init(nowNanos now: UInt64) {
        deadlineNanos = now &+ 30_000_000_000
    }

    /// The check's verdict on the collector now (asked each turn of the daemon's loop).
    mutating func verdict(on collector: Collector, nowNanos now: UInt64) -> Verdict {
        guard let settled = settledNanos else {
            if collector.startSettled { settledNanos = now }
            return now >= deadlineNanos ? .passed : .waiting
        }
        let snapshot = collector.snapshot
        guard snapshot.monotonicNanos > settled else { return now >= deadlineNanos ? .passed : .waiting }
        return SLOCheck.startProblem(snapshot).map { .refused($0) } ?? .passed
    }
}
