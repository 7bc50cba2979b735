/// A growable byte buffer that exporters append text to: each piece is one bounds check and one
/// copy. (`[UInt8].append(contentsOf:)` costs tens of nanoseconds a call, and a /metrics page of
/// 10,000 series makes over a million of them.) The only raw memory of the exporters lives here.
final class TextBuffer {
    private var storage: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int = 4096) {
        self.capacity = max(64, capacity)
        storage = .allocate(capacity: self.capacity)
    }

    deinit {
        storage.deallocate()
    }

    /// A copy of what was written.
    var bytes: [UInt8] { Array(UnsafeBufferPointer(start: storage, count: count)) }

    @inline(__always)
    private func reserve(_ extra: Int) {
        if count + extra > capacity { grow(to: count + extra) }
    }

    private func grow(to needed: Int) {
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newStorage = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newStorage.update(from: storage, count: count)
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
    }

    func append(_ byte: UInt8) {
        reserve(1)
        storage[count] = byte
        count += 1
    }

    func append(_ other: UnsafeBufferPointer<UInt8>) {
        guard let source = other.baseAddress, other.count > 0 else { return }
        reserve(other.count)
        (storage + count).update(from: source, count: other.count)
        count += other.count
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
        reserve(20)
        var digits = 1
        var rest = value / 10
        while rest > 0 { digits += 1; rest /= 10 }
        var position = count + digits - 1
        var remaining = value
        repeat {
            storage[position] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: remaining % 10)
            remaining /= 10
            position -= 1
        } while remaining > 0
        count += digits
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
