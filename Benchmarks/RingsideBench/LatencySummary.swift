#if canImport(Glibc)
import Glibc
#endif

/// What one emit row measured: per-call latency percentiles in nanoseconds, throughput and drops.
///
/// Built from the raw times of batches of `batchSize` calls: each batch's time, less the timer's
/// own measured cost, divided by the batch size, is one per-call sample. Percentiles are exact
/// (nearest rank over the sorted samples).
public struct LatencySummary: Sendable, Equatable {
    public var name: String
    public var p50: Double
    public var p90: Double
    public var p99: Double
    public var p999: Double
    public var max: Double
    public var mean: Double
    /// From a separate untimed loop of calls, timed as a whole.
    public var callsPerSecond: Double
    /// Calls whose record was not delivered (a full ring, a full socket buffer).
    public var dropped: UInt64
    /// Per-call samples (batches) behind the percentiles.
    public var samples: Int
    /// The percentile curve for the chart: (percentile in [0, 1), ns per call).
    public var curve: [CurvePoint]

    public struct CurvePoint: Sendable, Equatable {
        public var percentile: Double
        public var nanoseconds: Double
    }

    public init(name: String, p50: Double, p90: Double, p99: Double, p999: Double, max: Double, mean: Double,
                callsPerSecond: Double, dropped: UInt64, samples: Int, curve: [CurvePoint] = []) {
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
    public init(name: String, batchNanos: [UInt32], batchSize: Int, timerNanos: Double,
                callsPerSecond: Double, dropped: UInt64) {
        precondition(batchSize > 0, "a batch has at least one call")
        let perCall = batchNanos.map { Swift.max(0, Double($0) - timerNanos) / Double(batchSize) }.sorted()
        let mean = perCall.isEmpty ? 0 : perCall.reduce(0, +) / Double(perCall.count)
        self.init(name: name,
                  p50: Percentiles.value(at: 0.5, sorted: perCall),
                  p90: Percentiles.value(at: 0.9, sorted: perCall),
                  p99: Percentiles.value(at: 0.99, sorted: perCall),
                  p999: Percentiles.value(at: 0.999, sorted: perCall),
                  max: perCall.last ?? 0, mean: mean, callsPerSecond: callsPerSecond, dropped: dropped,
                  samples: perCall.count, curve: Percentiles.curve(sorted: perCall))
    }
}

/// Exact percentiles of sorted samples.
public enum Percentiles {
    /// The nearest-rank percentile: the smallest sample with at least `p` of the samples at or
    /// below it (`p` in [0, 1]); 0 for no samples.
    public static func value(at p: Double, sorted samples: [Double]) -> Double {
        guard !samples.isEmpty else { return 0 }
        let rank = Int((p * Double(samples.count)).rounded(.up))
        return samples[Swift.min(Swift.max(rank, 1), samples.count) - 1]
    }

    /// The same, for integers (the collector's e2e samples).
    public static func value(at p: Double, sorted samples: [UInt64]) -> UInt64 {
        guard !samples.isEmpty else { return 0 }
        let rank = Int((p * Double(samples.count)).rounded(.up))
        return samples[Swift.min(Swift.max(rank, 1), samples.count) - 1]
    }

    /// "Nines" of a percentile: -log10(1 - p); 0.9 is 1, 0.99 is 2, 0.999 is 3.
    public static func nines(_ p: Double) -> Double { -log10(Swift.max(1 - p, 1e-12)) }

    /// The percentile curve at evenly spaced nines, from the median's left (p = 0) to as many
    /// nines as the samples resolve (log10 of their count, at most 5). The maximum, at infinite
    /// nines, is not on it.
    public static func curve(sorted samples: [Double], steps: Int = 100) -> [LatencySummary.CurvePoint] {
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
