/// A first-in first-out queue on an array: `removeFirst` moves a head index, and the array
/// drops what is behind it once that is half of it (the standard library has no deque).
struct FIFO<Element> {
    private var items: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }
    var first: Element? { isEmpty ? nil : items[head] }
    /// Oldest first.
    var elements: ArraySlice<Element> { items[head...] }

    mutating func append(_ element: Element) { items.append(element) }

    @discardableResult
    mutating func removeFirst() -> Element {
        precondition(!isEmpty, "removeFirst on an empty FIFO")
        let element = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return element
    }
}
