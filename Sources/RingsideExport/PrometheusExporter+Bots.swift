import RingsideSnapshot

// The page of a few bots (`/metrics?ring=NAME`): their series and their files' figures, none of
// the collector's own.

extension Snapshot {
    /// The same snapshot with the series and files of `bots` alone, and no SLO (an objective is
    /// the collector's, over every bot's series): what a per-bot page is made of. Its thread
    /// sample stays whole: its families are read through the rings kept.
    package func only(bots: Set<String>) -> Snapshot {
        var copy = self
        var kept: [SeriesSnapshot] = []
        // A bot's series are side by side: one lookup for each run of them, not one a series.
        var last: (ring: String, wanted: Bool)?
        series.forEachInPlace { _, series in
            let ring = series.pointee.ring
            let wanted: Bool
            if let last, last.ring == ring {
                wanted = last.wanted
            } else {
                wanted = bots.contains(ring)
                last = (ring, wanted)
            }
            if wanted { kept.append(series.pointee) }
        }
        copy.series = SeriesList(kept)
        copy.rings = rings.filter { bots.contains($0.bot) }
        copy.slos = []
        return copy
    }
}

extension PrometheusExporter {
    /// The families of a per-bot page after its series': its files' (`ringside_ring_*`,
    /// `ringside_lane_*`), and its threads' and processes' from the thread sample, without the
    /// sampler's own (`ringside_collector_thread_sampler_*`).
    static func botFamilies(_ snapshot: Snapshot) -> [FixedFamily] {
        let files = fixedFamilies { _ = fileFamilies(snapshot, $0) }
        return files + threadHealthFamilies(snapshot).filter { !$0.name.hasPrefix("ringside_collector_") }
    }

    /// What the routes did with their query strings (`ringside_collector_bot_pages_*`,
    /// `ringside_collector_queries_refused_total`): from the first per-bot page served or query
    /// refused (a collector scraped whole never shows them).
    static func queryFamilies(_ queries: QueryStats, _ family: AddFamily) {
        guard queries != QueryStats() else { return }
        family(
            "ringside_collector_bot_pages_total", "counter",
            "Per-bot pages served (/metrics?ring=): rendered for their scrape, or reused (the same bots and format of an unchanged snapshot)",
            [([("served", "rendered")], Double(queries.botPagesRendered)), ([("served", "reused")], Double(queries.botPagesReused))])
        family(
            "ringside_collector_bot_pages_kept", "gauge", "Per-bot pages kept for reuse (a few, bounded in number and bytes)",
            [([], Double(queries.botPagesKept))])
        family(
            "ringside_collector_bot_pages_kept_bytes", "gauge", "Bytes the per-bot pages kept for reuse hold",
            [([], Double(queries.botPagesKeptBytes))])
        family(
            "ringside_collector_queries_refused_total", "counter",
            "Requests refused (400) for their query string: an unknown or malformed parameter, a ring that is no bot's name, too many",
            queries.refused.sorted { $0.key < $1.key }.map { ([("route", $0.key)], Double($0.value)) })
    }
}

extension PrometheusRenderer {
    /// The page of `bots` alone (`/metrics?ring=`): their series, with their per-metric families
    /// (drops, samples, clamps), their files' (`ringside_ring_*`, `ringside_lane_*`) and their
    /// threads' and processes' (`ringside_thread_*`, `ringside_bot_process_*`); none of the
    /// collector's own (`ringside_collector_*`, `ringside_slo_*`, `ringside_build_info`,
    /// `process_*`), which its whole page serves once. Written on the caller's thread alone: a
    /// flood of per-bot scrapes takes one core at most.
    package func render(_ snapshot: Snapshot, bots: Set<String>, format: ExpositionFormat) -> [UInt8] {
        let page = PrometheusPage(snapshot.only(bots: bots), openMetrics: format == .openMetrics, collectorFamilies: false)
        return write(page, format: format, threads: 1)
    }
}
