import RingsideJSON
import RingsideSnapshot
import RingsideText

extension JSONExporter {
    /// A lane thread's scheduling (`/latest`'s `rings[].lanes[].thread`): the kernel's totals, in
    /// seconds where they are times, and over the last span the sampler measured, the fraction of
    /// a CPU it used and waited for, and its switches a second (null after its first read).
    static func writeThreadHealth(_ thread: ThreadHealth, into json: JSONWriter) {
        json.object {
            json.field("kernel_name", thread.kernelName)
            json.field("cpu_seconds_total", Double(thread.cpuNanos) / 1e9)
            json.field("runqueue_wait_seconds_total", Double(thread.runQueueWaitNanos) / 1e9)
            json.field("timeslices_total", thread.timeslices)
            json.field("voluntary_switches_total", thread.voluntarySwitches)
            json.field("involuntary_switches_total", thread.involuntarySwitches)
            json.field("last_cpu", thread.lastCPU)
            json.field("migrations_total", thread.migrations)
            json.field("cpu_ratio", thread.cpuRatio)
            json.field("runqueue_wait_ratio", thread.runQueueWaitRatio)
            json.field("voluntary_switches_per_second", thread.voluntarySwitchesPerSecond)
            json.field("involuntary_switches_per_second", thread.involuntarySwitchesPerSecond)
        }
    }

    /// A ring's producer process (`/latest`'s `rings[].process`).
    static func writeProcessHealth(_ process: ProcessHealth, pid: Int32, into json: JSONWriter) {
        json.object {
            json.field("pid", pid)
            json.field("cpu_seconds_total", process.cpuSeconds)
            json.field("cpu_ratio", process.cpuRatio)
            json.field("resident_memory_bytes", process.residentMemoryBytes)
            json.field("threads", process.threads)
            json.field("open_fds", process.openFDs.map(Double.init))  // null where they may not be counted
            json.field("major_page_faults_total", process.majorPageFaults)
            json.field("start_time_seconds", process.startTimeSeconds)
        }
    }

    /// What the sampler refused of a ring (`/latest`'s `rings[].thread_health_refused`): each
    /// reason seen, with its count.
    static func writeRefusals(_ refusals: [ThreadHealthRefusal: UInt64], into json: JSONWriter) {
        json.object {
            for (reason, count) in refusals.sorted(by: { $0.key < $1.key }) { json.field(reason.rawValue, count) }
        }
    }

    /// What the sampler says of itself (`/latest`'s `collector.thread_sampler`).
    static func writeSamplerFigures(_ sample: ThreadHealthSample, into json: JSONWriter) {
        let figures = sample.figures
        json.object {
            json.field("interval_seconds", Double(sample.intervalNanos) / 1e9)
            json.field("sampled_at", utcTimestamp(realtimeNanos: sample.realtimeNanos))
            json.field("threads", figures.threads)
            json.field("processes", figures.processes)
            json.field("unreadable", figures.unreadable)
            json.field("refused", figures.refused)
            json.field("deferred", figures.deferred)
            json.field("round_seconds", figures.roundSeconds)
            json.field("cpu_seconds_total", figures.cpuSecondsTotal)
            json.field("kept_fds", figures.keptDescriptors)
            json.field("kept_fds_limit", figures.keptDescriptorLimit)
        }
    }
}
