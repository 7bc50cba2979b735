import CRingside
import Dispatch
import Foundation
import RingsideExport
import RingsideHTTP
import RingsideSnapshot
import RingsideSystem
import Synchronization

/// The `/metrics` pages, rendered ahead of the scrapes on a thread of its own and served as
/// they are: a scrape costs sending bytes, not rendering them (a 20 MB page of 10,000 series
/// took 35 to 40 ms to render, 5 ms to send).
///
/// A variant (format and encoding) scraped at least twice in the last `interestNanos` (polled, as
/// by Prometheus) is kept up to date: the thread renders it again after each change of the
/// published snapshot (see `PublishedSnapshot.revision`), never more often than `spacingFactor`
/// times its last render's length apart, so it takes at most about a `spacingFactor`th of a core.
/// Variants not scraped are not rendered; a scrape of a variant not kept up to date (its first,
/// or a person's `curl` now and then) waits for a render of the latest snapshot.
///
/// A page is kept in two sections (see `PrometheusRenderer.renderSections`): the series'
/// families, rendered (and compressed) again only when a series changed (`SeriesContentKey`),
/// and the collector's own families, rendered from every snapshot. So a snapshot in which no
/// series changed costs the small section alone. A page kept up to date is at most
/// max(the time between publishes, `spacingFactor` renders) plus one render behind a fresh
/// render (docs/collector.md, "Pages rendered ahead").
///
/// Memory: at most one format's uncompressed page is kept (the format last scraped without
/// gzip), and only while it is at most `keptPlainBytes`: a larger one (a page of some 7,000
/// series or more) is rendered for each scrape, in parts never joined, and let go once sent, not
/// rendered ahead (Prometheus asks for gzip; a plain page of 100,000 series, 440 MB, kept for the
/// next `curl` would take more than the series themselves). A gzipped page keeps only its
/// compressed pieces.
///
/// Threads: `page(for:)` is the HTTP render worker's; `start` and `stop` the daemon's; the
/// render itself runs on this part's thread (or, when it is not started, on the caller's),
/// one at a time, at nice 10 like the HTTP threads: a render never delays the drain, which only
/// signals a semaphore when it publishes.
package final class MetricsPages: Sendable {
    /// A page as a scraper asks for it.
    package struct Variant: Hashable, Sendable {
        package var format: ExpositionFormat
        package var gzip: Bool

        package init(_ format: ExpositionFormat, gzip: Bool) {
            self.format = format
            self.gzip = gzip
        }
    }

    /// A page as it is served: its body in parts (sections, or a gzip member's pieces), and the
    /// revision of the published snapshot it shows.
    package struct Page: Sendable {
        package let parts: [[UInt8]]
        package let revision: UInt64
    }

    /// Variants are rendered while scraped within this long (then their pages are let go).
    static let interestNanos: UInt64 = 300_000_000_000
    /// The thread starts a render at least this many times the last one's length after it began.
    static let spacingFactor: UInt64 = 4

    /// What a format keeps from one render to the next.
    private struct Kept {
        /// The series whose section is kept (nil: none, or the page does not split).
        var key: SeriesContentKey?
        /// The series' section, uncompressed (in parts) while the format is scraped without gzip, deflated while with.
        var series: [[UInt8]]?
        var seriesPieces: [Zlib.Piece]?
        /// The pages, by whether gzipped.
        var pages: [Bool: Page] = [:]
    }

    /// A scrape waiting for its variant's first page.
    private final class Waiter: Sendable {
        let variant: Variant
        let done = DispatchSemaphore(value: 0)
        let page = Locked<Page?>(nil)

        init(_ variant: Variant) { self.variant = variant }
    }

    private struct State {
        var kept: [ExpositionFormat: Kept] = [:]
        /// CLOCK_MONOTONIC of each variant's last scrape, and of the one before it.
        var lastScraped: [Variant: UInt64] = [:]
        var previousScrape: [Variant: UInt64] = [:]
        /// The one format whose uncompressed page is kept.
        var plainFormat: ExpositionFormat?
        /// Formats whose last uncompressed page was larger than `keptPlainBytes`: rendered for
        /// each scrape and let go once sent, never ahead.
        var sentOnly: Set<ExpositionFormat> = []
        var waiters: [Waiter] = []
        /// Renders made, by variant (tests and the docs' figures read them).
        var renders: [Variant: Int] = [:]
        var lastRenderNanos: UInt64 = 0
        var nextAllowedNanos: UInt64 = 0
        var running = false
        var stopping = false
        /// Its thread while running (a new one at each start).
        var thread: PartThread?

        /// Scraped twice within the interest: the thread keeps its page up to date.
        func isPolled(_ variant: Variant, nowNanos now: UInt64) -> Bool {
            previousScrape[variant].map { now &- $0 <= MetricsPages.interestNanos } ?? false
        }

        /// Whether the thread keeps `variant`'s page up to date (its uncompressed page is one
        /// kept, of the format last scraped without gzip and not too large to keep).
        func isRenderedAhead(_ variant: Variant, nowNanos now: UInt64) -> Bool {
            isPolled(variant, nowNanos: now) && (variant.gzip || variant.format == plainFormat && !sentOnly.contains(variant.format))
        }
    }

    private let published: PublishedSnapshot
    private let source: @Sendable () -> Snapshot
    private let keptPlainBytes: Int
    private let process: @Sendable () -> ProcessMetrics?
    private let renderer: PrometheusRenderer
    private let state = Locked(State())
    /// Held while a page is rendered: one at a time.
    private let rendering = Locked(())
    private let wakeup = DispatchSemaphore(value: 0)
    /// Tests: called on the rendering thread before each render, with the variants about to be rendered.
    private let beforeRender = Locked<(@Sendable (Set<Variant>) -> Void)?>(nil)

    /// - Parameters:
    ///   - source: the latest snapshot with what the subscribers report (read after `published.revision`).
    ///   - process: the process's own figures, read when a page is rendered.
    ///   - keptPlainBytes: the largest uncompressed page kept for the next scrape.
    ///   - renderer: what writes the pages (tests give one of small parts).
    package init(
        published: PublishedSnapshot, source: @escaping @Sendable () -> Snapshot,
        process: @escaping @Sendable () -> ProcessMetrics? = { ProcessMetrics.read() }, keptPlainBytes: Int = MetricsPages.keptPlainBytes,
        renderer: PrometheusRenderer = PrometheusRenderer()
    ) {
        self.renderer = renderer
        self.published = published
        self.source = source
        self.keptPlainBytes = keptPlainBytes
        self.process = process
        published.watch { [wakeup] in wakeup.signal() }
    }

    // MARK: - Scrapes

    /// The page of `variant`: the latest kept while the thread keeps it up to date (it is
    /// polled), else the kept one if it shows the latest revision, else one rendered now (by the
    /// thread, when it runs, while the caller waits).
    package func page(for variant: Variant) -> Page {
        let now = rs_clock_precise_ns()
        let revision = published.revision
        let (kept, keptUpToDate) = state.withLock { state -> (Page?, Bool) in
            let polled = state.isPolled(variant, nowNanos: now)
            state.previousScrape[variant] = state.lastScraped[variant]
            state.lastScraped[variant] = now
            if !variant.gzip, state.plainFormat != variant.format {
                // One uncompressed page at most: the other format's is let go now, not at its next render.
                if let other = state.plainFormat {
                    state.kept[other]?.pages[false] = nil
                    state.kept[other]?.series = nil
                }
                state.plainFormat = variant.format
            }
            let page = state.kept[variant.format]?.pages[variant.gzip]
            return (page, state.running && polled)
        }
        if let kept, keptUpToDate || kept.revision == revision { return kept }
        guard state.withLock({ $0.running }) else {
            return rendering.withLock { _ in
                // Another scrape may have rendered it meanwhile.
                if let page = state.withLock({ $0.kept[variant.format]?.pages[variant.gzip] }), page.revision == published.revision {
                    return page
                }
                return render([variant], threads: nil)[variant]!
            }
        }
        let waiter = Waiter(variant)
        state.withLock { $0.waiters.append(waiter) }
        wakeup.signal()
        waiter.done.wait()
        return waiter.page.withLock { $0 }!
    }

    /// How a plain page (text or OpenMetrics, not gzipped) is served.
    package enum PlainPage {
        /// Small enough to keep: `page(for:)` serves it.
        case kept
        /// Too large to keep: written as it is sent, from the latest snapshot.
        case streamed(ResponseStream)
        /// Too large to keep, and `ResponseStream.maxOpen` pages are being sent already.
        case tooManyStreams

        package var isKept: Bool { if case .kept = self { true } else { false } }
    }

    /// How the latest snapshot's plain page of `format` is served: a page larger than
    /// `keptPlainBytes` (estimated by `plainBytes(of:)`) is written a part at a time as it is sent, so
    /// a person's `curl` of 100,000 series holds a part, not the 440 MB page; the format's
    /// kept page, if any, is let go and no longer rendered ahead.
    package func plainPage(_ format: ExpositionFormat, minorVersion: Int = 1) -> PlainPage {
        guard format != .protobuf else { return .kept }
        let snapshot = source()
        // Estimated from the series alone: most pages are small, and a plan costs a render's
        // first steps (a scrape polled every few milliseconds would pay them each time).
        guard Self.plainBytes(of: snapshot) > keptPlainBytes else { return .kept }
        let stream = PrometheusTextStream(snapshot, process: process(), format: format)
        sendOnly(format)
        guard let response = ResponseStream(minorVersion: minorVersion, { stream.nextPart() }) else { return .tooManyStreams }
        return .streamed(response)
    }

    /// About the bytes of the series' lines on a plain page of `snapshot`, as `SeriesCost` reckons
    /// them (`PrometheusExporter.pageBytes`).
    static func plainBytes(of snapshot: Snapshot) -> Int {
        let windows = snapshot.windowNanos.count, quantiles = snapshot.quantiles.count
        var bytes = 0
        snapshot.series.forEachInPlace { _, series in
            bytes += PrometheusExporter.pageBytes(
                of: series.pointee.metric, ring: series.pointee.ring, windows: windows, quantiles: quantiles)
        }
        return bytes
    }

    /// Marks `format`'s plain page too large to keep: its kept page is let go, and it is no
    /// longer rendered ahead.
    private func sendOnly(_ format: ExpositionFormat) {
        state.withLock { state in
            state.sentOnly.insert(format)
            state.kept[format]?.pages[false] = nil
            state.kept[format]?.series = nil
        }
    }

    /// Renders made of `variant` so far.
    package func renders(of variant: Variant) -> Int { state.withLock { $0.renders[variant] ?? 0 } }

    /// The bytes of the pages and series' sections kept (a section shared by a page counted once).
    package var keptBytes: Int {
        state.withLock { state in
            state.kept.values.reduce(0) { sum, kept in
                let text = (kept.series ?? []).reduce(0) { $0 + $1.count }
                let series = text + (kept.seriesPieces ?? []).reduce(0) { $0 + $1.deflated.count }
                let pages = kept.pages.values.reduce(0) { $0 + $1.parts.reduce(0) { $0 + $1.count } }
                // A page's first parts are its series' section (the same arrays): counted once.
                return sum + max(series, pages)
            }
        }
    }

    /// Tests: `hook` runs before each render, on the rendering thread, with the variants to render.
    package func setBeforeRender(_ hook: (@Sendable (Set<Variant>) -> Void)?) { beforeRender.withLock { $0 = hook } }

    // MARK: - The thread

    /// Starts the thread that keeps the scraped variants' pages up to date.
    package func start() {
        let thread = state.withLock { state -> PartThread? in
            guard !state.running else { return nil }
            state.running = true
            state.stopping = false
            state.thread = PartThread(name: "ringside-render")
            return state.thread
        }
        // Below the drain thread, as the HTTP threads are: a render waits, the drain does not.
        thread?.startOrExit(niceIncrement: 10) { [self] in
            while let timeout = renderDue(nowNanos: rs_clock_precise_ns()) {
                _ = wakeup.wait(timeout: timeout == .max ? .distantFuture : .now() + .nanoseconds(Int(clamping: timeout)))
            }
        }
    }

    /// Stops the thread once its render (if any) is done; scrapes waiting for a page get one
    /// rendered on their own thread. Idempotent.
    package func stop() {
        let thread = state.withLock { state -> PartThread? in
            defer { state.stopping = state.running }
            return state.running ? state.thread : nil
        }
        guard let thread else { return }
        thread.stop(waking: { _ = wakeup.signal() })
        let waiters = state.withLock { state -> [Waiter] in
            state.running = false
            state.thread = nil
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters {
            let page = rendering.withLock { _ in render([waiter.variant], threads: nil)[waiter.variant]! }
            waiter.page.withLock { $0 = page }
            waiter.done.signal()
        }
    }

    /// One turn of the thread (tests call it on theirs, the thread not started): renders the
    /// pages due, and returns how long to wait for the next change before the next turn
    /// (`.max`: until woken), or nil once stopping.
    @discardableResult
    package func renderDue(nowNanos now: UInt64) -> UInt64? {
        let revision = published.revision
        let due = state.withLock { state -> (variants: Set<Variant>, demanded: Bool, waitNanos: UInt64)? in
            if state.stopping { return nil }
            // Variants not scraped for a while are let go, with their pages.
            for (variant, scraped) in state.lastScraped where now &- scraped > Self.interestNanos {
                state.lastScraped[variant] = nil
                state.previousScrape[variant] = nil
                if !variant.gzip { state.sentOnly.remove(variant.format) }
                state.kept[variant.format]?.pages[variant.gzip] = nil
                if variant.gzip { state.kept[variant.format]?.seriesPieces = nil } else { state.kept[variant.format]?.series = nil }
                if state.kept[variant.format]?.pages.isEmpty == true { state.kept[variant.format] = nil }
            }
            let demanded = Set(state.waiters.map(\.variant))
            let stale = Set(
                state.lastScraped.keys.filter { variant in
                    state.isRenderedAhead(variant, nowNanos: now) && state.kept[variant.format]?.pages[variant.gzip]?.revision != revision
                })
            if !demanded.isEmpty { return (demanded.union(stale), true, 0) }
            // Woken at the latest when the first variant's interest runs out.
            let expiry = state.lastScraped.values.map { $0 &+ Self.interestNanos &+ 1 &- now }.min()
            if stale.isEmpty { return ([], false, expiry ?? .max) }
            if now < state.nextAllowedNanos { return ([], false, state.nextAllowedNanos - now) }
            return (stale, false, 0)
        }
        guard let due else { return nil }
        guard !due.variants.isEmpty else { return due.waitNanos }
        let began = rs_clock_precise_ns()
        // A scrape waits: as fast as the machine allows. Else on this thread alone, leaving the
        // other cores to the drain and to the scrapes being sent.
        let pages = rendering.withLock { _ in render(due.variants, threads: due.demanded ? nil : 1) }
        let spent = rs_clock_precise_ns() &- began
        let waiters = state.withLock { state -> [Waiter] in
            state.lastRenderNanos = spent
            state.nextAllowedNanos = began &+ Self.spacingFactor &* spent
            let served = state.waiters.filter { pages[$0.variant] != nil }
            state.waiters.removeAll { pages[$0.variant] != nil }
            return served
        }
        for waiter in waiters {
            waiter.page.withLock { $0 = pages[waiter.variant] }
            waiter.done.signal()
        }
        return 0
    }

    // MARK: - Rendering

    /// Renders `variants` of the latest snapshot, with the other variants of their formats kept
    /// up to date, and keeps them. Called holding `rendering`.
    private func render(_ variants: Set<Variant>, threads: Int?) -> [Variant: Page] {
        let now = rs_clock_precise_ns()
        beforeRender.withLock { $0 }?(variants)
        let revision = published.revision  // before the snapshot: the page is at least as new
        let snapshot = source()
        let process = process()
        let key = SeriesContentKey(snapshot)
        var result: [Variant: Page] = [:]
        // Asked at most once a render, and only where a plain page would be rendered ahead.
        lazy var plainPastKept = Self.plainBytes(of: snapshot) > keptPlainBytes
        for format in ExpositionFormat.allCases where variants.contains(where: { $0.format == format }) {
            var (wanted, kept) = state.withLock { state -> (Set<Bool>, Kept) in
                var wanted = Set(variants.filter { $0.format == format }.map(\.gzip))
                for gzip in [true, false] where state.isRenderedAhead(Variant(format, gzip: gzip), nowNanos: now) { wanted.insert(gzip) }
                return (wanted, state.kept[format] ?? Kept())
            }
            // A plain page rendered ahead that grew past the bound is not rendered whole (the
            // next scrape writes it as it is sent): 115 MB at once passed a 128 MiB budget.
            if wanted.contains(false), !variants.contains(Variant(format, gzip: false)), format != .protobuf, plainPastKept {
                wanted.remove(false)
                sendOnly(format)
                (kept.series, kept.pages[false]) = (nil, nil)
                if wanted.isEmpty { continue }
            }
            var rendered = render(
                format, of: snapshot, process: process, key: key, revision: revision, wanted: wanted, kept: kept, threads: threads)
            let renderedGzip = Set(rendered.pages.keys)
            for (gzip, page) in rendered.pages where variants.contains(Variant(format, gzip: gzip)) {
                result[Variant(format, gzip: gzip)] = page
            }
            // Too large to keep: sent from `result`, then let go (the series' text with it).
            let plainBytes = rendered.pages[false].map { $0.parts.reduce(0) { $0 + $1.count } }
            let tooLarge = plainBytes.map { $0 > keptPlainBytes }
            if tooLarge == true { (rendered.pages[false], rendered.series) = (nil, nil) }
            state.withLock { state in
                for gzip in renderedGzip { state.renders[Variant(format, gzip: gzip), default: 0] += 1 }
                if let tooLarge {
                    if tooLarge { state.sentOnly.insert(format) } else { state.sentOnly.remove(format) }
                }
                state.kept[format] = rendered
                // A scrape of another format without gzip came meanwhile: one uncompressed page at most.
                if state.plainFormat != format {
                    state.kept[format]?.pages[false] = nil
                    state.kept[format]?.series = nil
                }
            }
        }
        return result
    }

    /// The pages of one format: the kept series' section again when no series changed.
    private func render(
        _ format: ExpositionFormat, of snapshot: Snapshot, process: ProcessMetrics?, key: SeriesContentKey, revision: UInt64,
        wanted: Set<Bool>, kept old: Kept, threads: Int?
    ) -> Kept {
        var kept = old
        kept.pages = [:]
        let plain = wanted.contains(false), gzip = wanted.contains(true)
        // A key without versions (a snapshot made by hand) says nothing: nothing is kept for it.
        let seriesKept =
            key.isVersioned && kept.key == key && (plain ? kept.series != nil : kept.series != nil || kept.seriesPieces != nil)
        // As text in parts while a page is wanted without gzip (the pieces are deflated from them),
        // else deflated as it is written: the text of a million series' section (4 GB) is never whole.
        let form: PrometheusRenderer.SeriesForm? = seriesKept ? nil : plain ? .parts : .deflated(level: Self.gzipLevel)
        guard let sections = renderer.renderSections(snapshot, process: process, format: format, series: form, threads: threads)
        else {
            // The page does not split (a bot's metric shares a family of the collector's own): whole.
            let page = renderer.render(snapshot, process: process, format: format)
            kept = Kept()
            if plain { kept.pages[false] = Page(parts: [page], revision: revision) }
            if gzip { kept.pages[true] = Page(parts: [Zlib.compress(page, .gzip, level: Self.gzipLevel)], revision: revision) }
            return kept
        }
        switch sections.series {
        case let .text(series)?: (kept.key, kept.series, kept.seriesPieces) = (key, [series], nil)
        case let .parts(parts)?: (kept.key, kept.series, kept.seriesPieces) = (key, parts, nil)
        case let .deflated(pieces)?: (kept.key, kept.series, kept.seriesPieces) = (key, nil, pieces)
        case nil: break
        }
        if gzip, kept.seriesPieces == nil, let series = kept.series {
            kept.seriesPieces = Zlib.pieces(parts: series, threads: threads ?? PrometheusRenderer.threads, level: Self.gzipLevel)
        }
        if !plain { kept.series = nil }
        if !gzip { kept.seriesPieces = nil }
        if plain, let series = kept.series { kept.pages[false] = Page(parts: series + [sections.own], revision: revision) }
        if gzip, let pieces = kept.seriesPieces {
            let own = Zlib.piece(sections.own, last: true, level: Self.gzipLevel)
            kept.pages[true] = Page(parts: Zlib.gzipMember(pieces + [own]), revision: revision)
        }
        return kept
    }

    /// Pages are deflated at zlib's level 1: 3.7 times as fast as its default (6), for a page a
    /// third larger (85 MB of a page's text: 0.42 s and 19.7 times smaller, against 1.55 s and 26.3
    /// times): the scrapers are near, and the collector's cores are the bots' too.
    static let gzipLevel: Int32 = 1

    /// The largest uncompressed page kept for the next scrape: some 7,000 histogram series of
    /// short labels (4.4 KB of text each). A larger page is written as it is sent.
    package static let keptPlainBytes = 32 << 20

    /// The largest uncompressed page kept under a budget for series of `budget` bytes: at most a
    /// sixteenth of it, since the page is not charged to the series (two of them, the one kept and
    /// the next one rendered, fall within the budget's last quarter with room to spare).
    package static func keptPlainBytes(budget: Int) -> Int { min(keptPlainBytes, budget / 16) }
}
