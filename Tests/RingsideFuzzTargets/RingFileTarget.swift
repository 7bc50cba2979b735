import CRingside
import Foundation
import Ringside
import RingsideCollector
import RingsideExport
import RingsideTestSupport

/// The ring file: the input is a whole bot file (or a worker's), written into the scratch ring
/// directory and read by every reader of the collector and the tools: the inspector (status,
/// header, registry entry by entry, lane problems, cells, peeks), the consumer (a drain), then a
/// collector's pass (discovery, adoption, the drain through `BotAggregator` with exemplars,
/// format 3's and 4's values, signed and scaled; a worker's fold into the state) and its pages
/// (`/latest`, and one of Prometheus text, OpenMetrics and protobuf, by the file's bytes).
///
/// Checks: a refusal names the ring; a file the inspector reads has the backlog its lanes say,
/// which the consumer and the collector drain whole; the pages are UTF-8 and `/latest` is JSON.
enum RingFileTarget {
    static let bot = FuzzTarget(
        name: "ring-file",
        covers: "a bot file: the inspector, the consumer, a collector pass and its pages",
        run: { run($0, ring: "fuzz") },
        seeds: { try RingFileSeeds.make(worker: false) })

    static let worker = FuzzTarget(
        name: "worker-file",
        covers: "a worker's file (<bot>@<pid>): the same readers, the collector's merge and fold",
        run: { run($0, ring: workerName) },
        seeds: { try RingFileSeeds.make(worker: true) })

    /// One renderer for every input, as the collector keeps one: its buffers are kept from page to page.
    private static let renderer = PrometheusRenderer()

    /// A worker of bot `fuzz` whose process is gone (pid 1 is never a bot of ours).
    static let workerName = "fuzz@1"

    static func run(_ bytes: [UInt8], ring: String) {
        let target = ring == "fuzz" ? "ring-file" : "worker-file"
        func finding(_ what: String) -> Never { FuzzFinding.report(target, what) }
        FuzzScratch.empty()
        let directory = FuzzScratch.ringDirectory
        FuzzScratch.write(RingDirectory.filePrefix + ring, bytes)

        let verdict = inspect(ring, directory: directory, finding: finding)
        FuzzScratch.write(RingDirectory.filePrefix + ring, bytes)
        consume(ring, directory: directory, verdict: verdict, finding: finding)
        FuzzScratch.write(RingDirectory.filePrefix + ring, bytes)
        collect(ring, bytes, directory: directory, verdict: verdict, finding: finding)
    }

    /// The inspector, as `ringside-dump` reads a file: the status, or why the file is refused.
    private static func inspect(
        _ ring: String, directory: RingDirectory, finding: (String) -> Never
    ) -> Result<RingStatus, RingError> {
        do throws(RingError) {
            let inspector = try RingInspector(ring, directory: directory)
            let status = try inspector.status()
            let metrics = try inspector.metrics()
            _ = inspector.header
            _ = inspector.laneProblems()
            _ = try inspector.registryEntries()
            for metric in metrics { _ = try inspector.cells(of: metric) }
            let waiting = try inspector.peek()
            let last = try inspector.peek(last: 3)
            let recent = try inspector.peek(includingConsumed: true)
            if waiting.count != Int(clamping: status.backlog) {
                finding("peek copied \(waiting.count) records of a backlog of \(status.backlog)")
            }
            let lastExpected = status.lanes.reduce(0) { $0 + min(3, Int(clamping: $1.backlog)) }
            if last.count != lastExpected { finding("peek(last: 3) copied \(last.count), expected \(lastExpected)") }
            if let replaced = recent.first(where: { $0.consumed && $0.record.sequence != $0.cursor }) {
                finding("peek(includingConsumed:) showed cursor \(replaced.cursor) from a slot of sequence \(replaced.record.sequence)")
            }
            if recent.count > status.lanes.count * Int(status.capacity) {
                finding("peek(includingConsumed:) copied \(recent.count) records from \(status.lanes.count) lanes of \(status.capacity)")
            }
            if status.writeCursor != status.lanes.reduce(0, { $0 &+ $1.writeCursor }) {
                finding("the bot's write cursor is not its lanes' summed")
            }
            return .success(status)
        } catch {
            if !names(error, ring: ring) { finding("a refusal that does not name the ring: \(error)") }
            return .failure(error)
        }
    }

    /// The consumer, as the collector opens a file: a drain of every lane.
    private static func consume(
        _ ring: String, directory: RingDirectory, verdict: Result<RingStatus, RingError>, finding: (String) -> Never
    ) {
        do throws(RingError) {
            let consumer = try RingConsumer(ring, directory: directory)
            var drained = 0
            _ = try consumer.drain { records, _ in drained += records.count }
            _ = try consumer.status()
            switch verdict {
            case .success(let status) where drained != Int(clamping: status.backlog):
                finding("the consumer drained \(drained) records of a backlog of \(status.backlog)")
            case .failure(let error): finding("the consumer read a file the inspector refused (\(error))")
            default: break
            }
        } catch {
            if case .success = verdict { finding("the consumer refused a file the inspector read: \(error)") }
            if !names(error, ring: ring) { finding("a consumer's refusal that does not name the ring: \(error)") }
        }
    }

    /// A collector's pass over the directory, and the pages it serves.
    private static func collect(
        _ ring: String, _ bytes: [UInt8], directory: RingDirectory, verdict: Result<RingStatus, RingError>, finding: (String) -> Never
    ) {
        var options = CollectorOptions(directory: directory)
        options.threadSampleIntervalNanos = 0
        let collector: Collector
        do { collector = try Collector(options: options, log: CollectorLog { _ in }) } catch {
            finding("no collector for the scratch directory: \(error)")
        }
        collector.runPass(nowNanos: rs_clock_precise_ns(), forcePublish: true)
        let snapshot = collector.snapshot
        if ring == "fuzz", case .success(let status) = verdict {
            guard let shown = snapshot.rings.first(where: { $0.name == ring }) else { finding("a file the readers read is not shown") }
            if shown.state != .skipped, shown.drainedTotal != status.backlog {
                finding("the collector drained \(shown.drainedTotal) records of a backlog of \(status.backlog)")
            }
        }
        // One page of the three a file: a page is mostly the collector's own families, the same
        // whatever the file, and rendering all three took most of an input's time.
        let format = [ExpositionFormat.text, .openMetrics, .protobuf][Int(bytes.reduce(0) { $0 &+ UInt($1) } % 3)]
        let page = renderer.render(snapshot, format: format)
        if format != .protobuf, String(validating: page, as: UTF8.self) == nil { finding("the \(format) page of /metrics is not UTF-8") }
        let latest = JSONExporter.latest(snapshot)
        if (try? JSONSerialization.jsonObject(with: Data(latest))) == nil {
            finding("/latest is not JSON: \(String(decoding: latest.prefix(300), as: UTF8.self))")
        }
    }

    /// Whether a refusal says which ring it is about, as an operator reads it in a log.
    private static func names(_ error: RingError, ring: String) -> Bool {
        "\(error)".contains("ring \(ring)")
    }
}
