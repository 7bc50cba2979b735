/// Writes JSON into bytes as it goes, tracking commas, with `JSONOutput`'s strings and numbers:
/// the collector's documents (`/latest`, `/api/history`, its JSON log lines). A class, so nested
/// writing closures can share it. It streams rather than building a `JSON` value tree, which would
/// cost a String per field for every one of thousands of series.
package final class JSONWriter {
    package private(set) var bytes: [UInt8] = []
    private var needsComma = false

    /// - Parameter capacity: the bytes expected: a large document written into room reserved
    ///   ahead is not copied as it grows (each copy holds it twice for a moment).
    package init(capacity: Int = 4096) {
        bytes.reserveCapacity(capacity)
    }

    package func object(_ body: () -> Void) {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        body()
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    package func array<Elements: Sequence>(_ elements: Elements, _ body: (Elements.Element) -> Void) {
        separate()
        bytes.append(UInt8(ascii: "["))
        needsComma = false
        for element in elements { body(element) }
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// An element that is already JSON.
    package func raw(_ bytes: [UInt8]) {
        separate()
        self.bytes += bytes
        needsComma = true
    }

    package func key(_ name: String) {
        separate()
        string(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    package func field(_ name: String, _ value: String?) {
        key(name)
        if let value { string(value) } else { bytes.write("null") }
        needsComma = true
    }

    /// A measure, or null, as `writeJSONNumber` writes it.
    package func field(_ name: String, _ value: Double?) {
        key(name)
        number(value)
        needsComma = true
    }

    /// A value that may have been set to NaN or an infinity (a gauge's): those as Prometheus' HTTP
    /// API writes them, the strings `"NaN"`, `"+Inf"` and `"-Inf"`, so they do not read as null,
    /// which is for a value never set; else as `writeJSONNumber` writes it.
    package func field(_ name: String, sample value: Double?) {
        key(name)
        if let text = value?.nonFiniteText { string(text) } else { number(value) }
        needsComma = true
    }

    /// A count, nanoseconds or an id, with all its digits.
    package func field(_ name: String, _ value: some BinaryInteger) {
        key(name)
        number(value)
        needsComma = true
    }

    /// An array element: a measure or null ...
    package func value(_ value: Double?) {
        separate()
        number(value)
        needsComma = true
    }

    /// ... a whole number with all its digits, or null ...
    package func value<Integer: BinaryInteger>(_ value: Integer?) {
        separate()
        if let value { number(value) } else { bytes.write("null") }
        needsComma = true
    }

    /// ... or a string.
    package func value(_ value: String) {
        separate()
        string(value)
        needsComma = true
    }

    /// A number already written out as JSON reads it (`-3.5`, `10000.00`): an exact decimal.
    package func field(_ name: String, decimal text: String) {
        key(name)
        bytes.write(text)
        needsComma = true
    }

    /// An array element written out already, as `field(_:decimal:)`.
    package func value(decimal text: String) {
        separate()
        bytes.write(text)
        needsComma = true
    }

    package func field(_ name: String, _ value: Bool) {
        key(name)
        bytes.write(value ? "true" : "false")
        needsComma = true
    }

    private func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    private func string(_ value: String) {
        bytes.writeJSONString(value)
    }

    private func number(_ value: Double?) {
        bytes.writeJSONNumber(value)
    }

    private func number(_ value: some BinaryInteger) {
        bytes.writeJSONNumber(value)
    }
}
