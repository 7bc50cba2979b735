#if canImport(Glibc)
import Glibc
#endif
import CRingside
import Dispatch
import Foundation
import Ringside
import RingsideSnapshot
import RingsideSystem
import Synchronization

/// The collector's part that finds ring files, on a thread of its own: however many files the
/// directory holds, and whatever they are, the drain thread never looks at them. Its work comes
/// in rounds of about a millisecond, and takes a quarter of a core at most over time (`CPUShare`);
/// an idle directory costs nothing.
///
/// It watches the directory's names (inotify: created, moved in or out, removed, written,
/// chmodded; never opened or closed, so the files it opens itself do not wake it), and lists the
/// directory whole at start, when events were lost, every 30 s while watched (a fallback, which
/// looks again only at files it did not refuse: a refused file that changes has an event) and
/// every 250 ms without inotify, a bounded number of entries a round. Names events named and
/// those listed are looked at in turn. Each is looked at with `lstat` first: a file that cannot
/// be a ring (empty, another user's, not a regular file) is refused without an open; the rest are
/// opened as their consumer. A refused file is remembered by what `lstat` said of it (`FileVersion`) and not
/// opened again until that changes, or, for a refusal that depends on something besides the
/// file (another consumer holds it, the mapping limits), after 5 s. A file found not ready
/// within a second of its making is looked at every 5 ms for that second: its producer writes
/// the header through a mapping, which no event reports.
///
/// A ring opened is handed to the drain thread (`DiscoveryHandoff`), which adopts it; the name is
/// then the drain's, and discovery only tells it when the file under the name goes or is
/// replaced. Names come back when the drain lets go of them.
// @unchecked: its state is touched by its own thread only, or by the caller of `round` when not
// started (tests step time, and so does the collector's last pass); `stop` waits for the thread.
final class RingDiscovery: @unchecked Sendable {
    private let options: CollectorOptions
    let log: CollectorLog
    /// Lines about files refused: 100 at once, then one every 10 s, the rest counted (100,000 bogus
    /// files must not fill the log, nor block a thread on a full standard error).
    let refusalLog: RingLog
    let handoff: DiscoveryHandoff
    private let drainWakeup: DrainWakeup
    /// Which files it takes.
    private let takes: Takes
    /// Its own watch: names created, moved, removed or changed.
    let watch: DirectoryWatch

    /// The names the drain holds, and the rings opened this round.
    var handed = Handed()
    var refused: [String: RefusedFile] = [:]
    /// Files found not ready within a second of their making.
    private var being = BeingMade()
    /// Rings found that wait for a descriptor.
    var descriptorWait = DescriptorWait()
    /// Names waiting to be looked at.
    private var pending = PendingNames()
    /// The directory's listings.
    var scan = Listing()
    /// The skipped rings shown (see `RingDiscovery+Shown`).
    var skippedShown = SkippedShown()

    /// Its thread, whose pauses (see `CPUShare`) `stop` ends at once.
    private let loop = PartThread(name: "ringside-find")

    /// How often the directory is listed whole: a fallback while inotify watches it (events are
    /// lost only with a signal, which has it listed at once), the way while it does not.
    static let watchedListingNanos: UInt64 = 30_000_000_000
    static let unwatchedListingNanos: UInt64 = 250_000_000
    /// A file not ready this soon after its making (its status change time, or since discovery
    /// first found it so) is being made: looked at again every `beingMadeRetryNanos` meanwhile.
    static let newFileNanos: UInt64 = 1_000_000_000
    static let beingMadeRetryNanos: UInt64 = 5_000_000
    /// How soon a refusal that does not depend on the file alone is tried again.
    static let retryNanos: UInt64 = 5_000_000_000
    /// A round's work at most, when its thread runs it: its time looking at names, reads of
    /// events (16 KiB, some 340 events, each), files being made looked at again, directory
    /// entries listed.
    static let roundNanos: UInt64 = 1_000_000
    static let readsPerRound = 4
    static let beingMadePerRound = 64
    static let entriesPerRound = 1_024
    /// The share of a core its thread takes at most, over time.
    static let cpuShare = 0.25
    /// Names events named that wait to be looked at, past which discovery is too far behind its
    /// events to catch up one by one: they are dropped, and the directory listed instead (what
    /// is there now, without the files made and removed meanwhile).
    static let behindLimit = 4_096
    /// The least time between two makings of the skipped rings shown (which sorts every refused
    /// name): this, or ten times what the last cost.
    static let showNanos: UInt64 = 250_000_000

    init(
        options: CollectorOptions, log: CollectorLog, handoff: DiscoveryHandoff, watch: DirectoryWatch,
        drainWakeup: DrainWakeup, ringLimit: Int
    ) {
        self.options = options
        self.log = log
        refusalLog = RingLog(log, kind: "lines about ring files refused", perSecond: 0.1, burst: 100)
        self.handoff = handoff
        self.watch = watch
        self.drainWakeup = drainWakeup
        takes = Takes(named: Set(options.rings), allowedOwners: Set(options.allowedUIDs), ringLimit: ringLimit)
    }

    // MARK: - Its thread

    /// Starts its thread.
    func start() {
        loop.startOrExit { [self] in
            // At the drain's priority, not below: a host whose every core is busy (spinning bots)
            // would leave a thread below it next to nothing, and new bots unfound. Its share
            // keeps it to a quarter of a core.
            var share = CPUShare(fraction: Self.cpuShare, burstNanos: 20_000_000, nowNanos: rs_clock_precise_ns())
            while !loop.isStopping {
                let cpuBefore = ThreadHealthSampler.threadCPUNanos()
                let more = round(nowNanos: rs_clock_precise_ns(), whole: false)
                let pause = share.pause(spent: ThreadHealthSampler.threadCPUNanos() &- cpuBefore, nowNanos: rs_clock_precise_ns())
                // Events wait in inotify's queue meanwhile; a stop ends the pause.
                if pause > 0 { loop.pause(nanos: pause) }
                if more { continue }
                watch.wait(timeoutNanos: sleepNanos(nowNanos: rs_clock_precise_ns()))
            }
        }
    }

    /// Stops its thread; what it found and did not hand over yet stays with the handoff.
    func stop() { loop.stop(waking: watch.signal) }

    /// Whether its thread runs.
    var isRunning: Bool { loop.isRunning }

    /// Whether every name found has been looked at: no listing under way, none queued.
    var hasLookedAtEveryName: Bool { scan.underWay == nil && pending.urgent.isEmpty && pending.listed.isEmpty }

    /// How long its thread may sleep: until the next listing, the next look at a file being
    /// made, or a refusal's retry, whichever comes first (an event or a signal wakes it sooner).
    private func sleepNanos(nowNanos now: UInt64) -> UInt64 {
        func until(_ time: UInt64) -> UInt64 { time > now ? time - now : 0 }
        var sleep = until(scan.lastNanos &+ listingInterval)
        if let next = being.nextNanos { sleep = min(sleep, until(next)) }
        for time in pending.timed.values { sleep = min(sleep, until(time)) }
        if skippedShown.stale { sleep = min(sleep, until(skippedShown.lastNanos &+ showSpacingNanos)) }
        return sleep
    }

    private var listingInterval: UInt64 { watch.isWatching ? Self.watchedListingNanos : Self.unwatchedListingNanos }

    // MARK: - A round

    /// One round: takes what the drain let go of, reads events, lists the directory when due,
    /// and looks at names, a bounded number unless `whole` (a caller stepping time: everything
    /// now). Returns whether work is left for the next round.
    @discardableResult
    func round(nowNanos now: UInt64, whole: Bool) -> Bool {
        takeLetGo(nowNanos: now)
        if scan.requested || now &- scan.lastNanos >= listingInterval { startListing(nowNanos: now) }
        readEvents(whole: whole)
        continueListing(entries: whole ? .max : Self.entriesPerRound)
        pending.releaseTimed(nowNanos: now)
        if !descriptorWait.names.isEmpty, handoff.descriptorsInUse < takes.ringLimit {  // descriptors came free
            for name in descriptorWait.names { pending.urgent.push(name) }
        }
        for name in being.takeDue(nowNanos: now, whole: whole) { pending.urgent.push(name) }
        let deadline = whole ? UInt64.max : rs_clock_precise_ns() &+ Self.roundNanos
        var looked = 0
        while let name = pending.next(turn: looked) {
            lookAtNotingStart(name, nowNanos: now)
            looked += 1
            if rs_clock_precise_ns() >= deadline { break }
        }
        sayWaiting()
        publish(nowNanos: now, now: whole)
        handoff.post(found: handed.takeOpened(), start: takeStartChange())
        return pending.eventsLeft || scan.underWay != nil || !pending.urgent.isEmpty || !pending.listed.isEmpty
    }

    /// Takes back the names of the rings the drain let go of: one it could not read is refused
    /// (and tried again after a while); the others are looked at again (a new file may be there).
    private func takeLetGo(nowNanos now: UInt64) {
        for letGo in handoff.takeLetGo() {
            let name = letGo.name
            // A ring of a file since replaced, and opened again here: the name stays the drain's.
            if let identity = letGo.identity, let holding = handed.held[name], holding != identity { continue }
            handed.held[name] = nil
            guard let problem = letGo.problem else {
                pending.urgent.push(name)
                continue
            }
            // The drain said it in the log already.
            let state = (try? System.lstat(options.directory.filePath(for: name))).map(FileVersion.init)
            refused[name] = RefusedFile(state: state, problem: problem, quiet: false, retryAtNanos: now &+ letGo.retryNanos)
            pending.lookAgain(name, at: now &+ letGo.retryNanos)
            skippedShown.stale = true
        }
    }

    /// Begins a listing of the directory (or of the rings `--ring` names; one under way begins
    /// again). Says when the directory is missing or unreadable, and watches it when it is not.
    private func startListing(nowNanos now: UInt64) {
        scan.begin(nowNanos: now, watching: watch.isWatching)
        let directory = options.directory
        let problem = directory.accessProblem()
        if scan.found(directoryProblem: problem) {
            log(
                problem.map { "ring directory \(directory.path): \($0); waiting for it" }
                    ?? "ring directory \(directory.path) is readable", level: problem == nil ? .info : .warn)
        }
        if problem == nil {
            if !watch.isWatching { watch.watch(directory.path) }
            if !drainWakeup.watch.isWatching { drainWakeup.watch.watch(directory.path) }
        }
        guard takes.named.isEmpty else {
            for name in options.rings {
                pending.listed.push(name)
                if handed.held[name] == nil { scan.start?.found(name) }
            }
            finishListing(seen: takes.named)
            return
        }
        guard problem == nil, let stream = try? System.DirectoryStream(directory.path) else {
            finishListing(seen: [])  // nothing there
            return
        }
        scan.underWay = (stream, [])
    }

    /// Reads up to `entries` more names of the listing under way and queues the rings' to be
    /// looked at, in name order (a bot's own file before its workers'); at its end, forgets what
    /// it knew of files gone, and tells the drain of held ones gone.
    private func continueListing(entries: Int) {
        guard let stream = scan.underWay?.stream, var seen = scan.underWay?.seen else { return }
        scan.underWay = nil  // `seen` is not copied as it grows
        let prefix = RingDirectory.filePrefix
        var found: [String] = []
        var read = 0
        var ended = false
        while read < entries {
            guard let names = try? stream.next(min(entries - read, Self.entriesPerRound)), !names.isEmpty else {
                ended = true
                break
            }
            read += names.count
            for fileName in names where fileName.hasPrefix(prefix) {
                let name = String(fileName.dropFirst(prefix.count))
                guard (try? RingDirectory.validate(ringName: name)) != nil else { continue }
                seen.insert(name)
                if scan.looksAtRefused || refused[name] == nil { found.append(name) }
                if handed.held[name] == nil { scan.start?.found(name) }
            }
        }
        for name in found.sorted() { pending.listed.push(name) }
        if ended { finishListing(seen: seen) } else { scan.underWay = (stream, seen) }
    }

    /// A listing ended with `seen`: what was known of files not in it is forgotten, and the drain
    /// told of its rings whose files are gone.
    private func finishListing(seen: Set<String>) {
        if scan.start?.listed == false {
            scan.start?.listed = true
            scan.start?.change.listed = true
        }
        for name in refused.keys where !seen.contains(name) { forget(name) }
        for name in descriptorWait.names where !seen.contains(name) { forget(name) }
        for name in being.since.keys where !seen.contains(name) { forget(name) }
        for name in handed.held.keys where !seen.contains(name) { tellDrainChanged(name) }
    }

    /// Reads the events waiting, a bounded number unless `whole`, and queues the names they name:
    /// any but the drain's, and the drain's when their file came or went. Events lost, or the
    /// watch gone, have the directory listed.
    private func readEvents(whole: Bool) {
        let comeOrGone = UInt32(IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM)
        let gone = UInt32(IN_DELETE | IN_MOVED_FROM)
        let outcome = watch.readEvents(maxReads: whole ? .max : Self.readsPerRound) { bytes, mask in
            let name = String(decoding: bytes, as: UTF8.self)
            guard takes.named.isEmpty ? (try? RingDirectory.validate(ringName: name)) != nil : takes.named.contains(name) else { return }
            if handed.held[name] != nil {
                if mask & comeOrGone != 0 { pending.urgent.push(name) }  // else the drain's own watch sees it written
                return
            }
            guard mask & gone == 0 || takes.named.contains(name) else {
                // Gone: nothing to look at (a file made under the name since has an event of its own).
                pending.urgent.remove(name)
                forget(name)
                return
            }
            pending.urgent.push(name)
        }
        if outcome.overflowed || outcome.watchLost { scan.requested = true }
        if pending.urgent.count > Self.behindLimit {
            pending.urgent.removeAll()
            scan.requested = true
        }
        pending.eventsLeft = outcome.more
    }

    // MARK: - Looking at one name

    /// Looks at `name` (`look(at:)`), noting it for the first listing's bots (see
    /// `DiscoveryHandoff.heldAtStart`): a ring it opens holds its bot until the drain takes it
    /// when the listing found it or is still under way; a name the listing found and that is not
    /// opened now is settled.
    private func lookAtNotingStart(_ name: String, nowNanos now: UInt64) {
        guard scan.start != nil else { return look(at: name, nowNanos: now) }
        let listed = scan.start?.names.remove(name) != nil
        let opened = handed.opened.count
        look(at: name, nowNanos: now)
        if handed.opened.count > opened {
            handed.holdAtStart(opened, listed || scan.start?.listed == false)
        } else if listed {
            scan.start?.change.settled.append(WorkerRing.botName(ofRing: name))
        }
    }

    /// What changed of the first listing's names since the last call; the record of them is let
    /// go once the listing ended and every name was looked at.
    private func takeStartChange() -> DiscoveryHandoff.StartChange {
        guard let change = scan.start?.change else { return DiscoveryHandoff.StartChange() }
        scan.start?.change = DiscoveryHandoff.StartChange()
        if scan.start?.listed == true, scan.start?.names.isEmpty == true { scan.start = nil }
        return change
    }

    /// Looks at one name: a held ring's file checked to be the same; any other looked at with
    /// `lstat`, refused from it if it can be, or as it was refused when it has not changed, else
    /// opened, and handed to the drain or refused.
    private func look(at name: String, nowNanos now: UInt64) {
        let directory = options.directory
        let path = directory.filePath(for: name)
        if let identity = handed.held[name] {
            let info = try? System.lstat(path)
            if info.map({ !FileVersion($0).isFile(identity) }) ?? true { tellDrainChanged(name) }
            return
        }
        let info: stat
        do { info = try System.lstat(path) } catch {
            // Gone: nothing to remember (a ring named with --ring is opened, to say it is missing).
            guard takes.named.contains(name) else {
                forget(name)
                return
            }
            open(name, state: nil, nowNanos: now)
            return
        }
        let state = FileVersion(info)
        if being.since[name] == nil, let known = refused[name], known.stands(for: state, nowNanos: now) { return }
        if let refusal = RingConsumer.refusal(
            mode: info.st_mode, owner: info.st_uid, size: Int(info.st_size), name: name, directory: directory,
            allowedOwners: takes.allowedOwners)
        {
            refuse(name, refusal, state: state, byStat: true, nowNanos: now)
            return
        }
        open(name, state: state, nowNanos: now)
    }

    /// Opens ring `name` as its consumer, within the descriptor budget, and hands it to the drain.
    private func open(_ name: String, state: FileVersion?, nowNanos now: UInt64) {
        guard handoff.descriptorsInUse + handed.opened.count < takes.ringLimit else {
            if descriptorWait.wait(name) { skippedShown.stale = true }
            return
        }
        handed.opening()
        do {
            let consumer = try RingConsumer(
                name, directory: options.directory, allowedOwners: takes.allowedOwners, readsWeights: true,
                drainIntervalNanos: DrainTiming.passBudgetNanos)
            let loggedProblem = refused[name]?.problem
            forget(name)
            handed.opened(DiscoveryHandoff.FoundRing(consumer: consumer, loggedProblem: loggedProblem), identity: consumer.identity)
        } catch {
            refuse(name, error, state: state, nowNanos: now)
        }
    }

    /// Remembers why `name` is not read: until its file changes, or for a while (see `RefusedFile`).
    /// - Parameter byStat: `lstat` told (its words are made again from `state` when needed).
    private func refuse(_ name: String, _ error: RingError, state: FileVersion?, byStat: Bool = false, nowNanos now: UInt64) {
        if case .consumerAlive(_, let pid) = error, pid == getpid() {
            // This collector's own consumer of the file, let go by the drain a moment ago and not
            // closed yet: not a problem to show (what the drain said stays), only a retry.
            pending.lookAgain(name, at: now &+ Self.retryNanos)
            return
        }
        var quiet = false
        var retryAt: UInt64 = 0
        switch error {
        case .notFound:
            guard takes.named.contains(name) else {
                forget(name)
                return
            }
            retryAt = now &+ Self.retryNanos
        case .notReady:
            // Empty, or its header not written yet: quiet. One made within the second may be
            // finished any moment with no event (the header goes through a mapping): looked at
            // again shortly, for that second. An empty one grows with an event.
            quiet = true
            let since = being.since[name] ?? now
            let madeLately = being.since[name] != nil || (state.map(isRecent) ?? false)
            if let state, state.size > 0, madeLately, now &- since < Self.newFileNanos {
                being.note(name, since: since)
            } else {
                being.done(name)
            }
        case .consumerAlive, .producerAlive, .unavailable, .system, .noSpace:
            retryAt = now &+ Self.retryNanos
        default:
            break  // what the file holds: until it changes
        }
        let refusal = RefusedFile(state: state, problem: byStat ? nil : "\(error)", quiet: quiet, retryAtNanos: retryAt)
        let before = refused[name]
        if before.map({ !refusal.saysTheSame(as: $0) }) ?? true {
            if !quiet { refusalLog("skipping ring \(name): \(error)", level: .warn) }
            skippedShown.stale = true
        }
        if descriptorWait.end(name) { skippedShown.stale = true }
        refused[name] = refusal
        if retryAt != 0 { pending.lookAgain(name, at: retryAt) }
    }

    /// Whether a file's status changed within `newFileNanos` of now (CLOCK_REALTIME, as file times are).
    private func isRecent(_ state: FileVersion) -> Bool {
        let realtime = Int64(clamping: rs_clock_realtime_ns())
        return abs(realtime &- state.changedNanos) < Int64(Self.newFileNanos)
    }

    /// Forgets what was known of `name` (its file is gone, or handed to the drain).
    private func forget(_ name: String) {
        if let known = refused.removeValue(forKey: name), !known.quiet { skippedShown.stale = true }
        being.done(name)
        pending.lookAgain(name, at: 0)
        if descriptorWait.end(name) { skippedShown.stale = true }
    }

    private func tellDrainChanged(_ name: String) { handoff.post(changed: name) }

    /// What is shown of `name`, refused or waiting for a descriptor.
    func problem(of name: String) -> String {
        guard let refusal = refused[name] else {
            return "not attached: \(handoff.descriptorsInUse) rings are open, all that the open-file limit allows beside the "
                + "HTTP server's reserve; raise the limit (ulimit -n, LimitNOFILE=), or remove finished bots' files "
                + "(ringside-dump clean)"
        }
        if let problem = refusal.problem { return problem }
        guard let state = refusal.state,
            let error = RingConsumer.refusal(
                mode: mode_t(state.mode), owner: state.owner, size: Int(state.size), name: name, directory: options.directory,
                allowedOwners: takes.allowedOwners)
        else { return "refused" }
        return "\(error)"
    }
}
