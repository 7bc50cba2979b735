import RingsideSystem
import RingsideSnapshot
import Synchronization

/// Renders pages, keeping the buffers it writes them in from one page to the next while they
/// are small. Safe to call from any thread; renders take turns.
package final class PrometheusRenderer: Sendable {
    private let buffers = Locked<[TextBuffer]>([])
    /// Buffers of at most this many bytes in all are kept for the next page (faulting in fresh
    /// pages costs more than writing them: those of a 10,000-series page, 20 MB, are kept);
    /// larger ones are freed: those of a gzipped page of 100,000 series (two slices of 250,000
    /// lines being deflated, 55 MB) held 560 B a series between scrapes.
    static let keptBufferBytes = 32 << 20

    /// Lines of text deflated as one piece (see `renderSections`' `.deflated`).
    private let linesPerPiece: Int
    /// Lines of text in a part of a page written in parts (see `renderSections`' `.parts`).
    private let linesPerPart: Int

    /// - Parameters:
    ///   - linesPerPiece: lines of text in a piece deflated as it is written: about 20 MB, so
    ///     that deflating restarts rarely (a piece begins with an empty dictionary) and the slices
    ///     written at once hold little.
    ///   - linesPerPart: lines of text in a part of a page written in parts: about 2 MB of short
    ///     labels, so that the slices' buffers, copied into the parts, add little to the page.
    package init(linesPerPiece: Int = 250_000, linesPerPart: Int = 25_000) {
        self.linesPerPiece = linesPerPiece
        self.linesPerPart = linesPerPart
    }

    /// The page for `snapshot` in `format`, with the `process_*` families of `process` when
    /// given (the collector's endpoint reads them when it renders; a snapshot rendered elsewhere has none).
    package func render(_ snapshot: Snapshot, process: ProcessMetrics? = nil, format: ExpositionFormat = .text) -> [UInt8] {
        write(
            PrometheusPage(snapshot, process: process, openMetrics: format == .openMetrics), format: format, families: nil,
            threads: PrometheusPage.threads)
    }

    /// The series' section of a page, as `renderSections` writes it.
    package enum SeriesSection: Sendable, Equatable {
        case text([UInt8])
        /// As text in parts of about `linesPerPart` lines each, never joined: a plain page of
        /// 100,000 series (440 MB) is sent from its parts, not copied once more into one.
        case parts([[UInt8]])
        /// Deflated as pieces of a gzip member (none its last): see `Zlib.gzipMember`.
        case deflated([Zlib.Piece])
    }

    /// How `renderSections` writes the series' section: as text, or deflated at `level`.
    package enum SeriesForm: Sendable {
        case text
        case parts
        case deflated(level: Int32)
    }

    /// The page for `snapshot` in two sections that, one after the other, are `render`'s page:
    /// the families of the series, which change only when a series does (its `version` or
    /// `wholeVersion`, or which series there are), then the collector's own (its rings, lanes,
    /// threads, SLOs, figures and process), which change with every snapshot. A caller that kept
    /// the series' section of a snapshot with the same series writes only the other.
    ///
    /// Nil when the page does not split so: a bot's metric named as one of the collector's own
    /// families, with its type, shares that family with it (render the page whole then).
    /// - Parameters:
    ///   - series: how to write the series' section (nil: not at all, nor in the result).
    ///   - threads: threads a large section is written (and deflated) on (by default as `render`'s).
    package func renderSections(
        _ snapshot: Snapshot, process: ProcessMetrics? = nil, format: ExpositionFormat = .text, series: SeriesForm? = .text,
        threads: Int? = nil
    ) -> (series: SeriesSection?, own: [UInt8])? {
        let threads = threads ?? PrometheusPage.threads
        let page = PrometheusPage(snapshot, process: process, openMetrics: format == .openMetrics)
        guard let sections = page.sections else { return nil }
        let seriesSection: SeriesSection? =
            switch series {
            case nil: nil
            case .text: .text(write(page, format: format, families: sections.series, threads: threads))
            case .parts: .parts(writeParts(page, format: format, families: sections.series, threads: threads))
            case let .deflated(level): .deflated(deflate(page, format: format, families: sections.series, threads: threads, level: level))
            }
        return (seriesSection, write(page, format: format, families: sections.own, threads: threads))
    }

    /// The families in `families` deflated as pieces as they are written: text a slice at a time
    /// on `threads`, protobuf on this thread.
    private func deflate(
        _ page: PrometheusPage, format: ExpositionFormat, families: Range<Int>, threads: Int, level: Int32
    ) -> [Zlib.Piece] {
        if format == .protobuf {
            // A tenth as many series as a text piece has lines: a histogram series is some 55 lines
            // of text and 1.4 KB of protobuf, so a piece of 25,000 is about 35 MB.
            return page.writeProtobufDeflated(families: families, metricsPerPiece: max(1, linesPerPiece / 10), level: level)
        }
        return buffers.withLock { buffers in
            let pieces = page.writeDeflated(
                reusing: &buffers, threads: threads, openMetrics: format == .openMetrics, families: families, linesPerPiece: linesPerPiece,
                level: level)
            if buffers.reduce(0, { $0 + $1.capacity }) > Self.keptBufferBytes { buffers = [] }
            return pieces
        }
    }

    /// The families in `families` as text in parts of about `linesPerPart` lines each (protobuf:
    /// one part).
    private func writeParts(_ page: PrometheusPage, format: ExpositionFormat, families: Range<Int>, threads: Int) -> [[UInt8]] {
        if format == .protobuf { return [page.writeProtobuf(families: families)] }
        return buffers.withLock { buffers in
            let parts = page.writeParts(
                reusing: &buffers, threads: threads, openMetrics: format == .openMetrics, families: families, linesPerPart: linesPerPart)
            if buffers.reduce(0, { $0 + $1.capacity }) > Self.keptBufferBytes { buffers = [] }
            return parts
        }
    }

    /// Threads a large page is written and deflated on by default: the machine's cores, at most 4.
    package static var threads: Int { PrometheusPage.threads }

    func write(_ page: PrometheusPage, format: ExpositionFormat, families: Range<Int>? = nil, threads: Int) -> [UInt8] {
        if format == .protobuf { return page.writeProtobuf(families: families) }
        return buffers.withLock { buffers in
            let bytes = page.write(reusing: &buffers, threads: threads, openMetrics: format == .openMetrics, families: families)
            if buffers.reduce(0, { $0 + $1.capacity }) > Self.keptBufferBytes { buffers = [] }
            return bytes
        }
    }
}
