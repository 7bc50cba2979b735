#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// Where a command writes: the process's standard output and error in the tools, strings in
/// the tests. Output is buffered and written in large pieces; `flush()` hands it over at once
/// (`watch` and `emit` flush as they go).
package final class Console {
    /// Which stream a piece of text goes to.
    package enum Stream: Sendable { case output, error }

    /// Whether standard output is a terminal: `watch` then redraws the screen in place.
    package let isTerminal: Bool
    private let sink: (Stream, String) -> Void
    private var pending = ""

    /// A console that hands its text to `sink`.
    package init(isTerminal: Bool = false, sink: @escaping (Stream, String) -> Void) {
        self.isTerminal = isTerminal
        self.sink = sink
    }

    deinit { flush() }

    /// The process's standard output and error.
    package static func standard() -> Console {
        Console(isTerminal: System.isatty(STDOUT_FILENO)) { stream, text in
            // A closed pipe: nothing more can be said.
            try? System.writeAll(stream == .output ? STDOUT_FILENO : STDERR_FILENO, text)
        }
    }

    /// Writes a line to standard output (buffered).
    package func print(_ line: String = "") {
        pending += line
        pending += "\n"
        if pending.utf8.count >= 1 << 16 { flush() }
    }

    /// Writes text to standard output without adding a newline (buffered).
    package func write(_ text: String) {
        pending += text
    }

    /// Writes a line to standard error, after what standard output holds so far.
    package func printError(_ line: String) {
        flush()
        sink(.error, line + "\n")
    }

    /// Hands buffered standard output to the sink.
    package func flush() {
        guard !pending.isEmpty else { return }
        sink(.output, pending)
        pending = ""
    }

    /// Runs a tool against a console that captures its output: what the tests call.
    package static func capture(
        isTerminal: Bool = false,
        _ body: (Console) -> Int32
    ) -> (status: Int32, output: String, errors: String) {
        var output = "", errors = ""
        let status: Int32
        do {
            let console = Console(isTerminal: isTerminal) { stream, text in
                if stream == .output { output += text } else { errors += text }
            }
            status = body(console)
            console.flush()
        }
        return (status, output, errors)
    }
}

/// Where `ringside-emit` reads values when none are given: lines as they arrive.
package struct LineInput {
    private let next: () -> String?

    /// Lines from `next` until it returns nil.
    package init(_ next: @escaping () -> String?) { self.next = next }

    /// Lines from the given strings (for tests).
    package init(lines: [String]) {
        var iterator = lines.makeIterator()
        next = { iterator.next() }
    }

    /// Standard input, a line at a time as each arrives (a pipe from `tail -f` works).
    package static var standardInput: LineInput { LineInput { Swift.readLine(strippingNewline: true) } }

    /// The next line, or nil at end of file.
    package func readLine() -> String? { next() }
}

/// The exit statuses of both tools.
package enum ExitStatus {
    /// Done, and nothing wrong was found.
    package static let success: Int32 = 0
    /// A ring error, or problems found (`check`), or bad input lines (`emit`).
    package static let failure: Int32 = 1
    /// The command line is wrong.
    package static let usage: Int32 = 2
}
