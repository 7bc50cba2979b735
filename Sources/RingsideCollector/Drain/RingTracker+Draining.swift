import RingsideSnapshot
import CRingside
import Ringside

/// Draining one ring, asking after its producer, and saying what the series caps refused.
extension RingTracker {

    /// What draining a ring did: the records taken, and whether a clean ring learnt in small
    /// visits has records left (the next pass should follow at once, and no snapshot show it
    /// half drained).
    struct Drained {
        var count = 0
        var recordsLeft = false
        /// Its cursors turned out corrupt: it was let go of (and skipped, with the reason).
        var letGo = false
    }

    /// Drains one ring into its series; a ring whose cursors turn out corrupt is let go, and one
    /// whose records are mostly invalid over time is quarantined (not read) for a while (see
    /// `DrainAccount`).
    /// - Parameter whole: take up to `DrainTiming.passRecordLimit` whatever the ring's standing (a forced
    ///   pass, at stop or in a test stepping time, has no next pass to leave records to).
    func drain(_ ring: TrackedRing, nowNanos now: UInt64, whole: Bool = false) -> Drained {
        if ring.quarantine.isOn {
            guard ring.quarantine.end(ifOverAt: now) else { return Drained() }
            ringLog("ring \(ring.name): quarantine over; reading its records again")
        }
        guard ring.consumer.hasWork else { return Drained() }
        let started = rs_clock_precise_ns()
        let rejectedBefore = ring.sourceFigures.rejected
        let proven = whole || (ring.account.isProven && !ring.account.isSuspect(nowNanos: now))
        let limitPerLane =
            proven ? max(1_024, DrainTiming.passRecordLimit / max(1, ring.consumer.laneCount)) : DrainTiming.unprovenLaneRecordLimit
        do {
            let count = try ring.aggregator.drain(
                ring.consumer, source: ring.source, limitPerLane: min(limitPerLane, Int(ring.consumer.capacity)),
                nowNanos: now, admitting: { roster.allowance(for: ring.bot, holding: $0) },
                counted: { ring.schedule.countDrained($0, lane: $1) },
                recorder: recorder.map { feed(of: ring, into: $0, nowNanos: now) })
            sayRefusedSeries(of: ring)
            ring.drained += UInt64(count)
            if count > 0 { ring.bot.changedSincePublish = true }
            let rejected = ring.sourceFigures.rejected &- rejectedBefore
            if let verdict = ring.account.charge(
                costNanos: rs_clock_precise_ns() &- started, records: count,
                invalid: Int(clamping: rejected), nowNanos: now)
            {
                quarantine(ring, for: verdict.nanos, reason: verdict.reason, nowNanos: now)
            }
            if count > 0 {
                ring.liveness.moved()
                lagSeconds = Double(now &- min(now, ring.aggregator.oldestInLastBatchNanos)) / 1e9
            }
            let left = !proven && !ring.quarantine.isOn && !ring.account.isSuspect(nowNanos: now) && ring.consumer.hasWork
            return Drained(count: count, recordsLeft: left)
        } catch {
            forget(ring)
            skip(ring.name, error, saidBefore: ring.logged.skipped, nowNanos: now)
            return Drained(letGo: true)
        }
    }

    /// What the recorder takes `ring`'s records through: its bot's store, kept by the bot, and
    /// its file's id in it, kept by the ring (each asked again once the recorder forgot it).
    private func feed(of ring: TrackedRing, into recorder: Recorder, nowNanos now: UInt64) -> Recorder.Feed {
        let recording: BotRecording
        if let kept = ring.bot.recording, !kept.isRetired {
            recording = kept
        } else {
            recording = recorder.recording(ofBot: ring.bot.name)
            ring.bot.recording = recording
        }
        if let kept = ring.recorded, kept.recording === recording, recording.sources[kept.source] != nil {
            return Recorder.Feed(recorder: recorder, bot: recording, source: kept.source)
        }
        let file = RecordedSource(ring: ring.name, pid: ring.sourceFigures.pid, isWorker: WorkerRing(ring.name) != nil)
        let source = recording.add(file, nowNanos: now)
        ring.recorded = (recording, source)
        return Recorder.Feed(recorder: recorder, bot: recording, source: source)
    }

    /// Stops reading a ring whose records were mostly invalid lately, for `nanos`: reading them
    /// costs every other ring its time. What it skips stays in its lanes, and a producer that then
    /// finds them full counts its drops.
    private func quarantine(_ ring: TrackedRing, for nanos: UInt64, reason: String, nowNanos now: UInt64) {
        ring.quarantine.begin(untilNanos: now &+ nanos, reason: reason)
        ringLog("ring \(ring.name): \(reason); the other rings are drained meanwhile", level: .warn)
        noteRingsChanged()
    }

    /// Asks the kernel whether a ring's producer lives (one fcntl), reads its status again if it
    /// moved, and logs what changed: the producer's death or return, drops, rejected records.
    /// Returns whether something changed that the snapshot should show.
    func observe(_ ring: TrackedRing, nowNanos now: UInt64) -> Bool {
        let name = ring.name
        ring.liveness.observed(nowNanos: now)
        ring.schedule.noteNewLanes(ring.consumer.lookForNewLanes())
        let alive = ring.consumer.isProducerAlive
        let known = ring.liveness
        // Read again when the file was opened or closed since: a producer that attached and died
        // between two looks changes neither liveness nor records, only the pid shown.
        if alive != known.producerAlive || known.activitySinceStatus || known.status == nil
            || known.touchedNanos > known.statusNanos || now &- known.statusNanos >= DrainTiming.quietStatusNanos
        {
            guard let status = try? ring.consumer.status(producerAlive: alive) else { return false }
            ring.liveness.read(status, nowNanos: now)
        }
        guard let status = ring.liveness.status else { return false }
        // Dead and drained: nothing more can arrive until a producer attaches again (it opens the
        // file, which inotify reports), so the file is let go of at the end of the pass.
        if !alive, wakeup.isWatching, !ring.quarantine.isOn, !ring.schedule.watch.newLanesPending,
            now &- ring.liveness.touchedNanos >= DrainTiming.releaseGraceNanos,
            let fresh = ring.liveness.statusNanos == now ? status : try? ring.consumer.status(producerAlive: false),
            fresh.backlog == 0
        {
            releaseAtPassEnd(ring)
        }
        var changed = false
        if status.producerAlive != ring.liveness.producerAlive {
            changed = true
            ring.liveness.producer(alive: status.producerAlive)
            ringLog(
                status.producerAlive
                    ? "ring \(name): producer pid \(status.producerPID) attached"
                    : "ring \(name): producer pid \(status.producerPID) died; draining what it left (backlog \(status.backlog))",
                level: status.producerAlive ? .info : .warn)
            // A bot's own producer that died holding lanes (killed, crashed, or it exited without
            // detaching: a detach retires every lane). A worker's exit is how pools recycle them.
            if !status.producerAlive, WorkerRing(name) == nil, status.lanes.contains(where: { $0.state == .active }) {
                _ = captureDesk?.submit(.botDied(ring.bot.name), bots: [ring.bot.name], nowNanos: now)
            }
        }
        // Alive by its lock, but stopped (SIGSTOP, a debugger): nothing can be written meanwhile.
        let stopped = status.producerAlive && processStates.isStopped(pid: status.producerPID, nowNanos: now) == true
        if stopped != ring.liveness.producerStopped {
            changed = true
            ring.liveness.producer(stopped: stopped)
            ringLog(
                stopped
                    ? "ring \(name): producer pid \(status.producerPID) is stopped (SIGSTOP or a debugger): "
                        + "alive, but none of its threads can record" : "ring \(name): producer pid \(status.producerPID) runs again")
            if stopped {
                _ = captureDesk?.submit(.botStopped(ring.bot.name), bots: [ring.bot.name], nowNanos: now)
            }
        }
        if ring.logged.dropsDue(status, nowNanos: now) {
            sayDrops(of: ring, status, nowNanos: now)
            changed = true
        }
        let rejected = ring.sourceFigures.rejected
        if let new = ring.logged.sayingRejected(rejected, nowNanos: now) {
            ringLog(
                "ring \(name): rejected \(new) invalid records (unknown metric, kind or sequence; \(rejected) in all)", level: .warn)
        }
        return changed
    }

    /// Says the records `ring`'s producer dropped since the log last said so, and why: a lane
    /// was full (the collector fell behind, or the ring is too small), or a thread found every
    /// lane taken (more threads than lanes).
    func sayDrops(of ring: TrackedRing, _ status: RingStatus, nowNanos now: UInt64, before: String? = nil) {
        let (total, unlaned) = ring.logged.sayingDrops(status, nowNanos: now)
        guard total > 0 else { return }
        let full = total - unlaned
        var causes: [String] = []
        if full > 0 { causes.append("\(full) because a lane was full") }
        if unlaned > 0 {
            causes.append(
                "\(unlaned) by threads that found all \(status.maxLanes) lanes taken (the bot has more threads than lanes: "
                    + "give it more, maxLanes or max_lanes)")
        }
        ringLog(
            "ring \(ring.name): producer dropped \(total) records\(before.map { " " + $0 } ?? ""): "
                + causes.joined(separator: ", ") + " (\(status.dropped) in all)", level: .warn)
    }

    // MARK: - Series

    /// Says once per ring in the log that a series cap refused some of its metrics.
    func sayRefusedSeries(of ring: TrackedRing) {
        guard ring.sourceFigures.refusedSeries > 0, !ring.logged.seriesRefused, let first = ring.aggregator.firstRefused else { return }
        ring.logged.seriesRefused = true
        let metric =
            first.name + (first.labels.isEmpty ? "" : "{" + first.labels.map { "\($0.key)=\($0.value)" }.joined(separator: ",") + "}")
        guard ring.aggregator.refusedSeries > 0 else {
            ringLog(
                "ring \(ring.name): metric \(metric) is registered as another kind, unit or gauge merge policy by another file of bot "
                    + "\(ring.bot.name) (or is a per-worker gauge with a label pid of its own): "
                    + "its records get no series (counted in ringside_ring_records_refused_total); give a name and label "
                    + "set one kind, unit and policy in every process", level: .warn)
            return
        }
        let cap =
            switch refusingCap(of: ring) {
            case "--max-series-bytes":
                "the collector's memory budget for series of \(options.maxSeriesBytes >> 20) MiB (--max-series-bytes)"
            case "--max-series-per-ring": "its cap of \(options.maxSeriesPerRing) series (--max-series-per-ring)"
            default: "the collector's cap of \(options.maxSeries) series (--max-series)"
            }
        ringLog(
            "ring \(ring.name): \(cap) is reached: metric \(metric) and any registered "
                + "after it get no series (counted in ringside_ring_series_refused and their records in "
                + "ringside_ring_records_refused_total); raise the cap, or register fewer label sets", level: .warn)
    }
}
