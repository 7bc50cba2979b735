import CRingside

/// Decodes a registry entry's bytes into a `MetricDescriptor`, checking every field of
/// an entry read from a file: nothing there is trusted.
extension MetricDescriptor {
    /// Decodes entry `index`, or says what is wrong with it.
    init(entry: rs_registry_entry, index: Int) throws(RingCorruption) {
        func bad(_ reason: String) -> RingCorruption { .badRegistryEntry(index: index, reason: reason) }
        guard entry.index == UInt32(index) else { throw bad("its index field says \(entry.index)") }
        guard let kind = MetricKind(rawValue: entry.kind) else { throw bad("unknown kind \(entry.kind)") }
        guard let unit = MetricUnit(rawValue: entry.unit) else { throw bad("unknown unit \(entry.unit)") }
        guard entry.sample_every >= 1 else { throw bad("sample_every is 0") }
        guard let gaugeMerge = GaugeMerge(rawValue: entry.gauge_merge), kind == .gauge || gaugeMerge == .last else {
            throw bad("gauge merge policy \(entry.gauge_merge) on a \(kind)")
        }
        guard entry.form <= UInt8(RS_FORM_SIGNED.rawValue) else { throw bad("unknown value form \(entry.form)") }
        let isSigned = entry.form == UInt8(RS_FORM_SIGNED.rawValue)
        guard !isSigned || kind == .histogram else { throw bad("signed values on a \(kind)") }
        guard (Int8(RS_SCALE_MIN)...Int8(RS_SCALE_MAX)).contains(entry.scale), kind != .gauge || entry.scale == 0 else {
            throw bad("scale \(entry.scale) on a \(kind)")
        }
        var copy = entry
        let name = try Self.string(&copy.name, length: entry.name_length, field: "name", index: index)
        let labels = try Self.string(&copy.labels, length: entry.labels_length, field: "labels", index: index)
        let help = try Self.string(&copy.help, length: entry.help_length, field: "help", index: index)
        if let problem = Self.problem(withName: name) { throw bad(problem) }
        if let problem = Self.problem(withEncodedLabels: labels) { throw bad(problem) }
        guard !help.utf8.contains(0) else { throw bad("the help text has a NUL") }
        self.init(
            index: UInt32(index), name: name, kind: kind, unit: unit, encodedLabels: labels,
            help: help, sampleEvery: entry.sample_every, gaugeMerge: gaugeMerge, isSigned: isSigned, scale: entry.scale)
    }

    /// Reads `length` bytes of a fixed-size C array as UTF-8, refusing lengths past its end.
    private static func string<Storage>(
        _ storage: inout Storage, length: UInt16, field: String,
        index: Int
    ) throws(RingCorruption) -> String {
        let bytes = withUnsafeBytes(of: &storage) { Array($0) }
        guard Int(length) <= bytes.count else {
            throw .badRegistryEntry(index: index, reason: "\(field) length \(length) exceeds its \(bytes.count) bytes")
        }
        guard let text = String(validating: bytes[..<Int(length)], as: UTF8.self) else {
            throw .badRegistryEntry(index: index, reason: "\(field) is not valid UTF-8")
        }
        return text
    }
}
