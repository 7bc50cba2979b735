import CRingside
#if canImport(Glibc)
import Glibc
#endif
import CRingsideBench
import Ringside
import RingsideAggregation
import RingsideCollector

/// The drain rows of `ringside-bench collector`: what draining and aggregating a record costs the
/// collector's one drain thread when the same 1,048,576 records are spread over 1, 8 or 64 rings,
/// against a bare loop recording as many values into one `WindowedHistogram`; in the `.clock`
/// rows, what draining them costs with the clock running, the work due each second (snapshots,
/// window rotation, liveness looks) falling in the passes as it comes; in the `.narrow` rows,
/// with each histogram's values from 64 buckets instead of some 800; in the `.recorder` rows,
/// with the flight recorder on at its defaults (10 s, 256 MiB), against the same rings without it.
///
/// Every row runs once per round, in turn (the first row one further on each round), so a change
/// of the machine's speed falls on every row alike; a row's figure is the median of its rounds',
/// and its ratios the medians of the rounds' ratios. A round's figure is the drain thread's CPU
/// time per record (CLOCK_THREAD_CPUTIME_ID): on a machine shared with other work the wall time
/// also counts the time the thread waited for its CPU, which says nothing of the drain's cost (it
/// is reported beside it).
enum DrainBenchmark {
    /// The rows' ring counts, and how each drains: the clock standing or running, values of some
    /// 800 buckets a histogram or 64. Each fill writes `recordsPerFill` records over all the rings.
    static let kinds: [(rings: Int, clockRuns: Bool, narrow: Bool, recorder: Bool)] = [
        (1, false, false, false), (8, false, false, false), (64, false, false, false), (1, true, false, false),
        (64, true, false, false), (1, false, true, false), (64, false, true, false), (1, false, false, true),
        (64, false, false, true),
    ]
    static let recordsPerFill = 1 << 20
    /// Rounds at most, whatever the duration asks.
    static let maxRounds = 200

    /// One ring count's rings, the process that fills them, and the collector that drains them.
    final class RingSet {
        let rings: Int
        /// Whether the timed passes see the clock run (a `.clock` row), and the values are few (`.narrow`).
        let clockRuns, narrow: Bool
        /// The flight recorder keeps what it drains (a `.recorder` row).
        let recorder: Bool
        let filler: RingFiller
        let collector: Collector
        var rounds: [Round] = []
        var records: UInt64 = 0
        var passes = 0
        /// A `.recorder` row's: the most bytes its recorder held after a pass.
        var peakRecorderBytes = 0

        init(rings: Int, clockRuns: Bool, narrow: Bool, recorder: Bool, directory: String, producerCPU: Int32) throws(BenchError) {
            self.rings = rings
            self.clockRuns = clockRuns
            self.narrow = narrow
            self.recorder = recorder
            filler = try RingFiller(
                rings: rings, capacity: DrainBenchmark.recordsPerFill / rings,
                valueMask: narrow ? MetricMix.narrowValueMask : LatencyValues.count - 1, directory: directory, cpu: producerCPU)
            collector = try CollectorBenchmark.collector(CollectorBenchmark.options(directory: directory, recorder: recorder))
            collector.runPass(nowNanos: rs_clock_precise_ns(), forcePublish: true)  // discovers and attaches
            let attached = collector.snapshot.rings.filter { $0.state == .live }.count
            guard attached == rings else {
                filler.stop()
                throw BenchError("the collector attached \(attached) of \(rings) rings in \(directory)")
            }
            // A round untimed, by forced passes: the lanes the first records claimed are mapped,
            // the rings proven by their valid records, the series made and their counts grown.
            let expected = try filler.fill()
            // The lanes the fill claimed are adopted by a pass that may drain nothing yet: a few
            // empty passes are the collector finding them, many a fault.
            var drained = 0
            var emptyPasses = 0
            while drained < expected {
                let count = collector.runPass(nowNanos: rs_clock_precise_ns(), forcePublish: true)
                emptyPasses = count == 0 ? emptyPasses + 1 : 0
                guard emptyPasses < 100 else {
                    throw BenchError("warming up \(rings) rings: 100 passes drained nothing, \(expected - drained) waiting")
                }
                drained += count
            }
        }

        var name: String {
            (rings == 1 ? "drain.1ring" : "drain.\(rings)rings") + (clockRuns ? ".clock" : "") + (narrow ? ".narrow" : "")
                + (recorder ? ".recorder" : "")
        }

        /// Fills every ring, then drains them with timed passes; returns the passes' nanoseconds
        /// per record.
        ///
        /// An untimed forced pass first publishes what the last round drained and moves every
        /// series' windows to `now`; the timed passes then see the clock stand at `now` (the
        /// records' later timestamps are clamped to it, as the collector clamps any from its
        /// future), so they hold draining alone: no snapshot, window rotation or liveness look
        /// falls in them. Those cost per second, not per record: with the clock running (a
        /// `.clock` row) each timed pass is given the time, and does what falls due.
        func round() throws(BenchError) -> Round {
            let now = rs_clock_precise_ns()
            if !clockRuns { collector.runPass(nowNanos: now, forcePublish: true) }
            let expected = try filler.fill()
            var drained = 0
            var nanos: UInt64 = 0
            var cpuNanos: UInt64 = 0
            var emptyPasses = 0
            while drained < expected {
                let cpuStart = threadCPUNanos()
                let start = rs_clock_precise_ns()
                let count = collector.runPass(nowNanos: clockRuns ? start : now)
                nanos &+= rs_clock_precise_ns() &- start
                cpuNanos &+= threadCPUNanos() &- cpuStart
                passes += 1
                drained += count
                // The recorder's budget holds after every pass, at this drain's rate (untimed).
                if recorder, let figures = collector.recorderFigures {
                    peakRecorderBytes = max(peakRecorderBytes, figures.bytes)
                    guard figures.bytes <= figures.bytesLimit else {
                        throw BenchError("\(name): the recorder holds \(figures.bytes) bytes, past its budget of \(figures.bytesLimit)")
                    }
                }
                // A pass may end empty: its time spent (the thread preempted) before it reached a
                // ring with records. Many in a row mean records the collector does not see.
                emptyPasses = count == 0 ? emptyPasses + 1 : 0
                if emptyPasses == 1_000 {
                    throw BenchError("\(rings) rings: 1,000 passes drained nothing with \(expected - drained) records waiting")
                }
            }
            records += UInt64(drained)
            return Round(cpuNanosPerRecord: Double(cpuNanos) / Double(drained), wallNanosPerRecord: Double(nanos) / Double(drained))
        }

        func stop() { filler.stop() }
    }

    /// The baseline: as many values as a fill holds recorded into one `WindowedHistogram` (the
    /// collector's per-record update of a histogram series, alone), the same values the rings carry.
    /// `specialized: false` records through generic code the optimizer may not specialize, as the
    /// collector would if `Windowed` were not public (see `recordUnspecialized`): the
    /// `drain.baseline.unspecialized` row, what specializing the windows saves a record.
    struct Baseline {
        var histogram = WindowedHistogram()
        let values = LatencyValues()
        let specialized: Bool
        var rounds: [Round] = []
        var records: UInt64 = 0

        init(specialized: Bool = true) {
            self.specialized = specialized
            _ = record()  // warms up, as the rings' first fill does: the counts are grown
        }

        mutating func round() -> Round {
            let (cpuNanos, nanos) = record()
            records += UInt64(DrainBenchmark.recordsPerFill)
            let count = Double(DrainBenchmark.recordsPerFill)
            return Round(cpuNanosPerRecord: Double(cpuNanos) / count, wallNanosPerRecord: Double(nanos) / count)
        }

        /// Records a fill's worth of values; returns the CPU and wall nanoseconds it took.
        private mutating func record() -> (cpu: UInt64, wall: UInt64) {
            let now = rs_clock_precise_ns()
            histogram.advance(toNanos: now)
            let cpuStart = threadCPUNanos()
            let start = rs_clock_precise_ns()
            if specialized {
                for index in 0..<DrainBenchmark.recordsPerFill {
                    histogram.record(values[index], atNanos: now)
                }
            } else {
                DrainBenchmark.recordUnspecialized(
                    into: &histogram, from: UnsafeBufferPointer(start: values.pointer, count: LatencyValues.count),
                    count: DrainBenchmark.recordsPerFill, atNanos: now)
            }
            let nanos = rs_clock_precise_ns() &- start
            let cpuNanos = threadCPUNanos() &- cpuStart
            // Read, so the loop cannot be dropped.
            precondition(histogram.cumulativeCount >= UInt64(DrainBenchmark.recordsPerFill))
            return (cpuNanos, nanos)
        }
    }

    /// Records `count` values (cycling through `values`) into `series` through generic code: the
    /// optimizer may not specialize it, so each call looks up `Slice`'s witnesses and metadata at
    /// run time, as a module does with a generic type it cannot specialize (a `package` one's
    /// inlinable code, in Swift 6.3).
    @_semantics("optimize.sil.specialize.generic.never")
    @inline(never)
    static func recordUnspecialized<Slice: WindowedHistogramSlice>(
        into series: inout Windowed<Slice>, from values: UnsafeBufferPointer<Slice.Value>, count: Int, atNanos now: UInt64
    ) {
        for index in 0..<count {
            series.record(values[index % values.count], atNanos: now)
        }
    }

    /// One row's round: nanoseconds per record, of the drain thread's CPU time and of the wall.
    struct Round {
        var cpuNanosPerRecord: Double
        var wallNanosPerRecord: Double
    }

    /// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID, which cannot fail for it).
    static func threadCPUNanos() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// Runs the rows in rounds: at least `minimumRounds`, and until each row has had about
    /// `seconds` of timed draining (at most `maxRounds`).
    static func run(
        seconds: Double, minimumRounds: Int, scratch: ScratchDirectory, producerCPU: Int32,
        progress: (String) -> Void
    ) throws(BenchError) -> [CollectorReport.Drain] {
        var sets: [RingSet] = []
        defer { for set in sets { set.stop() } }
        for kind in kinds {
            let set = "\(kind.rings)\(kind.clockRuns ? "-clock" : "")\(kind.narrow ? "-narrow" : "")\(kind.recorder ? "-recorder" : "")"
            progress("drain: making rings \(set)")
            sets.append(
                try RingSet(
                    rings: kind.rings, clockRuns: kind.clockRuns, narrow: kind.narrow, recorder: kind.recorder,
                    directory: try scratch.subdirectory("drain" + set),
                    producerCPU: producerCPU))
        }
        progress("drain: making the floor's \(Floor.rings) rings")
        let floor = try Floor(directory: try scratch.subdirectory("drain-floor"), producerCPU: producerCPU)
        defer { floor.stop() }
        var baseline = Baseline()
        var unspecialized = Baseline(specialized: false)
        let rows = sets.count + 3
        progress("drain: rounds of \(sets.map(\.name).joined(separator: ", ")), the floor and the baseline")
        var round = 0
        var timedNanos = 0.0
        while round < maxRounds && (round < minimumRounds || timedNanos < seconds * 1e9 * Double(rows)) {
            for turn in 0..<rows {
                let row = (round + turn) % rows
                let result: Round
                if row < sets.count {
                    result = try sets[row].round()
                    sets[row].rounds.append(result)
                } else if row == sets.count {
                    result = baseline.round()
                    baseline.rounds.append(result)
                } else if row == sets.count + 1 {
                    result = try floor.round()
                    floor.rounds.append(result)
                } else {
                    result = unspecialized.round()
                    unspecialized.rounds.append(result)
                }
                timedNanos += result.wallNanosPerRecord * Double(recordsPerFill)
            }
            round += 1
        }
        let reference = baseline.rounds.map(\.cpuNanosPerRecord)
        var drains = sets.map { set in
            // Against 1 ring drained the same way; a `.recorder` row also against its rings without it.
            let one =
                sets.first {
                    $0.rings == 1 && $0.clockRuns == set.clockRuns && $0.narrow == set.narrow && $0.recorder == set.recorder
                }?.rounds.map(\.cpuNanosPerRecord) ?? []
            let without =
                set.recorder
                ? sets.first { $0.rings == set.rings && $0.clockRuns == set.clockRuns && $0.narrow == set.narrow && !$0.recorder }?
                    .rounds.map(\.cpuNanosPerRecord) : nil
            return CollectorReport.Drain(
                name: set.name, rings: set.rings,
                roundNanosPerRecord: set.rounds.map(\.cpuNanosPerRecord), oneRingRoundNanos: one, baselineRoundNanos: reference,
                roundWallNanosPerRecord: set.rounds.map(\.wallNanosPerRecord), records: set.records, passes: set.passes,
                withoutRecorderRoundNanos: without, recorderPeakBytes: set.recorder ? set.peakRecorderBytes : nil)
        }
        drains.append(
            CollectorReport.Drain(
                name: "drain.64rings.floor", rings: Floor.rings, roundNanosPerRecord: floor.rounds.map(\.cpuNanosPerRecord),
                oneRingRoundNanos: sets[0].rounds.map(\.cpuNanosPerRecord), baselineRoundNanos: reference,
                roundWallNanosPerRecord: floor.rounds.map(\.wallNanosPerRecord), records: floor.records, passes: 0))
        drains.append(
            CollectorReport.Drain(
                name: "drain.baseline", rings: 0, roundNanosPerRecord: reference,
                oneRingRoundNanos: sets[0].rounds.map(\.cpuNanosPerRecord), baselineRoundNanos: reference,
                roundWallNanosPerRecord: baseline.rounds.map(\.wallNanosPerRecord), records: baseline.records, passes: 0))
        drains.append(
            CollectorReport.Drain(
                name: "drain.baseline.unspecialized", rings: 0, roundNanosPerRecord: unspecialized.rounds.map(\.cpuNanosPerRecord),
                oneRingRoundNanos: sets[0].rounds.map(\.cpuNanosPerRecord), baselineRoundNanos: reference,
                roundWallNanosPerRecord: unspecialized.rounds.map(\.wallNanosPerRecord), records: unspecialized.records, passes: 0))
        return drains
    }
}
