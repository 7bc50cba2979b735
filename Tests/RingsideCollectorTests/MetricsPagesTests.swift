import RingsideSystem
import CRingside
import Dispatch
import Ringside
@testable import RingsideCollector
import RingsideExport
import RingsideHTTP
import RingsideSnapshot
import RingsideTestSupport
import Synchronization
import Testing

/// Fixed process figures: a page rendered twice from one snapshot is then the same bytes.
private let fixedProcess = ProcessMetrics(
    cpuSeconds: 2, residentMemoryBytes: 1_048_576, virtualMemoryBytes: 4_194_304, openFDs: 7, maxFDs: 1_024,
    startTimeSeconds: 1_700_000_000)

private final class HlogErrors: Sendable {
    let value = Locked<UInt64>(0)
}

/// The collector's pages; `hlogErrors`, when given, stands for what the subscribers report (a
/// figure of the collector's own that moves without any series changing).
private func metricsPages(of collector: Collector, hlogErrors: HlogErrors? = nil) -> MetricsPages {
    let published = collector.published
    return MetricsPages(
        published: published,
        source: {
            var snapshot = published.snapshot
            if let hlogErrors { snapshot.collector.hlogErrors = hlogErrors.value.withLock { $0 } }
            return snapshot
        }, process: { fixedProcess })
}

/// The page's body as a scraper reads it (gunzipped when gzipped).
private func body(_ page: MetricsPages.Page, _ variant: MetricsPages.Variant) -> [UInt8] {
    let bytes = Array(page.parts.joined())
    return variant.gzip ? Zlib.decompress(bytes, .gzip) ?? [] : bytes
}

private func baseAddress(_ bytes: [UInt8]) -> UnsafePointer<UInt8>? { bytes.withUnsafeBufferPointer { $0.baseAddress } }

/// A turn of the renderer's thread, late enough to be past its spacing (the clock's now is its only input).
private func renderTurn(_ pages: MetricsPages, laterBy nanos: UInt64 = 60_000_000_000) {
    pages.renderDue(nowNanos: rs_clock_precise_ns() + nanos)
}

@Suite("MetricsPages: /metrics served from pages rendered once per change, off the drain thread")
struct MetricsPagesTests {
    static let variants = ExpositionFormat.allCases.flatMap {
        [MetricsPages.Variant($0, gzip: false), MetricsPages.Variant($0, gzip: true)]
    }

    @Test("snapshots whose series carry no versions (made by hand) keep no series' section: a change shows on the next page")
    func unversionedSnapshotsKeepNothing() throws {
        try withBot("unversioned", options: .init(laneCapacity: 1024)) { directory, bot in
            try bot.histogram("latency", unit: .nanoseconds).record(1_500)
            let collector = try makeCollector(directory, captured: CapturedLog())
            let now = rs_clock_precise_ns()
            collector.runPass(nowNanos: now, forcePublish: true)
            // Stands for counts a hand-made snapshot changes without a new version.
            let added = HlogErrors()
            let published = collector.published
            let pages = MetricsPages(
                published: published,
                source: {
                    var snapshot = published.snapshot
                    for index in snapshot.series.indices {
                        (snapshot.series[index].version, snapshot.series[index].wholeVersion) = (0, 0)
                        snapshot.series[index].cumulativeCount += added.value.withLock { $0 }
                    }
                    return snapshot
                }, process: { fixedProcess })
            for variant in [MetricsPages.Variant(.text, gzip: true), MetricsPages.Variant(.text, gzip: false)] {
                let count = added.value.withLock { $0 } + 1
                let first = String(decoding: body(pages.page(for: variant), variant), as: UTF8.self)
                #expect(first.contains("latency_seconds_count{ring=\"unversioned\"} \(count)\n"))
                added.value.withLock { $0 += 41 }
                collector.runPass(nowNanos: now, forcePublish: true)
                let second = String(decoding: body(pages.page(for: variant), variant), as: UTF8.self)
                let expected = "latency_seconds_count{ring=\"unversioned\"} \(count + 41)\n"
                #expect(second.contains(expected), "the series' section rendered again")
            }
        }
    }

    @Test(
        "a page served after a snapshot where no series changed is a fresh render of that snapshot, byte for byte, its series' section kept",
        arguments: variants)
    func keptSectionIsFresh(variant: MetricsPages.Variant) throws {
        try withBot("kept", options: .init(laneCapacity: 1024)) { directory, bot in
            try bot.histogram("latency", unit: .nanoseconds, labels: ["side": "buy"]).record(1_500)
            try bot.counter("orders").increment(by: 3)
            try bot.gauge("depth").set(2.5)
            let collector = try makeCollector(directory, captured: CapturedLog())
            let now = rs_clock_precise_ns()
            collector.runPass(nowNanos: now, forcePublish: true)
            let errors = HlogErrors()
            let pages = metricsPages(of: collector, hlogErrors: errors)
            let first = pages.page(for: variant)
            let renderer = PrometheusRenderer()
            var snapshot = collector.snapshot
            snapshot.collector.hlogErrors = 0
            let firstKey = SeriesContentKey(snapshot)
            #expect(body(first, variant) == renderer.render(snapshot, process: fixedProcess, format: variant.format))

            // A new snapshot at the same instant, nothing recorded: the series are as they were, a
            // figure of the collector's own is not.
            errors.value.withLock { $0 = 5 }
            collector.runPass(nowNanos: now, forcePublish: true)
            snapshot = collector.snapshot
            snapshot.collector.hlogErrors = 5
            #expect(SeriesContentKey(snapshot) == firstKey, "no series changed")
            let second = pages.page(for: variant)
            #expect(second.revision > first.revision, "rendered again for the new snapshot")
            #expect(body(second, variant) == renderer.render(snapshot, process: fixedProcess, format: variant.format))
            #expect(body(second, variant) != body(first, variant), "the collector's own figures moved")
            // The series' section (a gzip member's first piece after its header) is the one kept, not rendered again.
            let series = variant.gzip ? 1 : 0
            #expect(baseAddress(second.parts[series]) == baseAddress(first.parts[series]))
            #expect(pages.page(for: variant).revision == second.revision, "no change, no render")
            #expect(pages.renders(of: variant) == 2)
        }
    }

    @Test(
        "a changed series shows in the next page; only the variants polled are rendered ahead, once per change, until no longer scraped")
    func onlyScrapedFormats() throws {
        try withBot("only", options: .init(laneCapacity: 1024)) { directory, bot in
            let latency = try bot.histogram("latency", unit: .nanoseconds)
            latency.record(1_000)
            let collector = try makeCollector(directory, captured: CapturedLog())
            pass(collector)
            let pages = metricsPages(of: collector)
            let scraped = MetricsPages.Variant(.openMetrics, gzip: true)
            func count() -> String? {
                String(decoding: body(pages.page(for: scraped), scraped), as: UTF8.self).split(separator: "\n")
                    .first { $0.hasPrefix("latency_seconds_count{") }.map { String($0.split(separator: " ").last ?? "") }
            }
            #expect(count() == "1")
            #expect(count() == "1", "scraped twice: polled")
            let once = MetricsPages.Variant(.protobuf, gzip: true)
            _ = pages.page(for: once)
            for value in 2...4 {
                latency.record(UInt64(value) * 1_000)
                pass(collector)
                renderTurn(pages)
                renderTurn(pages)  // nothing new: nothing rendered
                #expect(pages.renders(of: scraped) == value)
                #expect(count() == String(value), "the change shows in the page rendered after its snapshot")
            }
            #expect(pages.renders(of: once) == 1, "scraped once: rendered for that scrape alone")
            for variant in Self.variants where variant != scraped && variant != once {
                #expect(pages.renders(of: variant) == 0, "\(variant) was never scraped")
            }
            // Not scraped for longer than the interest: let go, and no longer rendered.
            renderTurn(pages, laterBy: MetricsPages.interestNanos + 1_000_000_000)
            latency.record(9_000)
            pass(collector)
            renderTurn(pages, laterBy: MetricsPages.interestNanos + 2_000_000_000)
            #expect(pages.renders(of: scraped) == 4)
        }
    }

    @Test(
        "a plain page larger than the bound kept is sent from its parts and let go: nothing held at its size after the scrape, nor rendered ahead; a smaller one and the gzipped page are kept"
    )
    func largePlainPageLetGo() throws {
        try withBot("large", options: .init(laneCapacity: 1024)) { directory, bot in
            let latencies = try (0..<40).map { try bot.histogram("latency", unit: .nanoseconds, labels: ["n": String($0)]) }
            for latency in latencies { latency.record(1_000) }
            let collector = try makeCollector(directory, captured: CapturedLog())
            pass(collector)
            let published = collector.published
            // Parts of 100 lines: the page (40 series of some 50 lines) is written in several, never joined.
            let large = MetricsPages(
                published: published, source: { published.snapshot }, process: { fixedProcess }, keptPlainBytes: 4_096,
                renderer: PrometheusRenderer(linesPerPart: 100))
            let small = MetricsPages(published: published, source: { published.snapshot }, process: { fixedProcess })
            let plain = MetricsPages.Variant(.text, gzip: false), gzipped = MetricsPages.Variant(.text, gzip: true)
            var pageBytes = 0
            for _ in 0..<2 {  // twice: polled, as a scraper does
                let page = large.page(for: plain)
                pageBytes = page.parts.reduce(0) { $0 + $1.count }
                #expect(page.parts.count > 2, "the series' text in parts, then the collector's own: \(page.parts.count) parts")
                #expect(pageBytes > 10 * 4_096, "\(pageBytes) bytes")
                #expect(large.keptBytes == 0, "\(large.keptBytes) bytes kept after a page of \(pageBytes) was sent")
                _ = small.page(for: plain)
                #expect(small.keptBytes >= pageBytes, "a page within the bound is kept for the next scrape")
            }
            for _ in 0..<2 { _ = large.page(for: gzipped) }
            #expect(large.keptBytes > 0 && large.keptBytes < pageBytes / 4, "the gzipped page kept: \(large.keptBytes) bytes")

            // A change: the small plain page and the gzipped one are rendered ahead, the large plain one is not.
            for latency in latencies { latency.record(2_000) }
            pass(collector)
            renderTurn(large)
            renderTurn(small)
            // (A kept page of the latest snapshot answers the second scrape: one render each, then one ahead.)
            #expect(large.renders(of: plain) == 2, "rendered for each of its two scrapes, not ahead")
            #expect(large.renders(of: gzipped) == 2 && small.renders(of: plain) == 2, "rendered ahead")
            #expect(large.keptBytes < pageBytes / 4)
            // The next scrape shows the change all the same, and leaves nothing at its size.
            let text = String(decoding: large.page(for: plain).parts.joined(), as: UTF8.self)
            #expect(text.contains("latency_seconds_count{ring=\"large\",n=\"7\"} 2\n"))
            #expect(large.keptBytes < pageBytes / 4)
        }
    }

    @Test("a plain page larger than the bound kept is written as it is sent: its parts are the page; a smaller one is kept")
    func largePlainPageStreamed() throws {
        try withBot("streamed", options: .init(laneCapacity: 1024)) { directory, bot in
            let latencies = try (0..<40).map { try bot.histogram("latency", unit: .nanoseconds, labels: ["n": String($0)]) }
            for latency in latencies { latency.record(1_000) }
            let collector = try makeCollector(directory, captured: CapturedLog())
            pass(collector)
            let published = collector.published
            let large = MetricsPages(published: published, source: { published.snapshot }, process: { fixedProcess }, keptPlainBytes: 4_096)
            let small = MetricsPages(published: published, source: { published.snapshot }, process: { fixedProcess })
            for format in [ExpositionFormat.text, .openMetrics] {
                guard case let .streamed(stream) = large.plainPage(format) else {
                    Issue.record("a page of 40 series past a bound of 4 KiB, not streamed")
                    continue
                }
                var parts: [[UInt8]] = []
                while let part = stream.nextPart() { parts.append(part) }
                let page = PrometheusRenderer().render(published.snapshot, process: fixedProcess, format: format)
                #expect(Array(parts.joined()) == page, "\(format)")
                // The estimate that decides: the series' lines, within the page that holds them and the collector's own.
                let estimate = MetricsPages.plainBytes(of: published.snapshot)
                #expect(estimate <= page.count && estimate >= page.count / 2, "\(estimate) estimated for \(page.count) bytes")
                #expect(large.keptBytes == 0, "nothing kept of a streamed page")
                guard case .kept = small.plainPage(format) else {
                    Issue.record("a page within the bound, not kept")
                    continue
                }
            }
            #expect(large.plainPage(.protobuf).isKept, "protobuf is not written as text")
        }
    }

    @Test(
        "while a render is held, scrapes get the page before it at once and the drain goes on publishing; the change shows once it is done")
    func slowRenderDelaysNothing() throws {
        try withBot("slow", options: .init(laneCapacity: 1 << 14)) { directory, bot in
            let latency = try bot.histogram("latency", unit: .nanoseconds)
            latency.record(1_000)
            let collector = try makeCollector(directory, pollNanos: 5_000_000, captured: CapturedLog())
            pass(collector)
            let pages = metricsPages(of: collector)
            let variant = MetricsPages.Variant(.text, gzip: false)
            let before = pages.page(for: variant)  // rendered on this thread: the thread is not started yet
            #expect(pages.page(for: variant).revision == before.revision, "scraped twice: polled, kept up to date")

            let entered = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            pages.setBeforeRender { _ in
                entered.signal()
                release.wait()
            }
            collector.start()
            pages.start()
            defer {
                pages.setBeforeRender(nil)
                release.signal()
                pages.stop()
                collector.stop()
            }
            latency.record(2_000)
            #expect(entered.wait(timeout: .now() + 30) == .success, "the thread renders after a publish")
            // The render is held: a scrape is answered from the page kept, at once.
            let during = pages.page(for: variant)
            #expect(during.revision == before.revision)
            #expect(baseAddress(during.parts[0]) == baseAddress(before.parts[0]))
            // ... and the drain thread drains and publishes meanwhile.
            let generation = collector.snapshot.generation
            var recorded = 2
            #expect(
                eventually {
                    latency.record(UInt64(recorded + 1) * 1_000)
                    recorded += 1
                    return collector.snapshot.generation >= generation + 3
                }, "publishes go on while a render is held")
            #expect(eventually { collector.snapshot.series("latency")?.cumulativeCount == UInt64(recorded) }, "all drained")

            pages.setBeforeRender(nil)
            release.signal()
            let shown = eventually { () -> Bool? in
                let page = String(decoding: pages.page(for: variant).parts.joined(), as: UTF8.self)
                return page.contains("latency_seconds_count{ring=\"slow\"} \(recorded)\n") ? true : nil
            }
            #expect(shown == true, "the latest count shows once the render is let go")
        }
    }
}
