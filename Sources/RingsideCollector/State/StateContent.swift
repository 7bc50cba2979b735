import RingsideAggregation

/// What the collector's state holds (see `CollectorState`): each bot's folded figures (what its
/// gone workers left), the all-time histograms it kept for the bot, and when the bot was last
/// seen, for its expiry. A value: the drain thread and the saver each hold one.
struct StateContent: Equatable, Sendable {
    var bots: [String: [CollectorState.Entry]] = [:]
    var histograms: [String: [CollectorState.HistogramEntry]] = [:]
    /// When each bot was last seen with a file in the directory, in Unix seconds.
    var seen: [String: UInt64] = [:]

    /// Whether it holds nothing.
    var isEmpty: Bool { bots.isEmpty && histograms.isEmpty }

    /// Every bot it holds figures or histograms of.
    var botNames: Set<String> { Set(bots.keys).union(histograms.keys) }

    /// Takes a fold's figures for `bot`: each entry replaces its series' (by metric and labels),
    /// the bot's other series keep theirs.
    mutating func apply(_ entries: [CollectorState.Entry], for bot: String) {
        guard !entries.isEmpty else { return }
        let existing = bots[bot] ?? []
        if existing.isEmpty {
            bots[bot] = entries.sorted(by: Self.inOrder)
            return
        }
        var byKey = Dictionary(existing.map { (SeriesName($0), $0) }, uniquingKeysWith: { $1 })
        for entry in entries { byKey[SeriesName(entry)] = entry }
        bots[bot] = byKey.values.sorted(by: Self.inOrder)
    }

    /// Drops the figures and histograms of the bots not in `present` that were last seen more
    /// than `afterSeconds` before `now` (never with nil); a bot never seen counts as seen now.
    /// - Returns: the bots dropped.
    mutating func expire(nowSeconds now: UInt64, afterSeconds: UInt64?, present: Set<String>) -> [String] {
        var expired: [String] = []
        for bot in botNames {
            if present.contains(bot) || seen[bot] == nil {
                seen[bot] = now
                continue
            }
            guard let afterSeconds, let last = seen[bot], now > last, now - last > afterSeconds else { continue }
            expired.append(bot)
            bots[bot] = nil
            histograms[bot] = nil
            seen[bot] = nil
        }
        // A bot seen but holding nothing (its series all went) needs no date.
        for bot in seen.keys where bots[bot] == nil && histograms[bot] == nil && !present.contains(bot) { seen[bot] = nil }
        return expired.sorted()
    }

    /// A series of a bot, by metric name and encoded labels.
    private struct SeriesName: Hashable {
        let metric: String
        let labels: String
        init(_ entry: CollectorState.Entry) {
            metric = entry.metric
            labels = entry.labels
        }
    }

    private static func inOrder(_ a: CollectorState.Entry, _ b: CollectorState.Entry) -> Bool {
        (a.metric, a.labels) < (b.metric, b.labels)
    }
}
