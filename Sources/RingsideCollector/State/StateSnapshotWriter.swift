import RingsideAggregation
import RingsideJSON
import RingsideSystem

/// Writes a state snapshot (`StateFiles.Snapshot`, the JSON `JSONDecoder` reads back) to a file a
/// piece at a time, through one buffer of 64 KiB: a state of any size costs the saver no more
/// memory than that (`JSONEncoder` built the whole document in memory first, in blocks of its
/// size and more).
///
/// A snapshot never holds more than a collector reads (`--state-max-bytes`): every bot's figures
/// first, which the drain thread keeps within the bound (`StateRoom`), then the all-time
/// histograms that fit, those of the bots seen last first; the others are left out, and counted
/// (`Written.shed`).
struct StateSnapshotWriter {
    /// What a snapshot written left out.
    struct Written {
        /// Whether the bots' figures fit within the bound (nothing was written when they did not).
        var fits = true
        /// All-time histograms left out for room, and the bots they were of.
        var shed = 0
        var shedBots = 0
    }

    private let descriptor: Int32
    /// The most bytes the snapshot may take.
    private let limit: Int
    private var buffer: [UInt8] = []
    /// Bytes written so far.
    private(set) var bytes = 0
    /// What the snapshot written left out.
    private(set) var written = Written()
    static let pieceBytes = 65_536

    init(descriptor: Int32, limit: Int) {
        self.descriptor = descriptor
        self.limit = limit
        buffer.reserveCapacity(Self.pieceBytes + 4096)
    }

    // MARK: - Sizes

    /// What a snapshot holds around its bots, at most: `{"version":2,"generation":N,"bots":{`,
    /// `},"histograms":{`, `},"seen":{` and `}}`, N of 20 digits.
    static let frameBytes = 26 + 20 + 9 + 16 + 10 + 2

    /// What one series' figures take in a snapshot, as written, with the comma before it.
    static func bytes(of entry: CollectorState.Entry) -> Int {
        var scratch: [UInt8] = []
        writeTotal(entry, to: &scratch)
        return scratch.count + 1
    }

    /// What a bot with figures takes in a snapshot besides them, at most: its name and brackets
    /// among the bots (`"bot":[]`), and its date among those seen (`"bot":N`), each with the comma
    /// before it. A date is in Unix seconds, never later than now (`StateFiles.load` takes a later
    /// one as now): 11 digits until the year 5138.
    static func bytes(ofBot bot: String) -> Int {
        var scratch: [UInt8] = []
        scratch.writeJSONString(bot)
        return 2 * (scratch.count + 2) + 2 + dateDigits
    }

    /// The most digits of a date in `seen` (see `bytes(ofBot:)`).
    static let dateDigits = 11

    // MARK: - Writing

    /// Writes `content`, as of the journals before `generation`: the bots' figures, the all-time
    /// histograms that fit within the bound (those of `present` bots first, then by when each
    /// was last seen, latest first), and the dates of the bots written; then what is left in the
    /// buffer. Writes nothing when the bots' figures alone do not fit (`written.fits`).
    mutating func write(_ content: StateContent, generation: UInt64, present: Set<String>) throws(Errno) {
        guard Self.frameBytes + content.totalsBytes <= limit else {
            written.fits = false
            return
        }
        buffer.write("{\"version\":2,\"generation\":")
        buffer.writeJSONNumber(generation)
        buffer.write(",\"bots\":{")
        try writeByBot(content.bots, key: { ($0.metric, $0.labels) }) { writer, entry throws(Errno) in
            writer.buffer.write(",\"total\":")
            writer.buffer.writeJSONNumber(entry.total)
            writer.buffer.write(",\"dropped\":")
            writer.buffer.writeJSONNumber(entry.dropped)
        }
        buffer.write("},\"histograms\":{")
        var dated = Set(content.bots.keys)
        try writeHistograms(of: content, present: present, dated: &dated)
        buffer.write("},\"seen\":{")
        var first = true
        for (bot, seconds) in content.seen where dated.contains(bot) {
            if !first { buffer.write(UInt8(ascii: ",")) }
            first = false
            Self.writeSeen(bot, seconds, to: &buffer)
            try flushIfFull()
        }
        buffer.write("}}")
        try flush()
    }

    /// Writes the all-time histograms that fit (see `write`), and adds the bots written to `dated`.
    private mutating func writeHistograms(of content: StateContent, present: Set<String>, dated: inout Set<String>) throws(Errno) {
        // What stays to be written after the histograms: `},"seen":{`, the dates, `}}`.
        var after = 12 + dated.reduce(0) { $0 + Self.seenBytes($1, content.seen[$1]) }
        var firstBot = true
        for bot in Self.histogramOrder(content, present: present) {
            guard let entries = content.histograms[bot] else { continue }
            var opened = false
            var kept = 0
            for entry in entries {
                var scratch: [UInt8] = []
                Self.writeHistogramEntry(entry, to: &scratch)
                // A bot's first histogram opens its list (and dates it, if its figures did not).
                var cost = scratch.count + 1
                var dates = 0
                if !opened {
                    var name: [UInt8] = []
                    name.writeJSONString(bot)
                    cost += name.count + 4  // `,"bot":[` and `]`
                    if !dated.contains(bot) { dates = Self.seenBytes(bot, content.seen[bot]) }
                }
                guard bytes + buffer.count + cost + dates + after <= limit else {
                    written.shed += 1
                    continue
                }
                if !opened {
                    if !firstBot { buffer.write(UInt8(ascii: ",")) }
                    firstBot = false
                    buffer.writeJSONString(bot)
                    buffer.write(":[")
                    opened = true
                    if dates > 0 {
                        dated.insert(bot)
                        after += dates
                    }
                } else {
                    buffer.write(UInt8(ascii: ","))
                }
                buffer += scratch
                kept += 1
                try flushIfFull()
            }
            if opened { buffer.write(UInt8(ascii: "]")) }
            if kept < entries.count { written.shedBots += 1 }
        }
    }

    /// The bots with histograms, in the order their histograms are kept: bots with a file now,
    /// then by when each was last seen (latest first), then by name.
    static func histogramOrder(_ content: StateContent, present: Set<String>) -> [String] {
        content.histograms.keys.sorted { a, b in
            let (aHere, bHere) = (present.contains(a), present.contains(b))
            if aHere != bHere { return aHere }
            let (aSeen, bSeen) = (content.seen[a] ?? .max, content.seen[b] ?? .max)
            return aSeen != bSeen ? aSeen > bSeen : a < b
        }
    }

    /// `"bot":N` with the comma before it (N's digits as written; `dateDigits` for a bot with no
    /// date, whose date is not written).
    private static func seenBytes(_ bot: String, _ seconds: UInt64?) -> Int {
        var scratch: [UInt8] = []
        if let seconds { writeSeen(bot, seconds, to: &scratch) } else { scratch.writeJSONString(bot) }
        return scratch.count + 1 + (seconds == nil ? 1 + dateDigits : 0)
    }

    private static func writeSeen(_ bot: String, _ seconds: UInt64, to output: inout [UInt8]) {
        output.writeJSONString(bot)
        output.write(UInt8(ascii: ":"))
        output.writeJSONNumber(seconds)
    }

    private static func writeTotal(_ entry: CollectorState.Entry, to output: inout [UInt8]) {
        writeSeriesName(metric: entry.metric, labels: entry.labels, to: &output)
        output.write(",\"total\":")
        output.writeJSONNumber(entry.total)
        output.write(",\"dropped\":")
        output.writeJSONNumber(entry.dropped)
        output.write(UInt8(ascii: "}"))
    }

    private static func writeHistogramEntry(_ entry: CollectorState.HistogramEntry, to output: inout [UInt8]) {
        writeSeriesName(metric: entry.metric, labels: entry.labels, to: &output)
        output.write(",\"histogram\":")
        write(entry.histogram, to: &output)
        if let negative = entry.negative {
            // A signed histogram's values below zero (`HistogramEntry.negative`).
            output.write(",\"negative\":")
            write(negative, to: &output)
        }
        output.write(UInt8(ascii: "}"))
    }

    /// `{"metric":...,"labels":...`: an entry's start.
    private static func writeSeriesName(metric: String, labels: String, to output: inout [UInt8]) {
        output.write("{\"metric\":")
        output.writeJSONString(metric)
        output.write(",\"labels\":")
        output.writeJSONString(labels)
    }

    /// Writes `byBot` as the members of a JSON object: each bot's entries, an array of objects
    /// that begin with their metric and labels (`key`), then what `fields` writes.
    private mutating func writeByBot<Entry>(
        _ byBot: [String: [Entry]], key: (Entry) -> (metric: String, labels: String),
        fields: (inout StateSnapshotWriter, Entry) throws(Errno) -> Void
    ) throws(Errno) {
        for (index, (bot, entries)) in byBot.enumerated() {
            if index > 0 { buffer.write(UInt8(ascii: ",")) }
            buffer.writeJSONString(bot)
            buffer.write(":[")
            for (position, entry) in entries.enumerated() {
                if position > 0 { buffer.write(UInt8(ascii: ",")) }
                let (metric, labels) = key(entry)
                Self.writeSeriesName(metric: metric, labels: labels, to: &buffer)
                try fields(&self, entry)
                buffer.write(UInt8(ascii: "}"))
            }
            buffer.write(UInt8(ascii: "]"))
            try flushIfFull()
        }
    }

    /// A persisted histogram, as `PersistedHistogram`'s Codable keys name its fields.
    private static func write(_ histogram: PersistedHistogram, to output: inout [UInt8]) {
        output.write("{\"buckets\":[")
        for (position, bucket) in histogram.buckets.enumerated() {
            if position > 0 { output.write(UInt8(ascii: ",")) }
            output.write(UInt8(ascii: "["))
            for (index, number) in bucket.enumerated() {
                if index > 0 { output.write(UInt8(ascii: ",")) }
                output.writeJSONNumber(number)
            }
            output.write(UInt8(ascii: "]"))
        }
        output.write("],\"count\":")
        output.writeJSONNumber(histogram.count)
        output.write(",\"sumLow\":")
        output.writeJSONNumber(histogram.sumLow)
        output.write(",\"sumHigh\":")
        output.writeJSONNumber(histogram.sumHigh)
        output.write(",\"min\":")
        output.writeJSONNumber(histogram.min)
        output.write(",\"max\":")
        output.writeJSONNumber(histogram.max)
        output.write(UInt8(ascii: "}"))
    }

    private mutating func flushIfFull() throws(Errno) {
        if buffer.count >= Self.pieceBytes { try flush() }
    }

    private mutating func flush() throws(Errno) {
        try System.writeAll(descriptor, buffer)
        bytes += buffer.count
        buffer.removeAll(keepingCapacity: true)
    }
}
