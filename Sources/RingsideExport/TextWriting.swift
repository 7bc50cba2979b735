import RingsideJSON

/// A growable byte buffer that exporters append text to: each piece is one bounds check and one
/// copy. (`[UInt8].append(contentsOf:)` costs tens of nanoseconds a call, and a /metrics page of
/// 10,000 series makes over a million of them.) The only raw memory of the exporters lives here.
final class TextBuffer {
    private struct State {
        var storage: UnsafeMutablePointer<UInt8>
        var capacity: Int
        var count: Int
    }

    // The mutable state sits behind one `let` pointer: a class's `var`s are checked for exclusive
    // access at run time on every use, which cost a fifth of the time to render /metrics.
    private let state: UnsafeMutablePointer<State>

    init(capacity: Int = 4096) {
        let capacity = max(64, capacity)
        state = .allocate(capacity: 1)
        state.initialize(to: State(storage: .allocate(capacity: capacity), capacity: capacity, count: 0))
    }

    deinit {
        state.pointee.storage.deallocate()
        state.deallocate()
    }

    var count: Int { state.pointee.count }
    /// The bytes it holds, written or not.
    var capacity: Int { state.pointee.capacity }

    /// Forgets what was written, keeping the memory: a buffer reused for every page is not
    /// allocated and faulted in again (16 MB of fresh pages cost more than writing them).
    func removeAll() {
        state.pointee.count = 0
    }

    /// Room for at least `capacity` bytes in all.
    func reserveCapacity(_ capacity: Int) {
        if capacity > state.pointee.capacity { grow(to: capacity) }
    }

    /// A copy of what was written.
    var bytes: [UInt8] { Array(UnsafeBufferPointer(start: state.pointee.storage, count: state.pointee.count)) }

    /// What was written, valid while `body` runs and nothing is appended.
    func withBytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        try body(UnsafeBufferPointer(start: state.pointee.storage, count: state.pointee.count))
    }

    /// Room for `extra` more bytes; returns where they go.
    @inline(__always)
    private func reserve(_ extra: Int) -> UnsafeMutablePointer<UInt8> {
        if state.pointee.count + extra > state.pointee.capacity { grow(to: state.pointee.count + extra) }
        return state.pointee.storage + state.pointee.count
    }

    private func grow(to needed: Int) {
        var newCapacity = state.pointee.capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newStorage = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newStorage.update(from: state.pointee.storage, count: state.pointee.count)
        state.pointee.storage.deallocate()
        state.pointee.storage = newStorage
        state.pointee.capacity = newCapacity
    }

    func append(_ byte: UInt8) {
        reserve(1).pointee = byte
        state.pointee.count += 1
    }

    func append(_ other: UnsafeBufferPointer<UInt8>) {
        guard let source = other.baseAddress, other.count > 0 else { return }
        reserve(other.count).update(from: source, count: other.count)
        state.pointee.count += other.count
    }

    func append(bytes other: [UInt8]) {
        other.withUnsafeBufferPointer { append($0) }
    }

    func append(_ text: String) {
        var text = text
        text.withUTF8 { append($0) }
    }

    /// Decimal digits.
    func append(_ value: UInt64) {
        state.pointee.count += Self.writeDigits(value, to: reserve(20))
    }

    /// Writes `value`'s decimal digits at `destination` (room for 20); returns how many.
    private static func writeDigits(_ value: UInt64, to destination: UnsafeMutablePointer<UInt8>) -> Int {
        let digits = decimalDigits(value)
        var position = digits
        var remaining = value
        repeat {
            position -= 1
            destination[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: remaining % 10)
            remaining /= 10
        } while remaining > 0
        return digits
    }

    /// How many decimal digits `value` has: 1 to 20.
    static func decimalDigits(_ value: UInt64) -> Int {
        var digits = 1
        var bound: UInt64 = 10
        while value >= bound {
            digits += 1
            if digits == 20 { break }
            bound &*= 10
        }
        return digits
    }

    /// `name{labels,extra} `, the head of a sample line, with one room check; `labels` is never
    /// empty (every series has `ring`), `extra` may be.
    @inline(__always)
    func appendSampleHead(_ name: [UInt8], _ labels: UnsafeBufferPointer<UInt8>, _ extra: [UInt8]) {
        name.withUnsafeBufferPointer { name in
            extra.withUnsafeBufferPointer { extra in
                var cursor = reserve(name.count + labels.count + extra.count + 4)
                let start = cursor
                func copy(_ bytes: UnsafeBufferPointer<UInt8>) {
                    if let base = bytes.baseAddress { cursor.update(from: base, count: bytes.count) }
                    cursor += bytes.count
                }
                copy(name)
                cursor.pointee = UInt8(ascii: "{")
                cursor += 1
                copy(labels)
                if !extra.isEmpty {
                    cursor.pointee = UInt8(ascii: ",")
                    cursor += 1
                    copy(extra)
                }
                cursor[0] = UInt8(ascii: "}")
                cursor[1] = UInt8(ascii: " ")
                state.pointee.count += cursor + 2 - start
            }
        }
    }

    func append(_ value: Int) {
        if value < 0 { append(UInt8(ascii: "-")) }
        append(UInt64(value.magnitude))
    }

    /// Nanoseconds as exact decimal seconds: 1350 is `0.00000135`, 2000000000 is `2`.
    func appendSeconds(nanoseconds: UInt64) {
        let start = reserve(30)  // 20 digits, the point, 9 places
        var length = Self.writeDigits(nanoseconds / 1_000_000_000, to: start)
        var fraction = nanoseconds % 1_000_000_000
        if fraction > 0 {
            var places = 9
            while fraction % 10 == 0 {
                fraction /= 10
                places -= 1
            }
            start[length] = UInt8(ascii: ".")
            length += 1
            let zeros = places - Self.decimalDigits(fraction)
            (start + length).initialize(repeating: UInt8(ascii: "0"), count: zeros)
            length += zeros
            length += Self.writeDigits(fraction, to: start + length)
        }
        state.pointee.count += length
    }

    /// A measure in a time unit, in seconds: exactly when it is a whole number of the unit (sums
    /// of whole nanoseconds are), else as the nearest double.
    func appendSeconds(_ value: Double, nanosPerUnit: UInt64) {
        if value >= 0, value < 9e18 / Double(nanosPerUnit), value == value.rounded(.towardZero) {
            appendSeconds(nanoseconds: UInt64(value) * nanosPerUnit)
        } else {
            appendNumber(value * (Double(nanosPerUnit) / 1e9))
        }
    }

    /// A number as Prometheus reads it: non-finite values as it spells them (`+Inf`, `-Inf`,
    /// `NaN`), finite ones as JSON writes them (whole numbers without a fraction).
    func appendNumber(_ value: Double) {
        if let text = value.nonFiniteText { return append(text) }
        var output = self
        output.writeJSONNumber(value)
    }
}

/// The page buffer takes JSON text through RingsideJSON's writing functions.
extension TextBuffer: JSONOutput {
    func write(_ byte: UInt8) { append(byte) }
    func write(_ text: String) { append(text) }
}
