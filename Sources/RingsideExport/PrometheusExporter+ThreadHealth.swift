import RingsideSnapshot

extension PrometheusExporter {
    /// The thread sampler's families, from the sample the snapshot carries (none without one):
    /// each lane thread's scheduling, labelled as its lane's series are (`ring`, `worker` for a
    /// worker's file, `lane`) and with its `tid` and `thread` name; each bot process's figures,
    /// labelled as its ring's; and the sampler's own.
    static func threadHealthFamilies(_ snapshot: Snapshot) -> [FixedFamily] {
        guard let sample = snapshot.threadHealth else { return [] }
        var threads: [(labels: [(String, String)], health: ThreadHealth)] = []
        var processes: [(labels: [(String, String)], health: ProcessHealth)] = []
        var refused: Samples = []
        for ring in snapshot.rings where ring.state != .skipped {
            for (reason, count) in (sample.refusals[ring.name] ?? [:]).sorted(by: { $0.key < $1.key }) {
                refused.append((ring.labels + [("reason", reason.rawValue)], Double(count)))
            }
            if let process = sample.process(writing: ring) { processes.append((ring.labels, process)) }
            for lane in ring.lanes {
                guard let thread = sample.thread(holding: lane, of: ring) else { continue }
                // The lane's name is the one the bot gave (up to 32 bytes); the kernel's, when it gave none.
                let name = lane.threadName.isEmpty ? thread.kernelName : lane.threadName
                threads.append((ring.labels + [("lane", String(lane.index)), ("tid", String(lane.threadID)), ("thread", name)], thread))
            }
        }
        return laneThreadFamilies(threads) + botProcessFamilies(processes) + samplerFamilies(sample.figures, refused: refused)
    }

    /// Each lane thread's scheduling, labelled as its lane's series are, with its `tid` and name.
    private static func laneThreadFamilies(_ threads: [(labels: [(String, String)], health: ThreadHealth)]) -> [FixedFamily] {
        func perThread(_ value: (ThreadHealth) -> Double) -> Samples {
            threads.map { ($0.labels, value($0.health)) }
        }
        var switches: Samples = []
        for thread in threads {
            switches.append((thread.labels + [("kind", "voluntary")], Double(thread.health.voluntarySwitches)))
            switches.append((thread.labels + [("kind", "involuntary")], Double(thread.health.involuntarySwitches)))
        }
        return [
            FixedFamily(
                "ringside_thread_cpu_seconds_total", "counter", "CPU time the lane's thread has used (its schedstat)",
                perThread { Double($0.cpuNanos) / 1e9 }),
            FixedFamily(
                "ringside_thread_runqueue_wait_seconds_total", "counter",
                "Time the lane's thread was runnable but waited for a CPU (its schedstat)",
                perThread { Double($0.runQueueWaitNanos) / 1e9 }),
            FixedFamily(
                "ringside_thread_timeslices_total", "counter", "Times the scheduler gave the lane's thread a CPU (its schedstat)",
                perThread { Double($0.timeslices) }),
            FixedFamily(
                "ringside_thread_context_switches_total", "counter",
                "Context switches of the lane's thread: voluntary (it blocked or slept) and involuntary (it was preempted)",
                switches),
            FixedFamily(
                "ringside_thread_last_cpu", "gauge", "The CPU the lane's thread last ran on, when last sampled",
                perThread { Double($0.lastCPU) }),
            FixedFamily(
                "ringside_thread_migrations_total", "counter",
                "Samples that found the lane's thread on another CPU than the sample before (a lower bound on its migrations)",
                perThread { Double($0.migrations) }),
        ]
    }

    /// Each bot process's figures, labelled as its ring's.
    private static func botProcessFamilies(_ processes: [(labels: [(String, String)], health: ProcessHealth)]) -> [FixedFamily] {
        func perProcess(_ value: (ProcessHealth) -> Double?) -> Samples {
            processes.compactMap { process in value(process.health).map { (process.labels, $0) } }
        }
        return [
            FixedFamily(
                "ringside_bot_process_cpu_seconds_total", "counter", "User and system CPU time of the ring's producer process",
                perProcess { $0.cpuSeconds }),
            FixedFamily(
                "ringside_bot_process_resident_memory_bytes", "gauge", "Resident memory of the ring's producer process",
                perProcess { Double($0.residentMemoryBytes) }),
            FixedFamily(
                "ringside_bot_process_threads", "gauge", "Threads of the ring's producer process", perProcess { Double($0.threads) }),
            FixedFamily(
                "ringside_bot_process_open_fds", "gauge",
                "Open file descriptors of the ring's producer process (absent where the collector may not count them)",
                perProcess { $0.openFDs.map(Double.init) }),
            FixedFamily(
                "ringside_bot_process_major_page_faults_total", "counter",
                "Page faults of the ring's producer process that read from disk", perProcess { Double($0.majorPageFaults) }),
            FixedFamily(
                "ringside_bot_process_start_time_seconds", "gauge", "When the ring's producer process started, in Unix seconds",
                perProcess { $0.startTimeSeconds }),
        ]
    }

    /// What the sampler refused to read, and its own figures.
    private static func samplerFamilies(_ figures: ThreadSamplerFigures, refused: Samples) -> [FixedFamily] {
        [
            FixedFamily(
                "ringside_thread_health_refused_total", "counter",
                "Targets the ring named that the thread sampler refused to read (its process, or a lane's thread): another user's, "
                    + "not a process, not a thread of its process, or started after the lane's claim",
                refused),
            FixedFamily(
                "ringside_collector_thread_sampler_threads", "gauge", "Lane threads the last thread sample read",
                [([], Double(figures.threads))]),
            FixedFamily(
                "ringside_collector_thread_sampler_unreadable", "gauge",
                "Lane threads of live lanes that could not be read: gone, not readable, or at a pid another process holds now",
                [([], Double(figures.unreadable))]),
            FixedFamily(
                "ringside_collector_thread_sampler_refused", "gauge",
                "Lane threads of live lanes the sampler refuses to read now (see ringside_thread_health_refused_total)",
                [([], Double(figures.refused))]),
            FixedFamily(
                "ringside_collector_thread_sampler_deferred", "gauge",
                "Lane threads whose context switches and CPU the last round's CPU budget left for a later round",
                [([], Double(figures.deferred))]),
            FixedFamily(
                "ringside_collector_thread_sampler_round_duration_seconds", "gauge", "How long the last thread sampling round took",
                [([], figures.roundSeconds)]),
            FixedFamily(
                "ringside_collector_thread_sampler_cpu_seconds_total", "counter", "CPU time the thread sampler has spent in its rounds",
                [([], figures.cpuSecondsTotal)]),
            FixedFamily(
                "ringside_collector_thread_sampler_kept_fds", "gauge", "/proc files the thread sampler holds open between rounds",
                [([], Double(figures.keptDescriptors))]),
        ]
    }
}
