import RingsideSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Synchronization
import Testing

/// Issue 66, round four: a counter read lower after a collector's crash and restart. Its folded
/// totals come from the state, its live workers' from their files: a snapshot that showed the bot
/// before every file found at the start was taken up read lower than the collector before it.
@Suite("The collector's state across crashes: a bot's total never reads lower")
struct CollectorStateRestartTests {
    /// One bot's counter read from `/metrics` as often as it answers, from whichever collector
    /// listens at `port` now, on a thread of its own until `stop()`.
    final class CounterReadings: Sendable {
        struct Reading: Sendable {
            let life: Int
            let value: UInt64
        }

        private let line: String
        private let target = Locked<(port: Int, life: Int)?>(nil)
        private let readings = Locked<[Reading]>([])
        private let stopped = Atomic<Bool>(false)
        private let finished = DispatchSemaphore(value: 0)

        /// Reads series `series` (its name and labels as `/metrics` writes them).
        init(series: String) { line = series + " " }

        /// Reads collector `life` at `port` from now on (nil: none listens).
        func read(port: Int?, life: Int) { target.withLock { $0 = port.map { ($0, life) } } }

        func run() {
            while !stopped.load(ordering: .acquiring) {
                guard let (port, life) = target.withLock({ $0 }) else {
                    usleep(1_000)
                    continue
                }
                guard let page = try? httpGet(port: port, path: "/metrics", timeoutSeconds: 2).body,
                    let found = page.split(separator: "\n").first(where: { $0.hasPrefix(line) }),
                    let value = UInt64(found.dropFirst(line.count))
                else { continue }  // not listening yet, killed, or the bot not shown yet
                readings.withLock { $0.append(Reading(life: life, value: value)) }
            }
            finished.signal()
        }

        /// The latest reading.
        var latest: Reading? { readings.withLock { $0.last } }

        /// Stops reading and returns every reading, in order.
        func stop() -> [Reading] {
            if !stopped.exchange(true, ordering: .acquiringAndReleasing) { finished.wait() }
            return readings.withLock { $0 }
        }
    }

    @Test(
        "the collector SIGKILLed 8 times while 100 workers a second fold into a bot, its workers' files piling up between lives: no reading of the bot's total is lower than one before it, and the last is exact"
    )
    func totalNeverLowerAcrossKills() throws {
        try withRingDirectory { directory in
            let lives = 8
            let churn = try ChildProcess(testProducer: "worker-churn", ring: "pool", in: directory, ["--rate", "100", "--seconds", "8"])
            defer { churn.kill() }
            let readings = CounterReadings(series: "churn_total{ring=\"pool\"}")
            Thread.detachNewThread { readings.run() }
            var mostFiles = 0
            var firstReadings: [Double] = []
            for life in 0..<lives {
                let started = Date()
                let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "10ms"])
                readings.read(port: port, life: life)
                // Killed anywhere from its first reading to half a second after.
                if eventually(seconds: 20, { readings.latest?.life == life }) { firstReadings.append(Date().timeIntervalSince(started)) }
                usleep(UInt32.random(in: 0...500_000))
                collector.kill()
                readings.read(port: nil, life: life)
                // No collector: the gone workers' files wait, some dozens, for the next to take up.
                usleep(UInt32.random(in: 200_000...400_000))
                mostFiles = max(mostFiles, directory.ringNames().count)
            }
            let (last, port) = try startCollector(["--dir", directory.path, "--poll", "10ms"])
            defer { last.kill() }
            readings.read(port: port, life: lives)
            let made = try #require(churn.readLine().flatMap { $0.hasPrefix("workers ") ? UInt64($0.dropFirst(8)) : nil })
            #expect(
                eventually(seconds: 30) {
                    readings.latest?.value == made && !directory.ringNames().contains { $0.hasPrefix("pool@") }
                }, "every worker folded")
            let all = readings.stop()
            #expect(all.last?.value == made, "the last reading is every worker's increment once")
            var highest: CounterReadings.Reading?
            var lower: [String] = []
            for reading in all {
                if let before = highest, reading.value < before.value {
                    lower.append("\(reading.value) in life \(reading.life) after \(before.value) in life \(before.life)")
                }
                if reading.value >= highest?.value ?? 0 { highest = reading }
            }
            #expect(lower.count == 0, "\(lower.count) of \(all.count) readings lower than one before: \(lower.prefix(10))")
            #expect(Set(all.map(\.life)).count > lives / 2, "most lives read the total")
            print(
                "collector kills beside 100 workers a second: \(all.count) readings over \(lives + 1) lives, \(lower.count) lower; "
                    + "up to \(mostFiles) files between lives; \(made) workers; first reading of a life after "
                    + "\(firstReadings.map { String(format: "%.2f", $0) }.joined(separator: ", ")) s")
        }
    }
}
