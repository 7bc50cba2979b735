import Foundation
import Ringside
@testable import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

/// The user owning the bots' files and running their processes.
private let owner: UInt32 = 1_000

/// A snapshot of bot `bot-a` (pid 4242: a named thread, a thread named by the kernel only, a
/// retired lane), its worker (pid 5000) and a dead bot, each owned by `owner`; when `sampled`, a
/// thread sample of them all (else: sampling off, or before the first round).
private func fixture(sampled: Bool = true) -> Snapshot {
    /// `ring`, owned by `owner`, written by process `pid`, with `lanes`.
    func owned(_ ring: RingSnapshot, pid: Int32, lanes: [LaneSnapshot]) -> RingSnapshot {
        var ring = ring
        ring.owner = owner
        ring.producerPID = pid
        ring.lanes = lanes
        return ring
    }
    var snapshot = Snapshot()
    let bot = owned(
        RingSnapshot(name: "bot-a", state: .live), pid: 4_242,
        lanes: [
            LaneSnapshot(
                index: 0, state: .active, threadID: 4_243, threadName: "md-feed", backlog: 0, recordsTotal: 10, consumedTotal: 10,
                droppedTotal: 0, heartbeatAgeSeconds: 0.1),
            LaneSnapshot(
                index: 1, state: .active, threadID: 4_244, backlog: 0, recordsTotal: 5, consumedTotal: 5, droppedTotal: 0,
                heartbeatAgeSeconds: 0.1),
            LaneSnapshot(
                index: 2, state: .retired, threadID: 0, backlog: 0, recordsTotal: 1, consumedTotal: 1, droppedTotal: 0,
                heartbeatAgeSeconds: 9),
        ])
    let worker = owned(
        RingSnapshot(name: "bot-a@5000", bot: "bot-a", worker: 5_000, state: .live), pid: 5_000,
        lanes: [
            LaneSnapshot(
                index: 0, state: .active, threadID: 5_001, threadName: "pool-1", backlog: 0, recordsTotal: 1, consumedTotal: 1,
                droppedTotal: 0, heartbeatAgeSeconds: 0.5)
        ])
    let dead = owned(
        RingSnapshot(name: "bot-d", state: .producerDead), pid: 6_000,
        lanes: [
            LaneSnapshot(
                index: 0, state: .active, threadID: 6_001, threadName: "stale", backlog: 0, recordsTotal: 1, consumedTotal: 1,
                droppedTotal: 0, heartbeatAgeSeconds: 30)
        ])
    snapshot.rings = [bot, worker, dead]
    guard sampled else { return snapshot }

    var feed = ThreadHealth(
        cpuNanos: 1_500_000_000, runQueueWaitNanos: 250_000_000, timeslices: 900, voluntarySwitches: 700, involuntarySwitches: 200,
        lastCPU: 1, migrations: 3, kernelName: "md-feed")
    feed.cpuRatio = 0.75
    feed.runQueueWaitRatio = 0.125
    feed.voluntarySwitchesPerSecond = 70
    feed.involuntarySwitchesPerSecond = 20.5
    let unnamed = ThreadHealth(
        cpuNanos: 2_000_000, runQueueWaitNanos: 1_000, timeslices: 4, voluntarySwitches: 4, involuntarySwitches: 0, lastCPU: 0,
        migrations: 0, kernelName: "kthr")
    let pool = ThreadHealth(
        cpuNanos: 3_000_000_000, runQueueWaitNanos: 0, timeslices: 1, voluntarySwitches: 0, involuntarySwitches: 1, lastCPU: 0,
        migrations: 0, kernelName: "pool-1")
    var botProcess = ProcessHealth(
        cpuSeconds: 12.5, residentMemoryBytes: 21_069_824, threads: 4, openFDs: 6, majorPageFaults: 2, startTimeSeconds: 1_795_509_995.83)
    botProcess.cpuRatio = 0.97
    botProcess.owner = owner
    var workerProcess = ProcessHealth(
        cpuSeconds: 3, residentMemoryBytes: 4_096, threads: 1, openFDs: nil, majorPageFaults: 0, startTimeSeconds: 1_795_510_000)
    workerProcess.owner = owner
    var figures = ThreadSamplerFigures()
    figures.threads = 3
    figures.processes = 2
    figures.unreadable = 1
    figures.deferred = 0
    figures.roundSeconds = 0.000_25
    figures.cpuSecondsTotal = 0.125
    figures.keptDescriptors = 13
    figures.keptDescriptorLimit = 2_500
    snapshot.threadHealth = ThreadHealthSample(
        sequence: 7, realtimeNanos: 1_795_510_100_000_000_000, intervalNanos: 1_000_000_000,
        threads: [
            ThreadKey(pid: 4_242, tid: 4_243): feed, ThreadKey(pid: 4_242, tid: 4_244): unnamed, ThreadKey(pid: 5_000, tid: 5_001): pool,
            ThreadKey(pid: 6_000, tid: 6_001): pool,
        ],
        processes: [4_242: botProcess, 5_000: workerProcess, 6_000: workerProcess], figures: figures)
    return snapshot
}

@Suite("Thread health in the exporters: the Prometheus families and /latest's fields of a given sample")
struct ThreadHealthExportTests {
    @Test("/metrics: each lane thread's scheduling with its ring, lane, tid and name; each process's figures; the sampler's own")
    func prometheusLines() throws {
        let page = String(decoding: PrometheusExporter.render(fixture()), as: UTF8.self)
        let feed = #"{ring="bot-a",lane="0",tid="4243",thread="md-feed"}"#
        let unnamed = #"{ring="bot-a",lane="1",tid="4244",thread="kthr"}"#
        let pool = #"{ring="bot-a",worker="5000",lane="0",tid="5001",thread="pool-1"}"#
        for line in [
            "# HELP ringside_thread_cpu_seconds_total CPU time the lane's thread has used (its schedstat)",
            "# TYPE ringside_thread_cpu_seconds_total counter",
            "ringside_thread_cpu_seconds_total\(feed) 1.5", "ringside_thread_cpu_seconds_total\(unnamed) 0.002",
            "ringside_thread_cpu_seconds_total\(pool) 3",
            "# TYPE ringside_thread_runqueue_wait_seconds_total counter", "ringside_thread_runqueue_wait_seconds_total\(feed) 0.25",
            "ringside_thread_timeslices_total\(feed) 900",
            "# TYPE ringside_thread_context_switches_total counter",
            #"ringside_thread_context_switches_total{ring="bot-a",lane="0",tid="4243",thread="md-feed",kind="voluntary"} 700"#,
            #"ringside_thread_context_switches_total{ring="bot-a",lane="0",tid="4243",thread="md-feed",kind="involuntary"} 200"#,
            "# TYPE ringside_thread_last_cpu gauge", "ringside_thread_last_cpu\(feed) 1", "ringside_thread_last_cpu\(pool) 0",
            "# TYPE ringside_thread_migrations_total counter", "ringside_thread_migrations_total\(feed) 3",
            "# TYPE ringside_bot_process_cpu_seconds_total counter", #"ringside_bot_process_cpu_seconds_total{ring="bot-a"} 12.5"#,
            #"ringside_bot_process_cpu_seconds_total{ring="bot-a",worker="5000"} 3"#,
            "# TYPE ringside_bot_process_resident_memory_bytes gauge",
            #"ringside_bot_process_resident_memory_bytes{ring="bot-a"} 21069824"#, #"ringside_bot_process_threads{ring="bot-a"} 4"#,
            #"ringside_bot_process_open_fds{ring="bot-a"} 6"#, #"ringside_bot_process_major_page_faults_total{ring="bot-a"} 2"#,
            #"ringside_bot_process_start_time_seconds{ring="bot-a"} 1795509995.83"#,
            "ringside_collector_thread_sampler_threads 3", "ringside_collector_thread_sampler_unreadable 1",
            "ringside_collector_thread_sampler_deferred 0", "ringside_collector_thread_sampler_round_duration_seconds 0.00025",
            "ringside_collector_thread_sampler_cpu_seconds_total 0.125", "ringside_collector_thread_sampler_kept_fds 13",
        ] {
            #expect(page.contains("\n" + line + "\n"), "no line \(line)")
        }
        // A retired lane has no thread; a dead bot's threads and process are not shown, whatever the
        // sample held; the worker's descriptors could not be counted: no line rather than a wrong one.
        #expect(!page.contains(#"lane="2",tid="#) && !page.contains("stale"))
        #expect(!page.contains(#"ringside_bot_process_cpu_seconds_total{ring="bot-d"}"#))
        #expect(!page.contains(#"ringside_bot_process_open_fds{ring="bot-a",worker="5000"}"#))
        if let promtool = try requiredSystemTool("promtool") {
            let check = try runProcess(promtool, ["check", "metrics"], stdin: page, mergingErrors: true)
            #expect(check.status == 0 && check.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(check.output)")
        }

        // OpenMetrics names a counter's family without `_total`; protobuf carries the families too.
        let openMetrics = String(
            decoding: PrometheusRenderer().render(fixture(), format: .openMetrics), as: UTF8.self)
        #expect(openMetrics.contains("# TYPE ringside_thread_context_switches counter\n"))
        #expect(openMetrics.contains("\nringside_thread_cpu_seconds_total\(feed) 1.5\n"))
        let protobuf = PrometheusRenderer().render(fixture(), format: .protobuf)
        #expect(protobuf.count > 0 && String(decoding: protobuf, as: UTF8.self).contains("ringside_thread_migrations_total"))

        // Without a sample (sampling off, or before the first round): none of these families.
        let plain = String(decoding: PrometheusExporter.render(fixture(sampled: false)), as: UTF8.self)
        #expect(!plain.contains("ringside_thread_") && !plain.contains("ringside_bot_process") && !plain.contains("thread_sampler"))
    }

    @Test("/latest: a process under its ring, a thread under its lane, the sampler under the collector")
    func latestFields() throws {
        let latest = try jsonObject(String(decoding: JSONExporter.latest(fixture()), as: UTF8.self))
        let rings = try #require(latest["rings"] as? [[String: Any]])
        #expect(rings.count == 3)
        let process = try #require(rings[0]["process"] as? [String: Any])
        #expect(process["pid"] as? Int == 4_242 && process["cpu_seconds_total"] as? Double == 12.5)
        #expect(process["cpu_ratio"] as? Double == 0.97 && process["resident_memory_bytes"] as? Int == 21_069_824)
        #expect(process["threads"] as? Int == 4 && process["open_fds"] as? Int == 6 && process["major_page_faults_total"] as? Int == 2)
        #expect(process["start_time_seconds"] as? Double == 1_795_509_995.83)
        let lanes = try #require(rings[0]["lanes"] as? [[String: Any]])
        let feed = try #require(lanes[0]["thread"] as? [String: Any])
        let expected: [String: Any] = [
            "kernel_name": "md-feed", "cpu_seconds_total": 1.5, "runqueue_wait_seconds_total": 0.25, "timeslices_total": 900,
            "voluntary_switches_total": 700, "involuntary_switches_total": 200, "last_cpu": 1, "migrations_total": 3, "cpu_ratio": 0.75,
            "runqueue_wait_ratio": 0.125, "voluntary_switches_per_second": 70, "involuntary_switches_per_second": 20.5,
        ]
        #expect(Set(feed.keys) == Set(expected.keys))
        for (key, value) in expected {
            #expect("\(feed[key] ?? "missing")" == "\(value)", "\(key)")
        }
        // After its first read a thread has totals, and no rates yet: null.
        let unnamed = try #require(lanes[1]["thread"] as? [String: Any])
        #expect(unnamed["cpu_ratio"] is NSNull && unnamed["involuntary_switches_per_second"] is NSNull)
        #expect(lanes[2]["thread"] == nil, "a retired lane has no thread")
        // The worker's process, whose descriptors may not be counted: null, not 0.
        let workerProcess = try #require(rings[1]["process"] as? [String: Any])
        #expect(workerProcess["open_fds"] is NSNull && workerProcess["pid"] as? Int == 5_000)
        #expect(rings[2]["process"] == nil && (rings[2]["lanes"] as? [[String: Any]])?.first?["thread"] == nil, "a dead bot's")
        let sampler = try #require((latest["collector"] as? [String: Any])?["thread_sampler"] as? [String: Any])
        #expect(sampler["threads"] as? Int == 3 && sampler["unreadable"] as? Int == 1 && sampler["kept_fds"] as? Int == 13)
        #expect(sampler["interval_seconds"] as? Int == 1 && sampler["kept_fds_limit"] as? Int == 2_500)
        #expect(sampler["sampled_at"] as? String == "2026-11-24T08:48:20.000Z")

        let plain = String(decoding: JSONExporter.latest(fixture(sampled: false)), as: UTF8.self)
        #expect(!plain.contains("\"process\"") && !plain.contains("\"thread\"") && !plain.contains("thread_sampler"))
    }

    @Test("a ring of another owner naming a sampled pid and its threads shows none of them; its refusals are counted on both pages")
    func otherOwnersRingShowsNothing() throws {
        var snapshot = fixture()
        // Another user's file naming bot-a's pid and threads: the sample holds them (read for
        // bot-a, whose owner runs them), yet never under this ring.
        var posing = snapshot.rings[0]
        posing.name = "posing"
        posing.bot = "posing"
        posing.owner = 65_534
        snapshot.rings.append(posing)
        // A ring whose owner is not known is shown nothing either.
        var unknown = snapshot.rings[0]
        unknown.name = "unknown"
        unknown.bot = "unknown"
        unknown.owner = nil
        snapshot.rings.append(unknown)
        snapshot.threadHealth?.refusals = ["posing": [.otherOwner: 3, .startedAfterClaim: 1], "unknown": [.otherOwner: 3]]
        snapshot.threadHealth?.figures.refused = 2

        let page = String(decoding: PrometheusExporter.render(snapshot), as: UTF8.self)
        #expect(page.contains(#"ringside_bot_process_threads{ring="bot-a"} 4"#))
        for ring in ["posing", "unknown"] {
            #expect(!page.contains("ringside_bot_process_cpu_seconds_total{ring=\"\(ring)\"}"), "\(ring)'s process")
            #expect(!page.contains("ringside_thread_cpu_seconds_total{ring=\"\(ring)\""), "\(ring)'s threads")
        }
        for line in [
            "# TYPE ringside_thread_health_refused_total counter",
            #"ringside_thread_health_refused_total{ring="posing",reason="other_owner"} 3"#,
            #"ringside_thread_health_refused_total{ring="posing",reason="started_after_claim"} 1"#,
            #"ringside_thread_health_refused_total{ring="unknown",reason="other_owner"} 3"#,
            "ringside_collector_thread_sampler_refused 2",
        ] {
            #expect(page.contains("\n" + line + "\n"), "no line \(line)")
        }
        #expect(!page.contains(#"ringside_thread_health_refused_total{ring="bot-a""#), "nothing refused of bot-a: no series")
        if let promtool = try requiredSystemTool("promtool") {
            let check = try runProcess(promtool, ["check", "metrics"], stdin: page, mergingErrors: true)
            #expect(check.status == 0 && check.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(check.output)")
        }

        let latest = try jsonObject(String(decoding: JSONExporter.latest(snapshot), as: UTF8.self))
        let rings = try #require(latest["rings"] as? [[String: Any]])
        let shown = try #require(rings.first { $0["name"] as? String == "posing" })
        #expect(shown["process"] == nil && (shown["lanes"] as? [[String: Any]])?.allSatisfy { $0["thread"] == nil } == true)
        let refused = try #require(shown["thread_health_refused"] as? [String: Any])
        #expect(refused.count == 2 && refused["other_owner"] as? Int == 3 && refused["started_after_claim"] as? Int == 1)
        #expect((rings[0]["thread_health_refused"] as? [String: Any])?.isEmpty == true, "bot-a: nothing refused")
        #expect(((latest["collector"] as? [String: Any])?["thread_sampler"] as? [String: Any])?["refused"] as? Int == 2)
    }
}
