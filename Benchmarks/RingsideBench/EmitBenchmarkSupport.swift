import CRingside
import CRingsideBench
import Foundation
import Ringside
import RingsideAggregation
import RingsideCollector
import RingsideExport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import RingsideJSON
import RingsideSystem

extension RoundSample {
    /// A round of the floor's, measured in C: `result`, with its batch times in `buffer`.
    init(_ result: rsb_round, _ buffer: UnsafeMutableBufferPointer<UInt32>) {
        self.init(
            batchNanos: Array(buffer[..<Int(result.batches)]), calls: result.calls, elapsedNanos: result.elapsed_ns,
            dropped: result.dropped)
    }
}

/// What the threads of a concurrent round measured.
final class ThreadResults: Sendable {
    let samples = Locked([RoundSample]())
}

/// Where the clock rows' results go, so the optimiser keeps the reads.
nonisolated(unsafe) var blackhole: UInt64 = 0

/// The Prometheus way: a histogram behind a mutex, shared by the bot's threads and the scraper.
final class LockedHistogram: Sendable {
    let mutex = Locked(RingsideAggregation.Histogram())
}

/// A table of 4096 lognormal latencies (median about 2 µs), indexed modulo its size.
final class LatencyValues: @unchecked Sendable {
    // @unchecked: written once in init, read-only afterwards.
    static let count = 4096
    let pointer: UnsafeMutablePointer<UInt64>

    init() {
        pointer = .allocate(capacity: Self.count)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func uniform() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return (Double(state >> 11) + 0.5) / Double(1 << 53)
        }
        for index in 0..<Self.count {
            let normal = (-2 * log(uniform())).squareRoot() * cos(2 * .pi * uniform())
            pointer[index] = UInt64(2000 * exp(0.8 * normal))
        }
    }

    deinit { pointer.deallocate() }

    @inline(__always)
    subscript(index: Int) -> UInt64 { pointer[index & (Self.count - 1)] }
}

/// The other end of every transport: drains rings, receives datagrams, scrapes the histogram.
final class LiveConsumer: @unchecked Sendable {
    // @unchecked: the consumers and counters are used only by the consumer thread once started;
    // `stop()` joins it before anyone else looks.
    enum Mode: Int {
        case rings = 0
        case datagrams = 1
        case scrapes = 2
        /// Drains the rings again as soon as a pass ends: a consumer right behind the producer,
        /// as a collector under load is.
        case behind = 3
    }

    /// How often the consumer looks at the rings: 10 µs holds about 1,500 records at the rows' rates.
    static let periodNanos: UInt64 = 10_000

    let mode = Atomic<Int>(Mode.rings.rawValue)
    private let stopRequested = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let consumers: [RingConsumer]
    private let socket: Int32
    private let histogram: LockedHistogram
    private let cpu: Int32
    private var isRunning = false
    private(set) var recordsDrained: UInt64 = 0
    private(set) var datagramsReceived: UInt64 = 0
    private(set) var checksum: UInt64 = 0

    init(rings: [String], directory: String, socket: Int32, histogram: LockedHistogram, cpu: Int32) throws(RingError) {
        var consumers: [RingConsumer] = []
        for name in rings { consumers.append(try RingConsumer(name, directory: RingDirectory(directory))) }
        self.consumers = consumers
        self.socket = socket
        self.histogram = histogram
        self.cpu = cpu
    }

    func start() {
        isRunning = true
        let thread = Thread { [self] in
            if cpu >= 0 { _ = rsb_pin_current_thread(cpu) }
            loop()
            finished.signal()
        }
        thread.name = "bench-consumer"
        thread.start()
    }

    /// Sets the doorbell of the `ring`th ring, as a consumer going to sleep does: one store into
    /// the mapping, safe from any thread (the word is atomic; the consumer never reads it).
    func armDoorbell(ring: Int) { consumers[ring].armDoorbell() }

    func stop() {
        guard isRunning else { return }
        stopRequested.store(true, ordering: .releasing)
        finished.wait()
        isRunning = false
    }

    private func loop() {
        let received = UnsafeMutableRawPointer.allocate(byteCount: 64 * 64, alignment: 8)
        defer { received.deallocate() }
        var lastScrape: UInt64 = 0
        var sum: UInt64 = 0
        while !stopRequested.load(ordering: .relaxed) {
            let lookStart = rs_clock_precise_ns()
            var work = 0
            for consumer in consumers {
                let drained =
                    (try? consumer.drain { records, _ in
                        for record in records { sum &+= record.value }
                    }) ?? 0
                work += drained
                recordsDrained &+= UInt64(drained)
            }
            switch mode.load(ordering: .relaxed) {
            case Mode.datagrams.rawValue:
                while case let count = rsb_receive_datagrams(socket, received, 64), count > 0 {
                    datagramsReceived &+= UInt64(count)
                    for index in 0..<Int(count) { sum &+= received.load(fromByteOffset: 64 * index + 8, as: UInt64.self) }
                    work += Int(count)
                }
            case Mode.scrapes.rawValue:
                let now = rs_clock_coarse_ns()
                if now &- lastScrape >= 1_000_000 {
                    sum &+= histogram.mutex.withLock { $0.count }
                    lastScrape = now
                }
            default:
                break
            }
            // One look every `periodNanos`, like the collector's passes under load, not a spin
            // on the producer's cursor: a consumer right behind the producer reads the lines it
            // is writing, and each then moves between the cores twice (the rows turn bimodal).
            // The datagrams are received without a pause, so the socket never fills.
            let current = mode.load(ordering: .relaxed)
            if current == Mode.behind.rawValue {
                continue
            } else if current != Mode.datagrams.rawValue {
                let until = lookStart &+ Self.periodNanos
                while rs_clock_precise_ns() < until { rsb_cpu_relax() }
            } else if work == 0 {
                rsb_cpu_relax()
            }
        }
        checksum = sum
    }
}
