import Dispatch
import Foundation
import RingsideSystem
import RingsideTestSupport
import RingsideText

/// `ringside-bench soak`'s settings (its flags).
package struct SoakSettings: Sendable, Equatable {
    /// How long the producers write, in seconds (`--duration`).
    package var seconds: Double = 3600
    /// Seconds between two samples (`--interval`).
    package var intervalSeconds: Double = 10
    /// Blast producers at full speed, a bot each (`--producers`).
    package var producers = 8
    /// Seconds before the memory's baseline is taken (`--warmup`).
    package var warmupSeconds: Double = 300
    /// Workers the pool keeps running, each recycled after about a second (`--workers`).
    package var workers = 4

    /// The span of the samples compared: the minute after the warm-up, and the last minute.
    package static let windowSeconds: Double = 60
    /// The receiver fails during every other period of this length.
    package static let failPeriodSeconds: Double = 60

    package init() {}
}

/// `ringside-bench soak`: the collector beside this binary (its release build for the figures),
/// for an hour by default, under `producers` processes writing at full speed and a pool of forked
/// workers recycled all along, pushing OTLP to a receiver of this process that fails every other
/// minute; sampled every `interval`; then judged (see `SoakReport.checks`): memory and descriptors
/// flat after the warm-up, nothing lost, every counter exact, in `/latest` and in the last export
/// the receiver took.
package enum SoakBenchmark {
    /// The blast producers' lane: 2 MiB of records (the load tests' size).
    static let blastCapacity = 65_536
    /// The pool's workers: lanes of 4,096 records; 20,000 calls each, 20,000 a second (a second's life).
    static let workerCapacity = 4_096
    static let workerCalls = 20_000
    static let workerRate = 20_000
    /// The producers' nice value: they take every cycle the collector, the receiver and the
    /// sampling leave, as bots on cores of their own would, without starving them.
    static let producerNice = 10
    /// The pool's bot.
    static let poolBot = "soak-pool"

    package static func run(_ settings: SoakSettings, progress: (String) -> Void = { _ in }) throws(BenchError) -> SoakReport {
        for name in ["ringside-collector", "ringside-test-producer"] {
            do { _ = try builtExecutable(name) } catch {
                throw BenchError("\(error) (the soak runs the build beside this binary: swift build -c release --product \(name))")
            }
        }
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let directory = try scratch.subdirectory("soak")
        let receiver = try SoakReceiver(failPeriodNanos: UInt64(SoakSettings.failPeriodSeconds * 1e9))
        defer { receiver.stop() }
        let collector = try SoakCollector(directory: directory, otlpEndpoint: receiver.endpoint, scratch: scratch)
        progress("collector pid \(collector.pid) on port \(collector.port), rings in \(directory), OTLP to \(receiver.endpoint)")

        // The producers write for the soak's duration and a margin; they are stopped (SIGTERM) at its end.
        let seconds = String(Int(settings.seconds + 600))
        var producers: [SoakProducer] = []
        for index in 0..<settings.producers {
            producers.append(
                try SoakProducer(
                    "blast", ring: "soak-\(index)", directory: directory,
                    options: [
                        "--seconds", seconds, "--capacity", String(blastCapacity), "--nice", String(producerNice), "--counter", "yes",
                    ], scratch: scratch))
        }
        if settings.workers > 0 {
            producers.append(
                try SoakProducer(
                    "worker-pool", ring: poolBot, directory: directory,
                    options: [
                        "--seconds", seconds, "--workers", String(settings.workers), "--count", String(workerCalls),
                        "--rate", String(workerRate), "--capacity", String(workerCapacity), "--nice", String(producerNice),
                    ], scratch: scratch))
        }

        let samples = try sample(settings, collector: collector, receiver: receiver, progress: progress)
        progress("stopping the producers")
        var results: [SoakProducerResult] = []
        var problems: [String] = []
        for producer in producers {
            switch producer.stop() {
            case let .failure(error): problems.append(error.description)
            case let .success(line):
                if let result = producerResult(producer.ring, line) {
                    results.append(result)
                } else {
                    problems.append("\(producer.ring) printed \(line)")
                }
            }
        }
        progress("waiting for the collector to drain everything and for an export the receiver takes")
        var checks = SoakVerdict.checks(
            samples: samples, settings: settings, results: results, problems: problems, collector: collector, receiver: receiver,
            expectedBots: settings.producers + (settings.workers > 0 ? 1 : 0))
        let status = collector.stop(seconds: 10)
        let log = collector.logTail
        checks.append(
            SoakCheck(
                name: "collector stopped cleanly", passed: status == 0,
                detail: status.map { "exit status \($0) at SIGTERM; \(log.count) log lines" }
                    ?? "still running 10 s after SIGTERM; its last lines: \(log.lines.joined(separator: " | "))"))
        return SoakReport(
            machine: Machine.current(pinned: false), method: method(settings), settings: settings, samples: samples, producers: results,
            checks: checks)
    }

    /// Samples every interval until the duration is over.
    static func sample(
        _ settings: SoakSettings, collector: SoakCollector, receiver: SoakReceiver, progress: (String) -> Void
    ) throws(BenchError) -> [SoakSample] {
        let start = DispatchTime.now().uptimeNanoseconds
        func elapsed() -> Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
        var previous = (time: 0.0, cpu: ProcessReading.cpuTicks(of: collector.pid) ?? 0, drained: 0.0)
        if let page = collector.get("/metrics") {
            previous.drained = MetricsPage(text: page).sum("ringside_collector_records_drained_total")
        }
        var samples: [SoakSample] = []
        var next = settings.intervalSeconds
        while next <= settings.seconds + 1e-9 {
            let wait = next - elapsed()
            if wait > 0 { System.nanosleep(UInt64(wait * 1e9)) }
            next += settings.intervalSeconds
            // /proc first: the scrape after it makes the collector allocate.
            guard let process = ProcessReading(pid: collector.pid) else {
                let log = collector.logTail
                throw BenchError(
                    "the collector (pid \(collector.pid)) is gone after \(Int(elapsed())) s; its last log lines:\n"
                        + log.lines.joined(separator: "\n"))
            }
            let now = elapsed()
            let page = MetricsPage(text: collector.get("/metrics") ?? "")
            // A scrape that failed (the collector starved past the client's 10 s) leaves the count where it was.
            let drained = page.text.isEmpty ? previous.drained : page.sum("ringside_collector_records_drained_total")
            let span = max(1e-3, now - previous.time)
            let receiverFigures = receiver.snapshot
            let sample = SoakSample(
                elapsed: now, rssKiB: process.rssKiB, anonKiB: process.anonKiB, shmemKiB: process.shmemKiB,
                descriptors: process.descriptors, mappings: process.mappings,
                cpuPercent: Double(process.cpuTicks &- previous.cpu) / ProcessReading.ticksPerSecond / span * 100,
                drainedPerSecond: max(0, drained - previous.drained) / span, backlog: page.sum("ringside_ring_backlog_records"),
                files: page.sum("ringside_collector_rings"), otlpTaken: receiverFigures.taken,
                otlpRefused: receiverFigures.refused + receiverFigures.cut, receiverFailing: receiver.isFailing)
            previous = (now, process.cpuTicks, drained)
            samples.append(sample)
            progress(SoakReport.row(sample).joined(separator: "  "))
        }
        return samples
    }

    /// A producer's last line: blast's "attempts A written W dropped D faults F late L increments
    /// I", or worker-pool's "workers S attempts A written W dropped D increments I".
    static func producerResult(_ bot: String, _ line: String) -> SoakProducerResult? {
        if let blast = BlastCounts(line), let increments = blast.increments {
            return SoakProducerResult(
                bot: bot, attempts: blast.attempts, written: blast.written, dropped: blast.dropped, increments: increments, workers: 0)
        }
        let words = line.split(separator: " ")
        guard words.count == 10, words[0] == "workers", words[2] == "attempts", words[4] == "written", words[6] == "dropped",
            words[8] == "increments"
        else { return nil }
        let numbers = stride(from: 1, to: 10, by: 2).compactMap { UInt64(words[$0]) }
        guard numbers.count == 5 else { return nil }
        return SoakProducerResult(
            bot: bot, attempts: numbers[1], written: numbers[2], dropped: numbers[3], increments: numbers[4], workers: numbers[0])
    }

    static func method(_ settings: SoakSettings) -> String {
        "The collector beside this binary (ringside-collector --otlp-endpoint, its other flags at their defaults: the flight "
            + "recorder, the history and the thread sampler on) over a ring directory of its own, for "
            + formatSeconds(settings.seconds) + ". \(settings.producers) producers (ringside-test-producer blast, nice "
            + "\(producerNice)) at full speed, a bot each, one lane of \(blastCapacity) records, each call a histogram "
            + "record (dropped when the lane is full) and a counter increment; and a pool (worker-pool) keeping "
            + "\(settings.workers) forked workers of one bot running, each making \(workerCalls) calls (a record and an "
            + "increment) at \(workerRate) a second into a lane of \(workerCapacity) and exiting, another forked in its "
            + "place. The collector pushes OTLP every 10 s to a receiver in this process that answers 503 or closes the "
            + "connection unanswered, in turn, during every other minute, and decodes what it takes. Every "
            + formatSeconds(settings.intervalSeconds) + ": the collector's VmRSS, RssAnon and RssShmem, open descriptors "
            + "and mappings (/proc/PID), CPU over the interval (utime + stime), and from its /metrics the records drained "
            + "a second, the backlog and the files it holds. RSS flat: the median RSS of the last minute within 1 % of "
            + "the median of the minute after the \(formatSeconds(settings.warmupSeconds)) warm-up; fds flat: the last "
            + "minute's fewest descriptors (and mappings) no more than that minute's most. At the end the producers are "
            + "stopped (SIGTERM), the collector drains, and its /latest and the receiver's last export are compared with "
            + "what each producer counted."
    }

    static func formatSeconds(_ seconds: Double) -> String {
        seconds >= 60 && seconds.truncatingRemainder(dividingBy: 60) == 0 ? "\(Int(seconds / 60)) min" : "\(oneDecimalAtMost(seconds)) s"
    }
}
