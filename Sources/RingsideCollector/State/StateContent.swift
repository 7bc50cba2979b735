import RingsideAggregation

/// What the collector's state holds (see `CollectorState`): each bot's folded figures (what its
/// gone workers left), the all-time histograms it kept for the bot, and when the bot was last
/// seen, for its expiry. A value: the drain thread and the saver each hold one.
///
/// A bot's figures are kept in order of metric and labels, one entry a series (`normalized`
/// makes them so, as read from a file), so a fold finds its series by a binary search.
struct StateContent: Equatable, Sendable {
    var bots: [String: [CollectorState.Entry]] = [:]
    var histograms: [String: [CollectorState.HistogramEntry]] = [:]
    /// When each bot was last seen with a file in the directory, in Unix seconds.
    var seen: [String: UInt64] = [:]

    /// Whether it holds nothing.
    var isEmpty: Bool { bots.isEmpty && histograms.isEmpty }

    /// Every bot it holds figures or histograms of.
    var botNames: Set<String> { Set(bots.keys).union(histograms.keys) }

    /// The same, each bot's figures in order and one entry a series (the last of a series read
    /// wins, as a later fold does): what a file holds may be in any order.
    func normalized() -> StateContent {
        var content = self
        for (bot, entries) in bots {
            let sorted = Self.inOrder(entries)
            content.bots[bot] = sorted.isEmpty ? nil : sorted
        }
        return content
    }

    /// Takes a fold's figures for `bot`: each entry replaces its series' (by metric and labels),
    /// the bot's other series keep theirs. A series the bot holds is replaced in place; new
    /// ones are merged in, in order.
    mutating func apply(_ entries: [CollectorState.Entry], for bot: String) {
        guard !entries.isEmpty else { return }
        var kept = bots.removeValue(forKey: bot) ?? []  // changed in place, not copied
        var new: [CollectorState.Entry] = []
        for entry in entries {
            let position = Self.position(of: entry, in: kept)
            if position < kept.count, Self.sameSeries(kept[position], entry) {
                kept[position] = entry
            } else {
                new.append(entry)
            }
        }
        bots[bot] = new.isEmpty ? kept : Self.merge(Self.inOrder(new), into: kept)
    }

    /// How many bytes bot `bot`'s figures would grow by in a snapshot if `entries` were applied
    /// (`StateSnapshotWriter.bytes`): new series, and the digits of those that change. Negative
    /// when they shrink.
    func growth(applying entries: [CollectorState.Entry], for bot: String) -> Int {
        guard !entries.isEmpty else { return 0 }
        let existing = bots[bot] ?? []
        // Each series once (a series twice in one fold is one entry): its largest, against what it takes now.
        var sizes: [SeriesName: (new: Int, old: Int)] = [:]
        for entry in entries {
            let bytes = StateSnapshotWriter.bytes(of: entry)
            if let known = sizes[SeriesName(entry)] {
                sizes[SeriesName(entry)] = (max(known.new, bytes), known.old)
                continue
            }
            let position = Self.position(of: entry, in: existing)
            let found = position < existing.count && Self.sameSeries(existing[position], entry)
            sizes[SeriesName(entry)] = (bytes, found ? StateSnapshotWriter.bytes(of: existing[position]) : 0)
        }
        let start = existing.isEmpty ? StateSnapshotWriter.bytes(ofBot: bot) : 0
        return sizes.values.reduce(start) { $0 + $1.new - $1.old }
    }

    /// What bot `bot`'s figures take in a snapshot (`StateSnapshotWriter.bytes`); 0 without any.
    func totalsBytes(of bot: String) -> Int {
        guard let entries = bots[bot], !entries.isEmpty else { return 0 }
        return entries.reduce(StateSnapshotWriter.bytes(ofBot: bot)) { $0 + StateSnapshotWriter.bytes(of: $1) }
    }

    /// What every bot's figures take in a snapshot.
    var totalsBytes: Int { bots.keys.reduce(0) { $0 + totalsBytes(of: $1) } }

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

    // MARK: - A bot's figures in order

    /// A series of a bot, by metric name and encoded labels.
    private struct SeriesName: Hashable {
        let metric: String
        let labels: String
        init(_ entry: CollectorState.Entry) {
            metric = entry.metric
            labels = entry.labels
        }
    }

    /// `entries` in order, one entry a series: the last one of each.
    private static func inOrder(_ entries: [CollectorState.Entry]) -> [CollectorState.Entry] {
        let sorted = entries.enumerated().sorted { a, b in
            inOrder(a.element, b.element) || (!inOrder(b.element, a.element) && a.offset < b.offset)
        }
        var result: [CollectorState.Entry] = []
        result.reserveCapacity(sorted.count)
        for (_, entry) in sorted {
            if let last = result.last, sameSeries(last, entry) { result[result.count - 1] = entry } else { result.append(entry) }
        }
        return result
    }

    /// `kept` and `new` (both in order, no series in both) merged, in order.
    private static func merge(_ new: [CollectorState.Entry], into kept: [CollectorState.Entry]) -> [CollectorState.Entry] {
        var result: [CollectorState.Entry] = []
        result.reserveCapacity(kept.count + new.count)
        var (i, j) = (0, 0)
        while i < kept.count || j < new.count {
            if j == new.count || (i < kept.count && inOrder(kept[i], new[j])) {
                result.append(kept[i])
                i += 1
            } else {
                result.append(new[j])
                j += 1
            }
        }
        return result
    }

    /// Where `entry`'s series is in `entries` (in order), or where it would go: the first entry
    /// not before it.
    private static func position(of entry: CollectorState.Entry, in entries: [CollectorState.Entry]) -> Int {
        var low = 0, high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if inOrder(entries[middle], entry) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private static func sameSeries(_ a: CollectorState.Entry, _ b: CollectorState.Entry) -> Bool {
        a.metric == b.metric && a.labels == b.labels
    }

    private static func inOrder(_ a: CollectorState.Entry, _ b: CollectorState.Entry) -> Bool {
        (a.metric, a.labels) < (b.metric, b.labels)
    }
}
