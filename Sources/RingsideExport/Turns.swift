import Dispatch

/// Work cut into numbered parts, done a few threads at a time.
enum Turns {
    /// Runs `body` for each of 0 ..< `count`, `threads` parts at once (on the caller's thread alone
    /// when 1), a batch finishing before the next begins: the parts of a batch may share what
    /// `threads` buffers hold, one each (`index % threads`).
    static func run(_ count: Int, threads: Int, _ body: @Sendable (Int) -> Void) {
        if threads <= 1 || count <= 1 {
            for index in 0..<count { body(index) }
            return
        }
        var start = 0
        while start < count {
            let first = start, batch = min(threads, count - start)
            DispatchQueue.concurrentPerform(iterations: batch) { body(first + $0) }
            start += batch
        }
    }
}
