import CRingside

extension Bot {
    /// An exemplar: a short set of labels that names what a record measured (an order id, a
    /// trace id), kept by the collector beside the slowest values, exported as exemplars
    /// (OpenMetrics, protobuf) and shown on its live page. Its bytes (`key=value` pairs joined by newlines) live inline, so recording one
    /// allocates nothing; they are checked when it is made.
    ///
    /// ```swift
    /// fill.record(elapsed, exemplar: try Bot.Exemplar(["order_id": order.id]))
    /// ```
    public struct Exemplar: Sendable, Equatable, CustomStringConvertible {
        /// The most bytes an exemplar takes, `key=value` pairs and the newlines between them
        /// included (`RS_EXEMPLAR_MAX`).
        public static let maxBytes = Int(RS_EXEMPLAR_MAX)

        @usableFromInline var bytes: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
        @usableFromInline let length: Int

        /// An exemplar of the labels given, in their order: keys are names
        /// (`[a-zA-Z_][a-zA-Z0-9_]*`), each once; values have no newline or NUL.
        /// - Throws: `RingError.invalidExemplar` when they are malformed or take more than
        ///   ``maxBytes`` bytes: an exemplar is never cut.
        public init(_ labels: KeyValuePairs<String, String>) throws(RingError) {
            var encoded = ""
            for (key, value) in labels {
                if !encoded.isEmpty { encoded += "\n" }
                encoded += key + "=" + value
            }
            try self.init(encoded: encoded)
        }

        /// An exemplar of one label: `Bot.Exemplar("order_id", order.id)`.
        public init(_ key: String, _ value: String) throws(RingError) {
            try self.init(encoded: key + "=" + value)
        }

        /// An exemplar already in the format's form: `key=value` pairs joined by newlines.
        public init(encoded: String) throws(RingError) {
            var text = encoded
            let utf8Count = text.utf8.count
            guard utf8Count <= Self.maxBytes else {
                throw .invalidExemplar(reason: "\(utf8Count) bytes, over the \(Self.maxBytes) an exemplar may take: \(encoded.prefix(80))")
            }
            var error = rs_error()
            var stored: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
            let code = text.withUTF8 { utf8 in
                withUnsafeMutableBytes(of: &stored) { destination in
                    destination.copyMemory(from: UnsafeRawBufferPointer(utf8))
                }
                return utf8.withMemoryRebound(to: CChar.self) { rs_exemplar_check($0.baseAddress, $0.count, &error) }
            }
            guard code == 0 else {
                throw .invalidExemplar(
                    reason: withUnsafeBytes(of: error.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) })
            }
            bytes = stored
            length = utf8Count
        }

        /// The `key=value` pairs, joined by newlines.
        public var encoded: String {
            withUnsafeBytes(of: bytes) { String(decoding: $0.prefix(length), as: UTF8.self) }
        }

        public var description: String { encoded.split(separator: "\n").joined(separator: ",") }

        public static func == (a: Exemplar, b: Exemplar) -> Bool { a.encoded == b.encoded }
    }
}

extension Bot.Histogram {
    /// Records one observation, in the histogram's unit, with an exemplar that names it: the
    /// collector keeps it if the value is among the slowest, and exports it. As cheap as two
    /// records at most (the exemplar's bytes take one more slot per 16); never blocks or throws.
    @inlinable
    public func record(_ value: UInt64, exemplar: Bot.Exemplar) {
        // A signed histogram's values carry no exemplars: the value is recorded (in its unit, as
        // `record(_:)` takes it) and the exemplar counted refused, as every producer does.
        guard target.metric.kind != RS_METRIC_SIGNED_HISTOGRAM else {
            rs_bot_count_refused_exemplar(target.bot, target.metric.index)
            return record(Double(value))
        }
        withUnsafeBytes(of: exemplar.bytes) { bytes in
            // Checked when it was made: not again here.
            _ = rs_bot_record_checked_exemplar(
                target.bot, target.metric, value, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), exemplar.length)
        }
    }

    /// Records a duration (see `record(_: Duration)`) with an exemplar.
    @inlinable
    public func record(_ duration: Duration, exemplar: Bot.Exemplar) {
        record(duration.units(ofNanoseconds: UInt64(target.metric.ns_per_unit)), exemplar: exemplar)
    }
}
