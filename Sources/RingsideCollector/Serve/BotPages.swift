import RingsideExport
import RingsideSnapshot
import RingsideSystem

/// The per-bot `/metrics?ring=NAME` pages: rendered when scraped, never ahead, from the latest
/// snapshot, by a renderer of their own on the caller's thread (one core at most), so they never
/// take the place of the whole page `MetricsPages` keeps, nor wait for its render.
///
/// A page just rendered is kept for reuse while the snapshot stands (a second Prometheus of a
/// pair scraping the same bots): the `keptPages` latest at most, `keptBytes` in all, a larger
/// page never. So whatever names clients ask for (10,000 different ones), this holds a few pages,
/// and each request costs one pass over the snapshot's series and a render of its bots' own.
/// Safe from any thread.
package final class BotPages: Sendable {
    /// What a page is: the bots (sorted), the format and whether gzipped.
    private struct Key: Hashable {
        let bots: [String]
        let variant: MetricsPages.Variant
    }

    private struct Kept {
        let key: Key
        let revision: UInt64
        let body: [UInt8]
    }

    package static let keptPages = 8
    package static let keptBytes = 16 << 20

    private let renderer = PrometheusRenderer()
    /// The pages kept, the least recently served first, and the counts of pages served.
    private let state = Locked<(kept: [Kept], rendered: UInt64, reused: UInt64)>(([], 0, 0))

    package init() {}

    /// The page of `bots` as `variant` asks, of the snapshot `source` gives (`revision`: the
    /// published revision read before it, which a kept page must show).
    package func page(
        bots: [String], variant: MetricsPages.Variant, revision: UInt64, source: () -> Snapshot
    ) -> [UInt8] {
        let key = Key(bots: bots.sorted(), variant: variant)
        let hit = state.withLock { state -> [UInt8]? in
            guard let index = state.kept.firstIndex(where: { $0.key == key && $0.revision == revision }) else { return nil }
            let kept = state.kept.remove(at: index)
            state.kept.append(kept)
            state.reused += 1
            return kept.body
        }
        if let hit { return hit }
        let text = renderer.render(source(), bots: Set(bots), format: variant.format)
        let body = variant.gzip ? Zlib.compress(text, .gzip, level: MetricsPages.gzipLevel) : text
        state.withLock { state in
            state.rendered += 1
            // Pages of older snapshots go first: they are never served again.
            state.kept.removeAll { $0.key == key || $0.revision != revision }
            guard body.count <= Self.keptBytes else { return }
            state.kept.append(Kept(key: key, revision: revision, body: body))
            while state.kept.count > Self.keptPages || state.kept.reduce(0, { $0 + $1.body.count }) > Self.keptBytes {
                state.kept.removeFirst()
            }
        }
        return body
    }

    /// The counts to show (`ringside_collector_bot_pages_*`), into `stats`.
    func report(into stats: inout QueryStats) {
        state.withLock { state in
            stats.botPagesRendered = state.rendered
            stats.botPagesReused = state.reused
            stats.botPagesKept = state.kept.count
            stats.botPagesKeptBytes = state.kept.reduce(0) { $0 + $1.body.count }
        }
    }
}
