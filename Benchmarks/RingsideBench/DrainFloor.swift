import CRingside
import Ringside
import RingsideAggregation

extension DrainBenchmark {
    /// The `drain.64rings.floor` row: the least any drain of `drain.64rings`' records must do, on
    /// rings filled alike. Each ring's lanes are read through a `RingConsumer` (the cursors, the
    /// batches), and each record goes to its own series, as the collector's must: a histogram's
    /// value recorded into a `WindowedHistogram` and a gauge's set into a `WindowedGauge`, found by
    /// ring and metric index in one array. No check of a record, no registry, no caps, no
    /// snapshot's fields: what is left over this row in `drain.64rings` is the collector's own.
    ///
    /// Its consumers do not read gather cells, so its producer never samples: the rings end full
    /// of plain records, where the collector's end with a sampled last 1/32 (which costs it more).
    final class Floor {
        static let rings = 64
        /// Series a ring: `MetricMix`'s metrics (7) have indexes below it.
        static let metricsPerRing = 8
        let filler: RingFiller
        let consumers: [RingConsumer]
        var histograms = [WindowedHistogram](repeating: WindowedHistogram(), count: rings * metricsPerRing)
        var gauges = [WindowedGauge](repeating: WindowedGauge(), count: rings * metricsPerRing)
        var rounds: [Round] = []
        var records: UInt64 = 0

        init(directory: String, producerCPU: Int32) throws(BenchError) {
            filler = try RingFiller(
                rings: Self.rings, capacity: DrainBenchmark.recordsPerFill / Self.rings, valueMask: LatencyValues.count - 1,
                directory: directory, cpu: producerCPU)
            var consumers: [RingConsumer] = []
            do {
                for index in 0..<Self.rings {
                    consumers.append(try RingConsumer("bot-\(index)", directory: RingDirectory(directory)))
                }
            } catch {
                filler.stop()
                throw BenchError("the floor's consumer of \(directory)/bot-\(consumers.count): \(error)")
            }
            self.consumers = consumers
            do {
                _ = try round()  // untimed, as the rings' first round: the lanes mapped, the counts grown
            } catch {
                filler.stop()
                throw error
            }
            rounds = []
            records = 0
        }

        /// Fills every ring, then drains them all; returns the drain's nanoseconds per record.
        func round() throws(BenchError) -> Round {
            let now = rs_clock_precise_ns()
            // Moved out for the drain, not copied (a copy's first record would copy its counts):
            // locals, which the drain's closure reaches without a class's access checks.
            var histograms: [WindowedHistogram] = []
            var gauges: [WindowedGauge] = []
            swap(&histograms, &self.histograms)
            swap(&gauges, &self.gauges)
            defer {
                swap(&histograms, &self.histograms)
                swap(&gauges, &self.gauges)
            }
            for index in histograms.indices {
                _ = histograms[index].advance(toNanos: now)
                _ = gauges[index].advance(toNanos: now)
            }
            let expected = try filler.fill()
            let cpuStart = threadCPUNanos()
            let start = rs_clock_precise_ns()
            var drained = 0
            var unplaced = 0  // records of a metric past `metricsPerRing`: none, or the row is wrong
            do {
                for (ring, consumer) in consumers.enumerated() {
                    let first = ring * Self.metricsPerRing
                    drained += try consumer.drain { records, _, _ in
                        for record in records {
                            guard record.metric < Self.metricsPerRing else {
                                unplaced += 1
                                continue
                            }
                            let series = first + Int(record.metric)
                            if record.kind == MetricKind.histogram.rawValue {
                                histograms[series].record(record.value, atNanos: now)
                            } else {
                                gauges[series].set(Double(bitPattern: record.value), atNanos: now)
                            }
                        }
                    }
                }
            } catch {
                throw BenchError("the floor's drain: \(error)")
            }
            let nanos = rs_clock_precise_ns() &- start
            let cpuNanos = threadCPUNanos() &- cpuStart
            guard drained == expected, unplaced == 0 else {
                throw BenchError("the floor drained \(drained) of \(expected) records, \(unplaced) of metrics it keeps no series for")
            }
            records += UInt64(drained)
            return Round(cpuNanosPerRecord: Double(cpuNanos) / Double(drained), wallNanosPerRecord: Double(nanos) / Double(drained))
        }

        func stop() { filler.stop() }
    }
}
