import RingsideSnapshot
import RingsideAggregation

/// Judges the SLO rules on every bot's series at each snapshot, says their transitions in the
/// log, and asks for a capture where a rule marked `capture` breaks or a `--capture-when` bound
/// is crossed.
///
/// Touched by the drain thread only.
struct SLOJudge {
    private let layout: WindowLayout
    private let log: CollectorLog
    private var states: [SLOState]
    /// Where an SLO marked `capture`, or a `--capture-when` bound, asks for a capture.
    private let captureDesk: CaptureDesk?
    private var captureBounds: [CaptureBoundState]

    init(options: CollectorOptions, layout: WindowLayout, log: CollectorLog, captureDesk: CaptureDesk?) {
        self.layout = layout
        self.log = log
        self.captureDesk = captureDesk
        states = options.sloRules.map { SLOState(rule: $0) }
        captureBounds = captureDesk == nil ? [] : options.captureBounds.map { CaptureBoundState(bound: $0) }
    }

    /// Takes a reload's rules: a rule that stays keeps its state (its violations, an
    /// availability's counts), a new one starts afresh.
    mutating func reconfigure(sloRules: [SLORule]) {
        let kept = states
        states = sloRules.map { rule in kept.first { $0.rule == rule } ?? SLOState(rule: rule) }
    }

    /// Judges every rule on `bots` (in name order); `startSettled`: every file found at the start
    /// is taken up (until then, a rule that matches nothing is not said to).
    mutating func judge(bots: [BotSeries], startSettled: Bool, nowNanos now: UInt64) -> [SLOSnapshot] {
        if let captureDesk {
            for index in captureBounds.indices {
                if let above = captureBounds[index].evaluate(bots: bots, nowNanos: now) {
                    _ = captureDesk.submit(.threshold(captureBounds[index].bound.text), bots: above, nowNanos: now)
                }
            }
        }
        return states.indices.map { index in
            let outcome = states[index].evaluate(bots: bots, layout: layout, nowNanos: now)
            for line in states[index].logLines(for: outcome, startSettled: startSettled) { log(line, level: .warn) }
            if let transition = states[index].record(outcome) {
                log(transition, level: states[index].violated ? .warn : .info)
                if states[index].violated, states[index].rule.capture, let captureDesk {
                    _ = captureDesk.submit(.slo(states[index].rule.text), bots: outcome.bots, nowNanos: now)
                }
            }
            return states[index].snapshot(outcome)
        }
    }
}
