/// A first-in first-out queue on an array: `removeFirst` moves a head index (and lets go of the
/// element at once: its slot is emptied), and the array drops the empty slots behind the head
/// once they are half of it (the standard library has no deque).
struct FIFO<Element> {
    private var items: [Element?] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }
    var first: Element? { isEmpty ? nil : items[head] }
    /// Oldest first.
    var elements: [Element] { items[head...].map { $0! } }

    mutating func append(_ element: Element) { items.append(element) }

    @discardableResult
    mutating func removeFirst() -> Element {
        precondition(!isEmpty, "removeFirst on an empty FIFO")
        let element = items[head].take()!
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
