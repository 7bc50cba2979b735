import CRingside
import Ringside
import RingsideSnapshot

/// What discovery shows: the skipped rings, its figures, and the log's word on rings waiting for a descriptor.
extension RingDiscovery {
    /// Says in the log when rings begin and stop waiting for a descriptor: stop once none waits
    /// and every name found was looked at (while a listing goes on, the names it has yet to hand
    /// may wait too: said before, a listing of many rings said both twice).
    func sayWaiting() {
        if !descriptorWait.names.isEmpty, !descriptorWait.logged {
            log(
                "cannot attach \(descriptorWait.names.count) rings: \(handoff.descriptorsInUse) are open, and the rest of this process's "
                    + "open-file limit is kept for HTTP clients; raise the limit (ulimit -n, LimitNOFILE=); they are listed as "
                    + "skipped and counted in ringside_collector_rings_waiting", level: .warn)
            descriptorWait.logged = true
        } else if descriptorWait.names.isEmpty, descriptorWait.logged, hasLookedAtEveryName {
            log("every ring found is attached again")
            descriptorWait.logged = false
        }
    }

    /// How long after the last making of the skipped rings shown the next may be.
    var showSpacingNanos: UInt64 { max(Self.showNanos, 10 * skippedShown.lastCostNanos) }

    /// Publishes its figures, and the skipped rings when they changed (at most every
    /// `showSpacingNanos`, unless `now`).
    func publish(nowNanos: UInt64, now: Bool) {
        var changed = false
        if skippedShown.stale, now || nowNanos &- skippedShown.lastNanos >= showSpacingNanos {
            let began = rs_clock_precise_ns()
            skippedShown.stale = false
            var names = refused.compactMap { $0.value.quiet ? nil : $0.key } + descriptorWait.names
            names.sort()
            let before = skippedShown.rings
            skippedShown.rings = names.prefix(DiscoveryHandoff.shownLimit).map { name in
                var ring = RingSnapshot(
                    name: name, bot: WorkerRing.botName(ofRing: name), worker: WorkerRing(name)?.pid, state: .skipped,
                    problem: problem(of: name))
                ring.owner = refused[name]?.state?.owner  // whose file it is (--allow-uid shows it)
                return ring
            }
            // Names and problems are all a skipped ring shows.
            changed = !skippedShown.rings.elementsEqual(before) { $0.name == $1.name && $0.problem == $1.problem }
            skippedShown.lastNanos = nowNanos
            skippedShown.lastCostNanos = rs_clock_precise_ns() &- began
        }
        var shown = DiscoveryHandoff.Shown()
        shown.skipped = skippedShown.rings
        shown.filesRefused = refused.count + descriptorWait.names.count
        shown.waitingForDescriptors = descriptorWait.names.count
        shown.rescans = scan.rescans
        shown.opens = handed.opens
        handoff.publish(shown, skippedChanged: changed)
    }
}

/// The skipped rings discovery shows: out of date or not; when they were last made, and what that cost.
struct SkippedShown {
    var stale = true
    var lastNanos: UInt64 = 0
    var lastCostNanos: UInt64 = 0
    var rings: [RingSnapshot] = []
}
