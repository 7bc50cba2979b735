/// A value held on the heap behind one reference, copied on write: for a part of a series'
/// record or figures that most series never set (exemplars, what gone workers left, drops), so
/// that they pay 8 bytes for it and not its size. Read and written through `value`.
package struct Indirect<Value> {
    private final class Box {
        var value: Value

        init(_ value: Value) { self.value = value }
    }

    private var box: Box

    package init(_ value: Value) { box = Box(value) }

    package var value: Value {
        get { box.value }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.value) }
            yield &box.value
        }
    }
}

/// Sendable as its value is: the box is written only by the one copy that holds it alone.
extension Indirect: @unchecked Sendable where Value: Sendable {}
