import RingsideSnapshot
import RingsideSystem

/// A text page (Prometheus or OpenMetrics) written a part at a time as it is sent, on the
/// thread that asks for the next part: a plain page of 100,000 series (440 MB) is never held
/// whole, only its plan (a few steps a series) and the part being sent.
///
/// The parts, one after the other, are `PrometheusRenderer.render`'s page of the same snapshot.
package final class PrometheusTextStream: Sendable {
    private let writer: SliceWriter
    /// The next part to write; taken under the lock, so parts come in order whoever asks.
    private let next = Locked(0)

    /// Lines in a part: about 1 MB of short labels (some 85 bytes a line), written in a few
    /// milliseconds, so the thread that sends it serves its other clients in between.
    package static let linesPerPart = 12_000

    /// The page of `snapshot` in `format` (text or OpenMetrics; protobuf has no text to stream).
    package init(_ snapshot: Snapshot, process: ProcessMetrics? = nil, format: ExpositionFormat, linesPerPart: Int = linesPerPart) {
        precondition(format != .protobuf, "a protobuf page is not written as text")
        let page = PrometheusPage(snapshot, process: process, openMetrics: format == .openMetrics)
        let plan = page.slicePlan(openMetrics: format == .openMetrics, families: nil, threads: 1, linesPerSlice: linesPerPart)
        writer = SliceWriter(plan, buffers: [TextBuffer(capacity: 0)], openMetrics: format == .openMetrics)
    }

    /// The next part of the page; nil once the page is written.
    package func nextPart() -> [UInt8]? {
        next.withLock { next in
            guard next < writer.plan.slices.count else { return nil }
            defer { next += 1 }
            return writer.write(slice: next).bytes
        }
    }
}
