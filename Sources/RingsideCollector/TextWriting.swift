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

    /// A copy of what was written.
    var bytes: [UInt8] { Array(UnsafeBufferPointer(start: state.pointee.storage, count: state.pointee.count)) }

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
        var digits = 1
        var rest = value / 10
        while rest > 0 { digits += 1; rest /= 10 }
        let start = reserve(digits)
        var position = digits - 1
        var remaining = value
        repeat {
            start[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: remaining % 10)
            remaining /= 10
            position -= 1
        } while remaining > 0
        state.pointee.count += digits
    }

    func append(_ value: Int) {
        if value < 0 { append(UInt8(ascii: "-")) }
        append(UInt64(value.magnitude))
    }

    /// Nanoseconds as exact decimal seconds: 1350 is `0.00000135`, 2000000000 is `2`.
    func appendSeconds(nanoseconds: UInt64) {
        append(nanoseconds / 1_000_000_000)
        var fraction = nanoseconds % 1_000_000_000
        guard fraction > 0 else { return }
        var digits = 9
        while fraction % 10 == 0 { fraction /= 10; digits -= 1 }
        append(UInt8(ascii: "."))
        var width = 1
        var rest = fraction / 10
        while rest > 0 { width += 1; rest /= 10 }
        for _ in width..<digits { append(UInt8(ascii: "0")) }
        append(fraction)
    }

    /// A number as Prometheus and JSON both read it; integers print without a fraction.
    /// Non-finite values print as Prometheus spells them (`+Inf`, `-Inf`, `NaN`).
    func appendNumber(_ value: Double) {
        if value.isNaN { return append("NaN") }
        if value.isInfinite { return append(value > 0 ? "+Inf" : "-Inf") }
        if value == value.rounded(), abs(value) < 1e15 {
            return append(Int(value))
        }
        append(value.description)
    }
}
