import RingsideSystem
import CRingside
import Foundation
import Ringside
@testable import RingsideCollector
@testable import RingsideExport
import RingsideHTTP
import RingsideSnapshot
import RingsideTestSupport
import Synchronization
import Testing

/// `ringside-test-producer sched-threads` in `directory`: its pid and its threads' ids by name.
private struct SchedThreads {
    let process: ChildProcess
    let pid: Int32
    let tids: [String: Int32]

    /// - Parameter burnOn: the CPU its burner spins on; nil: its burner sleeps.
    init(ring: String, in directory: RingDirectory, burnOn cpu: Int? = nil) throws {
        process = try ChildProcess(
            testProducer: "sched-threads", ring: ring, in: directory, cpu.map { ["--burn", "yes", "--cpu", "\($0)"] } ?? [],
            withInput: true)
        // "ready PID burner TID napper TID leaver TID"
        let words = try #require(process.readLine()?.split(separator: " ").map(String.init), "the producer said nothing")
        try #require(words.count == 8 && words[0] == "ready", "\(words)")
        pid = try #require(Int32(words[1]))
        var tids: [String: Int32] = [:]
        for index in stride(from: 2, to: 8, by: 2) { tids[words[index]] = Int32(words[index + 1]) }
        self.tids = tids
    }

    func key(_ name: String) -> ThreadKey { ThreadKey(pid: pid, tid: tids[name] ?? 0) }
}

/// A sampler of `snapshot` as given (a test changes what its rings say), logging into `log`.
private func sampler(of snapshot: Snapshot, log: CapturedLog = CapturedLog()) -> ThreadHealthSampler {
    ThreadHealthSampler(intervalNanos: 1_000_000_000, keptDescriptorLimit: 64, log: log.log, source: { snapshot }, publish: { _ in })
}

extension Snapshot {
    /// Changes ring `name` with `body`.
    fileprivate mutating func changeRing(_ name: String, _ body: (inout RingSnapshot) -> Void) {
        rings = rings.map { ring in
            var ring = ring
            if ring.name == name { body(&ring) }
            return ring
        }
    }

    /// The Prometheus page of this snapshot carrying `sample`.
    fileprivate func page(with sample: ThreadHealthSample) -> String {
        var served = self
        served.threadHealth = sample
        return String(decoding: PrometheusExporter.render(served), as: UTF8.self)
    }
}

extension RingSnapshot {
    /// Changes the lane whose thread is `tid` with `body`.
    fileprivate mutating func changeLane(holding tid: Int32, _ body: (inout LaneSnapshot) -> Void) {
        lanes = lanes.map { lane in
            var lane = lane
            if lane.threadID == tid { body(&lane) }
            return lane
        }
    }
}

/// A collector over `directory` whose snapshot names the rings there: one pass, then its sampler.
private func collectorWithSampler(_ directory: RingDirectory) throws -> (Collector, ThreadHealthSampler) {
    let collector = try makeCollector(directory, captured: CapturedLog())
    pass(collector)
    return (collector, try #require(collector.threadSampler, "sampling is on by default"))
}

@Suite("Thread health: the lane threads' scheduling and the bots' processes, read from /proc by real processes")
struct ThreadHealthTests {
    @Test("a thread burning a CPU beside a busy process pinned to the same CPU waits in the run queue and is preempted, more and more")
    func preemptedBurner() throws {
        try withRingDirectory { directory in
            let cpu = try lastAllowedCPU()
            let bot = try SchedThreads(ring: "sched", in: directory, burnOn: cpu)
            defer { bot.process.kill() }
            let rival = try ChildProcess(testProducer: "spin", ring: "unused", in: directory, ["--cpu", "\(cpu)"])
            defer { rival.kill() }
            #expect(rival.readLine()?.hasPrefix("spinning ") == true)
            let (_, sampler) = try collectorWithSampler(directory)

            let first = try #require(sampler.sampleRound().threads[bot.key("burner")], "the burner is sampled")
            #expect(first.kernelName == "burner")
            #expect(first.lastCPU == Int32(cpu), "pinned: it runs on CPU \(cpu) only")
            // Rising: two busy threads share one CPU, so the scheduler preempts each in turn and
            // each waits while the other runs. Facts that only grow, never a rate or a threshold.
            let later = try #require(
                eventually(seconds: 30) { () -> ThreadHealth? in
                    usleep(200_000)
                    guard let now = sampler.sampleRound().threads[bot.key("burner")] else { return nil }
                    return now.runQueueWaitNanos > first.runQueueWaitNanos && now.involuntarySwitches > first.involuntarySwitches
                        && now.cpuNanos > first.cpuNanos ? now : nil
                }, "the burner's run-queue wait and involuntary switches did not rise")
            #expect(later.lastCPU == Int32(cpu) && later.migrations == 0, "pinned: never moved")
            #expect(later.timeslices > first.timeslices)
            #expect((later.runQueueWaitRatio ?? 0) > 0 && (later.cpuRatio ?? 0) > 0)
            #expect((later.involuntarySwitchesPerSecond ?? 0) > 0)
        }
    }

    @Test("a thread that sleeps switches voluntarily, more and more; its process is read too")
    func sleeperSwitchesVoluntarily() throws {
        try withRingDirectory { directory in
            let bot = try SchedThreads(ring: "naps", in: directory)
            defer { bot.process.kill() }
            let (_, sampler) = try collectorWithSampler(directory)
            let sample = sampler.sampleRound()
            let first = try #require(sample.threads[bot.key("napper")])
            #expect(first.kernelName == "napper" && first.voluntarySwitches > 0)
            let later = try #require(
                eventually(seconds: 30) { () -> ThreadHealth? in
                    usleep(100_000)
                    let now = sampler.sampleRound().threads[bot.key("napper")]
                    return now.map { $0.voluntarySwitches > first.voluntarySwitches } == true ? now : nil
                }, "the napper's voluntary switches did not rise")
            #expect((later.voluntarySwitchesPerSecond ?? 0) > 0)
            // Its burner, not burning here, waits on a semaphore and never runs: nothing moves, and
            // its rates are 0 exactly (its stat and status need not be read again to say so).
            let blocked = try #require(sampler.sampleRound().threads[bot.key("burner")])
            #expect(blocked.cpuRatio == 0 && blocked.runQueueWaitRatio == 0)
            #expect(blocked.voluntarySwitchesPerSecond == 0 && blocked.involuntarySwitchesPerSecond == 0)

            // Its process: four threads (main, burner, napper, leaver), memory, the ring's descriptor.
            let process = try #require(sampler.sampleRound().processes[bot.pid])
            #expect(process.threads >= 4 && process.residentMemoryBytes > 0)
            #expect((process.openFDs ?? 0) >= 4, "stdin, stdout, stderr and the ring: \(process.openFDs.map(String.init) ?? "none")")
            #expect(abs(process.startTimeSeconds - Date().timeIntervalSince1970) < 600, "started moments ago")
            // The napper wakes a thousand times a second: its process's CPU time grows (in clock ticks).
            let cpu = process.cpuSeconds
            #expect(eventually(seconds: 30) { (sampler.sampleRound().processes[bot.pid]?.cpuSeconds ?? 0) > cpu })
        }
    }

    @Test("a thread that exits is no longer sampled: gone from /proc at once, and let go with its lane")
    func exitedThreadIsDropped() throws {
        try withRingDirectory { directory in
            let bot = try SchedThreads(ring: "leaving", in: directory)
            defer { bot.process.kill() }
            let (collector, sampler) = try collectorWithSampler(directory)
            let before = sampler.sampleRound()
            #expect(before.threads[bot.key("leaver")] != nil && before.threads.count == 3)
            #expect(before.figures.unreadable == 0)

            bot.process.write("leave\n")
            #expect(bot.process.readLine() == "left \(bot.tids["leaver"] ?? 0)")
            // The snapshot still lists its lane: the sampler finds it gone from /proc, and shows it no more.
            #expect(collector.snapshot.ring("leaving")?.lanes.contains { $0.threadID == bot.tids["leaver"] } == true)
            let gone = sampler.sampleRound()
            #expect(gone.threads[bot.key("leaver")] == nil && gone.threads.count == 2)
            #expect(gone.figures.unreadable == 1, "counted while its lane says it lives")
            var snapshot = collector.snapshot
            snapshot.threadHealth = gone
            let page = String(decoding: PrometheusExporter.render(snapshot), as: UTF8.self)
            #expect(!page.contains("tid=\"\(bot.tids["leaver"] ?? 0)\""), "no series of the thread gone")
            #expect(page.contains("thread=\"napper\""))
            // Its lane retired (the thread's exit released it): once the collector reads the ring's
            // status again (at once when it records; an idle ring's with its liveness, a second or
            // 30 apart), it is no longer a target, and nothing is unreadable.
            var later: UInt64 = 0
            let after = try #require(
                eventually(seconds: 10) { () -> ThreadHealthSample? in
                    later += 2_000_000_000  // passes as if seconds apart: the ring's liveness is due
                    pass(collector, offset: later)
                    let sample = sampler.sampleRound()
                    return sample.figures.unreadable == 0 ? sample : nil
                }, "the leaver's lane is still a target")
            #expect(after.threads.count == 2 && after.threads[bot.key("napper")] != nil)
            #expect(collector.snapshot.ring("leaving")?.lanes.contains { $0.threadID == bot.tids["leaver"] } == false)
        }
    }

    @Test("a process that started after its ring says it attached is another process at a reused pid: never read as the bot")
    func reusedPidIsRefused() throws {
        try withRingDirectory { directory in
            let bot = try SchedThreads(ring: "reused", in: directory)
            defer { bot.process.kill() }
            let collector = try makeCollector(directory, captured: CapturedLog())
            let real = pass(collector)
            let ring = try #require(real.ring("reused"))
            #expect(ring.producerStartRealtimeNanos > 0 && ring.producerPID == bot.pid)
            func sample(attachedAt attached: UInt64) -> ThreadHealthSample {
                var changed = real
                changed.rings = changed.rings.map { ring in
                    var ring = ring
                    ring.producerStartRealtimeNanos = attached
                    return ring
                }
                let snapshot = changed
                let sampler = ThreadHealthSampler(
                    intervalNanos: 1_000_000_000, keptDescriptorLimit: 64, log: CapturedLog().log, source: { snapshot },
                    publish: { _ in })
                return sampler.sampleRound()
            }
            // The ring as it is: its producer started before it attached.
            let honest = sample(attachedAt: ring.producerStartRealtimeNanos)
            #expect(honest.processes[bot.pid] != nil && honest.threads.count == 3)
            // A ring whose producer attached a minute before the process at its pid began: that
            // process is not its producer (the producer died and its pid went to another).
            let reused = sample(attachedAt: ring.producerStartRealtimeNanos - 60_000_000_000)
            #expect(reused.processes.isEmpty && reused.threads.isEmpty)
            #expect(reused.figures.unreadable == 3, "its three lane threads are not sampled, and counted")
        }
    }

    @Test("a round whose budget cannot read every thread leaves the rest to the next ones: all are read in turn, none lost")
    func budgetTakesThreadsInTurn() throws {
        try withRingDirectory { directory in
            // 200 threads, each holding a lane, all asleep.
            let bot = try ChildProcess(
                testProducer: "lanes", ring: "crowd", in: directory, ["--threads", "200", "--count", "1", "--max-threads", "256", "--hold"])
            defer { bot.kill() }
            let pid = try #require(bot.readLine()?.split(separator: " ").last.flatMap { Int32($0) })
            let collector = try makeCollector(directory, captured: CapturedLog())
            let snapshot = pass(collector)
            try #require(snapshot.ring("crowd")?.lanes.count { $0.state == .active } == 200)
            // No file kept (each read opens its file), a round every 100 ms: its budget, 0.5 ms of
            // CPU, reads some of the 200, never all.
            let sampler = ThreadHealthSampler(
                intervalNanos: 100_000_000, keptDescriptorLimit: 0, log: CapturedLog().log, source: { snapshot },
                publish: { _ in })
            var rounds = 0, partial = 0
            let all = eventually(seconds: 60) { () -> Bool? in
                let sample = sampler.sampleRound()
                rounds += 1
                #expect(sample.figures.unreadable == 0, "round \(rounds): every thread lives")
                #expect(sample.figures.keptDescriptors == 0)
                if sample.threads.count < 200 { partial += 1 }
                return sample.threads.count == 200 && sample.threads.keys.allSatisfy { $0.pid == pid } ? true : nil
            }
            #expect(all == true, "after \(rounds) rounds, not every thread was read")
            print("budget: every one of 200 threads read after \(rounds) rounds, \(partial) of them partial")
        }
    }

    @Test("a thread's stat and status are neither due nor an error before its schedstat is read (a round may stop between them)")
    func detailsAfterSchedstat() throws {
        let link = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")  // PID/task/TID
        let tid = try #require(link.split(separator: "/").last.flatMap { Int32($0) })
        let process = SampledProcess(pid: getpid())
        let thread = SampledThread(ThreadKey(pid: getpid(), tid: tid), of: process)
        defer {
            thread.close()
            process.close()
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
        defer { buffer.deallocate() }
        let clock = try #require(ProcClock.system)
        let read = process.read(
            buffer, keep: false, nowNanos: rs_clock_precise_ns(), attachedRealtimeNanos: 0, clock: clock, owners: [geteuid()], round: 1)
        #expect(read == .read && process.owner == geteuid() && process.checkedRound == 1)
        let startClock = ThreadStartClock(clock)
        #expect(!thread.detailsDue)
        #expect(
            thread.readDetails(buffer, keep: false, nowNanos: rs_clock_precise_ns(), startClock: startClock) == .read
                && thread.health == nil)
        #expect(thread.readSchedstat(buffer, keep: true, nowNanos: rs_clock_precise_ns()) == .read && thread.detailsDue)
        #expect(
            thread.readDetails(buffer, keep: true, nowNanos: rs_clock_precise_ns(), startClock: startClock) == .read && !thread.detailsDue)
        let health = try #require(thread.health)
        #expect(health.cpuNanos > 0 && health.timeslices > 0, "it runs: it was given a CPU")
        #expect(thread.keptDescriptors == 3, "schedstat, stat and status kept")
        // It started before now, and so before any lane's heartbeat now: it may be the lane's thread.
        #expect(health.startedMonotonicNanos > 0 && health.startedMonotonicNanos <= rs_clock_precise_ns())
        #expect(!health.startedAfter(heartbeatMonotonicNanos: rs_clock_coarse_ns()))
        #expect(thread.readSchedstat(buffer, keep: false, nowNanos: rs_clock_precise_ns()) == .read)
        #expect(thread.keptDescriptors == 2, "schedstat's given back")
    }

    @Test("each new sample is served at once, with no new snapshot: the pages are cached by both")
    func newSampleServedWithoutNewSnapshot() throws {
        try withRingDirectory { directory in
            let bot = try SchedThreads(ring: "cached", in: directory)
            defer { bot.process.kill() }
            let (collector, sampler) = try collectorWithSampler(directory)
            let endpoints = CollectorEndpoints(collector: collector)
            func page(_ path: String) -> String {
                let request = HTTPRequest(method: "GET", target: path, path: path, query: nil, minorVersion: 1, headers: [])
                return String(decoding: endpoints.handle(request).body, as: UTF8.self)
            }
            let first = sampler.sampleRound()
            let generation = collector.snapshot.generation
            let metrics = page("/metrics")
            #expect(metrics.contains("thread=\"napper\""), "the first sample is served")
            let second = sampler.sampleRound()
            #expect(collector.snapshot.generation == generation && second.sequence > first.sequence, "no new snapshot, a new sample")
            // The napper has slept since: its switches, and the sampler's CPU time, are new on the
            // pages. (Each is asked twice in a row: the cache keeps one uncompressed page.)
            #expect(page("/metrics") != metrics)
            let latest = page("/latest")
            let third = sampler.sampleRound()
            let napper = try #require(third.threads[bot.key("napper")])
            #expect(collector.snapshot.generation == generation)
            #expect(page("/latest") != latest && page("/latest").contains("\"voluntary_switches_total\":\(napper.voluntarySwitches)"))
        }
    }

    @Test("the real collector samples its bots' threads every --thread-sample-interval, and not at all with 0")
    func realCollector() throws {
        try withRingDirectory { directory in
            let bot = try SchedThreads(ring: "live", in: directory)
            defer { bot.process.kill() }
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms", "--thread-sample-interval", "200ms"])
            defer { collector.kill() }
            let napper = "ringside_thread_cpu_seconds_total{ring=\"live\",lane=\"1\",tid=\"\(bot.tids["napper"] ?? 0)\",thread=\"napper\"} "
            func napperSeconds() throws -> Double? {
                let page = try httpGet(port: port, path: "/metrics").body
                return page.split(separator: "\n").first { $0.hasPrefix(napper) }.flatMap { Double($0.dropFirst(napper.count)) }
            }
            let first = try #require(try eventually(seconds: 20) { try napperSeconds() }, "no \(napper)")
            // A new sample every 200 ms, whatever the snapshots do (the bot records nothing more):
            // the thread's CPU time grows on the page.
            #expect(try eventually(seconds: 20) { try (napperSeconds() ?? 0) > first })
            let page = try httpGet(port: port, path: "/metrics").body
            #expect(page.contains("ringside_bot_process_threads{ring=\"live\"} "))
            #expect(page.contains("ringside_collector_thread_sampler_threads 3\n"))
            if let check = try promtoolCheckMetrics(page) {
                #expect(check.status == 0 && check.report.isEmpty, "promtool: \(check.report)")
            }

            let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
            let ring = try #require((latest["rings"] as? [[String: Any]])?.first { $0["name"] as? String == "live" })
            #expect((ring["process"] as? [String: Any])?["pid"] as? Int == Int(bot.pid))
            let lanes = try #require(ring["lanes"] as? [[String: Any]])
            let napperLane = try #require(lanes.first { $0["thread_name"] as? String == "napper" })
            #expect(((napperLane["thread"] as? [String: Any])?["voluntary_switches_total"] as? Int ?? 0) > 0)
            #expect(((latest["collector"] as? [String: Any])?["thread_sampler"] as? [String: Any])?["threads"] as? Int == 3)

            collector.kill()  // one collector per ring directory: the next takes it over
            let (quiet, quietPort) = try startCollector(["--dir", directory.path, "--poll", "20ms", "--thread-sample-interval", "0"])
            defer { quiet.kill() }
            // That collector drains the ring as the first did, but reads no thread.
            _ = try eventually(seconds: 10) {
                try httpGet(port: quietPort, path: "/metrics").body.contains("ringside_ring_records_written_total{ring=\"live\"}")
            }
            let quietPage = try httpGet(port: quietPort, path: "/metrics").body
            #expect(!quietPage.contains("ringside_thread_") && !quietPage.contains("ringside_collector_thread_sampler"))
        }
    }

    // MARK: - What a ring may name: its owner's processes, their threads, the lanes' claimants

    @Test("a ring whose file another user owns names our process: neither it nor its threads are read; refused once each, said once")
    func otherOwnersProcessIsRefused() throws {
        try withRingDirectory { directory in
            let bot = try SchedThreads(ring: "posing", in: directory)
            defer { bot.process.kill() }
            let collector = try makeCollector(directory, captured: CapturedLog())
            var snapshot = pass(collector)
            #expect(snapshot.ring("posing")?.owner == geteuid(), "the file's owner, from fstat")
            // As if another user's file (uid 65534's, nobody's) named this process and its threads.
            let other: UInt32 = geteuid() == 65_534 ? 65_533 : 65_534
            snapshot.changeRing("posing") { $0.owner = other }
            let log = CapturedLog()
            let sampler = sampler(of: snapshot, log: log)
            let first = sampler.sampleRound()
            #expect(first.processes.isEmpty && first.threads.isEmpty, "nothing of it read")
            #expect(first.refusals["posing"] == [.otherOwner: 4], "its process and its three lanes")
            #expect(first.figures.refused == 3 && first.figures.unreadable == 0 && first.figures.threads == 0)
            // Counted once while it stays a target; tried again 30 s later, not each round.
            let second = sampler.sampleRound()
            #expect(second.refusals["posing"] == [.otherOwner: 4] && second.figures.refused == 3)
            let said =
                "ring posing names pid \(bot.pid) as its producer, which runs as uid \(geteuid()), not as the file's owner uid \(other)"
            #expect(log.all.count { $0.contains(said) && $0.contains("other_owner") } == 1, "\(log.all)")
            #expect(log.all.count == 1, "said once for the bot: \(log.all)")

            let page = snapshot.page(with: second)
            #expect(!page.contains("ringside_thread_cpu_seconds_total{") && !page.contains("ringside_bot_process_threads{"))
            #expect(page.contains("\nringside_thread_health_refused_total{ring=\"posing\",reason=\"other_owner\"} 4\n"))
            #expect(page.contains("\nringside_collector_thread_sampler_refused 3\n"))
            var served = snapshot
            served.threadHealth = second
            let latest = try jsonObject(String(decoding: JSONExporter.latest(served), as: UTF8.self))
            let ring = try #require((latest["rings"] as? [[String: Any]])?.first { $0["name"] as? String == "posing" })
            #expect(ring["process"] == nil && (ring["thread_health_refused"] as? [String: Any])?["other_owner"] as? Int == 4)
            #expect((ring["lanes"] as? [[String: Any]])?.allSatisfy { $0["thread"] == nil } == true)
        }
    }

    @Test("a process named by its owner's ring and by another user's is read once, and shown under its owner's ring only")
    func processShownUnderItsOwnersRingOnly() throws {
        try withRingDirectory { directory in
            let bot = try SchedThreads(ring: "mine", in: directory)
            defer { bot.process.kill() }
            let collector = try makeCollector(directory, captured: CapturedLog())
            var snapshot = pass(collector)
            var posing = try #require(snapshot.ring("mine"))
            posing.name = "posing"
            posing.bot = "posing"
            posing.owner = geteuid() &+ 1
            snapshot.rings.append(posing)
            let sample = sampler(of: snapshot).sampleRound()
            #expect(sample.processes[bot.pid] != nil && sample.threads.count == 3, "read for its owner's ring")
            let mine = try #require(snapshot.ring("mine"))
            #expect(sample.process(writing: mine) != nil && sample.process(writing: posing) == nil)
            #expect(mine.lanes.allSatisfy { sample.thread(holding: $0, of: mine) != nil })
            #expect(posing.lanes.allSatisfy { sample.thread(holding: $0, of: posing) == nil })
            #expect(sample.refusals == ["posing": [.otherOwner: 4]])
            #expect(sample.figures.refused == 0, "every thread is read, for the ring of its owner")
            let page = snapshot.page(with: sample)
            #expect(
                page.contains("ringside_bot_process_threads{ring=\"mine\"} ")
                    && !page.contains("ringside_bot_process_threads{ring=\"posing\"}"))
            #expect(!page.contains("ringside_thread_cpu_seconds_total{ring=\"posing\""))
        }
    }

    @Test("a process refused under another user's ring is read at once when a ring of its owner names it too, and not counted again")
    func refusedProcessTakenUpByItsOwnersRing() throws {
        try withRingDirectory { directory in
            let bot = try SchedThreads(ring: "mine", in: directory)
            defer { bot.process.kill() }
            let collector = try makeCollector(directory, captured: CapturedLog())
            let real = pass(collector)
            var posing = try #require(real.ring("mine"))
            posing.name = "posing"
            posing.bot = "posing"
            posing.owner = geteuid() &+ 1
            var onlyPosing = real
            onlyPosing.rings = [posing]
            let current = Locked(onlyPosing)
            let sampler = ThreadHealthSampler(
                intervalNanos: 1_000_000_000, keptDescriptorLimit: 64, log: CapturedLog().log, source: { current.withLock { $0 } },
                publish: { _ in })
            let refused = sampler.sampleRound()
            #expect(refused.processes.isEmpty && refused.refusals == ["posing": [.otherOwner: 4]])
            var both = real
            both.rings.append(posing)
            both.generation = real.generation + 1
            current.withLock { $0 = both }
            let taken = sampler.sampleRound()
            #expect(taken.processes[bot.pid] != nil && taken.threads.count == 3, "read in the next round, not 30 s later")
            #expect(taken.refusals == ["posing": [.otherOwner: 4]], "the same refusals, counted once")
        }
    }

    @Test(
        "a lane naming a thread of another process is refused as not its thread; an id no task has is unreadable; the other lanes are read")
    func threadOfAnotherProcessIsRefused() throws {
        try withRingDirectory { directory in
            let bot = try SchedThreads(ring: "stray", in: directory)
            defer { bot.process.kill() }
            let other = try SchedThreads(ring: "other", in: directory)
            defer { other.process.kill() }
            let collector = try makeCollector(directory, captured: CapturedLog())
            var snapshot = pass(collector)
            let napper = try #require(bot.tids["napper"]), leaver = try #require(bot.tids["leaver"])
            let lane = try #require(snapshot.ring("stray")?.lanes.first { $0.threadID == napper }?.index)
            snapshot.changeRing("stray") { ring in
                ring.changeLane(holding: napper) { $0.threadID = other.tids["napper"] ?? 0 }
                ring.changeLane(holding: leaver) { $0.threadID = Int32.max }  // above any pid_max: no such task
            }
            let log = CapturedLog()
            let sample = sampler(of: snapshot, log: log).sampleRound()
            #expect(sample.refusals == ["stray": [.notItsThread: 1]])
            #expect(sample.threads[ThreadKey(pid: bot.pid, tid: other.tids["napper"] ?? 0)] == nil)
            #expect(sample.threads[bot.key("burner")] != nil && sample.threads[other.key("napper")] != nil, "the rest is read")
            #expect(sample.figures.refused == 1 && sample.figures.unreadable == 1)
            #expect(
                log.contains(
                    "ring stray lane \(lane) names thread \(other.tids["napper"] ?? 0) of pid \(bot.pid), which is not a thread of that process"
                ))
        }
    }

    @Test(
        "a thread that started after its lane's heartbeat did not claim the lane: refused under that lane, shown under the lane it claimed")
    func threadStartedAfterClaimIsRefused() throws {
        try withRingDirectory { directory in
            let bot = try SchedThreads(ring: "late", in: directory)
            defer { bot.process.kill() }
            let collector = try makeCollector(directory, captured: CapturedLog())
            var snapshot = pass(collector)
            let napper = try #require(bot.tids["napper"])
            let claimed = try #require(snapshot.ring("late")?.lanes.first { $0.threadID == napper }?.heartbeatMonotonicNanos)
            #expect(claimed > 0 && claimed <= rs_clock_coarse_ns())
            // Its lane as a lane left by a thread long gone would say: written last a minute ago
            // (or at boot), before the thread now at that id began.
            let longAgo = rs_clock_precise_ns() - min(rs_clock_precise_ns(), 60_000_000_000)
            snapshot.changeRing("late") { $0.changeLane(holding: napper) { $0.heartbeatMonotonicNanos = longAgo } }
            let alone = sampler(of: snapshot).sampleRound()
            #expect(alone.refusals == ["late": [.startedAfterClaim: 1]])
            #expect(alone.threads[bot.key("napper")] == nil && alone.threads.count == 2, "refused by its only lane: not kept")
            #expect(alone.figures.refused == 1)

            // A second ring of the same owner whose lane it did claim (the heartbeat as it is): it is
            // read, and shown under that lane only.
            var honest = try #require(pass(collector).ring("late"))
            honest.name = "late-copy"
            snapshot.rings.append(honest)
            let both = sampler(of: snapshot).sampleRound()
            #expect(both.threads[bot.key("napper")] != nil && both.refusals == ["late": [.startedAfterClaim: 1]])
            let late = try #require(snapshot.ring("late"))
            let lateLane = try #require(late.lanes.first { $0.threadID == napper })
            let honestLane = try #require(honest.lanes.first { $0.threadID == napper })
            #expect(both.thread(holding: lateLane, of: late) == nil && both.thread(holding: honestLane, of: honest) != nil)
        }
    }
}
