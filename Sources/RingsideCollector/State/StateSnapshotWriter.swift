import RingsideAggregation
import RingsideJSON
import RingsideSystem

/// Writes a state snapshot (`StateFiles.Snapshot`, the JSON `JSONDecoder` reads back) to a file a
/// piece at a time, through one buffer of 64 KiB: a state of any size costs the saver no more
/// memory than that (`JSONEncoder` built the whole document in memory first, in blocks of its
/// size and more).
struct StateSnapshotWriter {
    private let descriptor: Int32
    private var buffer: [UInt8] = []
    /// Bytes written so far.
    private(set) var bytes = 0
    static let pieceBytes = 65_536

    init(descriptor: Int32) {
        self.descriptor = descriptor
        buffer.reserveCapacity(Self.pieceBytes + 4096)
    }

    /// Writes `content`, as of the journals before `generation`, and what is left in the buffer.
    mutating func write(_ content: StateContent, generation: UInt64) throws(Errno) {
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
        try writeByBot(content.histograms, key: { ($0.metric, $0.labels) }) { writer, entry throws(Errno) in
            writer.buffer.write(",\"histogram\":")
            try writer.write(entry.histogram)
            if let negative = entry.negative {
                // A signed histogram's values below zero (`HistogramEntry.negative`).
                writer.buffer.write(",\"negative\":")
                try writer.write(negative)
            }
        }
        buffer.write("},\"seen\":{")
        for (index, (bot, seconds)) in content.seen.enumerated() {
            if index > 0 { buffer.write(UInt8(ascii: ",")) }
            buffer.writeJSONString(bot)
            buffer.write(UInt8(ascii: ":"))
            buffer.writeJSONNumber(seconds)
            try flushIfFull()
        }
        buffer.write("}}")
        try flush()
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
                buffer.write("{\"metric\":")
                buffer.writeJSONString(metric)
                buffer.write(",\"labels\":")
                buffer.writeJSONString(labels)
                try fields(&self, entry)
                buffer.write(UInt8(ascii: "}"))
            }
            buffer.write(UInt8(ascii: "]"))
            try flushIfFull()
        }
    }

    /// A persisted histogram, as `PersistedHistogram`'s Codable keys name its fields.
    private mutating func write(_ histogram: PersistedHistogram) throws(Errno) {
        buffer.write("{\"buckets\":[")
        for (position, bucket) in histogram.buckets.enumerated() {
            if position > 0 { buffer.write(UInt8(ascii: ",")) }
            buffer.write(UInt8(ascii: "["))
            for (index, number) in bucket.enumerated() {
                if index > 0 { buffer.write(UInt8(ascii: ",")) }
                buffer.writeJSONNumber(number)
            }
            buffer.write(UInt8(ascii: "]"))
            try flushIfFull()
        }
        buffer.write("],\"count\":")
        buffer.writeJSONNumber(histogram.count)
        buffer.write(",\"sumLow\":")
        buffer.writeJSONNumber(histogram.sumLow)
        buffer.write(",\"sumHigh\":")
        buffer.writeJSONNumber(histogram.sumHigh)
        buffer.write(",\"min\":")
        buffer.writeJSONNumber(histogram.min)
        buffer.write(",\"max\":")
        buffer.writeJSONNumber(histogram.max)
        buffer.write(UInt8(ascii: "}"))
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
