#if canImport(Glibc)
import Glibc
#endif

/// What one emit row measured: per-call latency percentiles in nanoseconds, throughput and drops.
///
/// Built from the raw times of batches of `batchSize` calls: each batch's time, less the timer's
/// own measured cost, divided by the batch size, is one per-call sample. Percentiles are exact
/// (nearest rank over the sorted samples).
package struct LatencySummary: Sendable, Equatable {
    package var name: String
    package var p50: Double
    package var p90: Double
    package var p99: Double
    package var p999: Double
    package var max: Double
    package var mean: Double
    /// From a separate untimed loop of calls, timed as a whole.
    package var callsPerSecond: Double
    /// Calls whose record was not delivered (a full ring, a full socket buffer).
    package var dropped: UInt64
    /// Per-call samples (batches) behind the percentiles.
    package var samples: Int
    /// The percentile curve for the chart: (percentile in [0, 1), ns per call).
    package var curve: [CurvePoint]
    /// Each round's p50, in the order the rounds ran (empty for a row measured in one go).
    package var roundP50s: [Double] = []
    /// The median over the rounds of this row's p50 divided by `c.floor`'s in the same round;
    /// nil when `c.floor` did not run.
    package var floorRatio: Double?

    package struct CurvePoint: Sendable, Equatable {
        package var percentile: Double
        package var nanoseconds: Double
    }

    package init(
        name: String, p50: Double, p90: Double, p99: Double, p999: Double, max: Double, mean: Double,
        callsPerSecond: Double, dropped: UInt64, samples: Int, curve: [CurvePoint] = []
    ) {
        self.name = name
        self.p50 = p50
        self.p90 = p90
        self.p99 = p99
        self.p999 = p999
        self.max = max
        self.mean = mean
        self.callsPerSecond = callsPerSecond
        self.dropped = dropped
        self.samples = samples
        self.curve = curve
    }

    /// Summarises raw batch times.
    /// - Parameters:
    ///   - batchNanos: each batch's time as measured, timer included.
    ///   - batchSize: calls per batch.
    ///   - timerNanos: the timer's own cost (two clock reads back to back), subtracted from each
    ///     batch; a batch faster than the timer counts as zero.
    package init(
        name: String, batchNanos: [UInt32], batchSize: Int, timerNanos: Double,
        callsPerSecond: Double, dropped: UInt64
    ) {
        precondition(batchSize > 0, "a batch has at least one call")
        let perCall = Self.perCall(batchNanos, batchSize: batchSize, timerNanos: timerNanos)
        let mean = perCall.isEmpty ? 0 : perCall.reduce(0, +) / Double(perCall.count)
        self.init(
            name: name,
            p50: Percentiles.value(at: 0.5, sorted: perCall),
            p90: Percentiles.value(at: 0.9, sorted: perCall),
            p99: Percentiles.value(at: 0.99, sorted: perCall),
            p999: Percentiles.value(at: 0.999, sorted: perCall),
            max: perCall.last ?? 0, mean: mean, callsPerSecond: callsPerSecond, dropped: dropped,
            samples: perCall.count, curve: Percentiles.curve(sorted: perCall))
    }
}

/// One row's measurement in one round of the emit benchmark.
package struct RoundSample: Sendable, Equatable {
    /// Each timed batch's time, timer included.
    package var batchNanos: [UInt32]
    /// Calls made in the untimed loop, and how long it ran.
    package var calls: UInt64
    package var elapsedNanos: UInt64
    /// Calls whose record was not delivered in this round.
    package var dropped: UInt64

    package init(batchNanos: [UInt32], calls: UInt64, elapsedNanos: UInt64, dropped: UInt64) {
        self.batchNanos = batchNanos
        self.calls = calls
        self.elapsedNanos = elapsedNanos
        self.dropped = dropped
    }

    /// Several threads' samples of one round, taken at the same time: their calls add up.
    package static func concurrent(_ parts: [RoundSample]) -> RoundSample {
        RoundSample(
            batchNanos: parts.flatMap(\.batchNanos), calls: parts.reduce(0) { $0 &+ $1.calls },
            elapsedNanos: parts.map(\.elapsedNanos).max() ?? 0, dropped: parts.reduce(0) { $0 &+ $1.dropped })
    }

    /// The round's p50 per call (see `LatencySummary.init(name:batchNanos:...)`).
    func p50(batchSize: Int, timerNanos: Double) -> Double {
        Percentiles.value(at: 0.5, sorted: LatencySummary.perCall(batchNanos, batchSize: batchSize, timerNanos: timerNanos))
    }
}

extension LatencySummary {
    /// Per-call times of batches, sorted: each batch's time less the timer's, over the batch size.
    static func perCall(_ batchNanos: [UInt32], batchSize: Int, timerNanos: Double) -> [Double] {
        batchNanos.map { Swift.max(0, Double($0) - timerNanos) / Double(batchSize) }.sorted()
    }

    /// Summarises a row measured in interleaved rounds. The p50 is the median of the rounds'
    /// p50s, so a round the machine ran slow in moves it little; the other percentiles pool every
    /// round's samples; calls/s is all the calls over all the untimed time.
    /// - Parameter floorRoundP50s: `c.floor`'s p50 in each of the same rounds, for `floorRatio`.
    package init(name: String, rounds: [RoundSample], batchSize: Int, timerNanos: Double, floorRoundP50s: [Double]?) {
        let elapsed = rounds.reduce(0) { $0 &+ $1.elapsedNanos }
        self.init(
            name: name, batchNanos: rounds.flatMap(\.batchNanos), batchSize: batchSize, timerNanos: timerNanos,
            callsPerSecond: elapsed == 0 ? 0 : Double(rounds.reduce(0) { $0 &+ $1.calls }) / (Double(elapsed) / 1e9),
            dropped: rounds.reduce(0) { $0 &+ $1.dropped })
        roundP50s = rounds.map { $0.p50(batchSize: batchSize, timerNanos: timerNanos) }
        p50 = Percentiles.value(at: 0.5, sorted: roundP50s.sorted())
        if let floorRoundP50s, floorRoundP50s.count == roundP50s.count {
            let ratios = zip(roundP50s, floorRoundP50s).compactMap { row, floor in floor > 0 ? row / floor : nil }
            floorRatio = ratios.isEmpty ? nil : Percentiles.value(at: 0.5, sorted: ratios.sorted())
        }
    }
}

/// Exact percentiles of sorted samples.
package enum Percentiles {
    /// The nearest-rank percentile: the smallest sample with at least `p` of the samples at or
    /// below it (`p` in [0, 1]); 0 for no samples.
    package static func value(at p: Double, sorted samples: [Double]) -> Double {
        guard !samples.isEmpty else { return 0 }
        let rank = Int((p * Double(samples.count)).rounded(.up))
        return samples[Swift.min(Swift.max(rank, 1), samples.count) - 1]
    }

    /// The same, for integers (the collector's e2e samples).
    package static func value(at p: Double, sorted samples: [UInt64]) -> UInt64 {
        guard !samples.isEmpty else { return 0 }
        let rank = Int((p * Double(samples.count)).rounded(.up))
        return samples[Swift.min(Swift.max(rank, 1), samples.count) - 1]
    }

    /// "Nines" of a percentile: -log10(1 - p); 0.9 is 1, 0.99 is 2, 0.999 is 3.
    package static func nines(_ p: Double) -> Double { -log10(Swift.max(1 - p, 1e-12)) }

    /// The percentile curve at evenly spaced nines, from the median's left (p = 0) to as many
    /// nines as the samples resolve (log10 of their count, at most 5). The maximum, at infinite
    /// nines, is not on it.
    package static func curve(sorted samples: [Double], steps: Int = 100) -> [LatencySummary.CurvePoint] {
        guard !samples.isEmpty else { return [] }
        let top = Swift.min(5, log10(Double(samples.count)))
        guard top > 0 else { return [.init(percentile: 0, nanoseconds: samples[0])] }
        var points: [LatencySummary.CurvePoint] = []
        for step in 0...steps {
            let p = 1 - pow(10, -top * Double(step) / Double(steps))
            points.append(.init(percentile: p, nanoseconds: value(at: p, sorted: samples)))
        }
        return points
    }
}
