/// A command-line mistake: one line saying what is wrong. Every Ringside executable prints it
/// and exits with status 2.
public struct UsageError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The tokens of a command line, read one at a time, so that `--flag=value` and `--flag value`
/// read alike: the first comes out as `--flag`, then `value`.
public struct ArgumentStream {
    private var remaining: ArraySlice<String>

    public init(_ arguments: [String]) {
        remaining = arguments[...]
    }

    /// The next option or argument, or nil at the end.
    public mutating func next() -> String? {
        guard let argument = remaining.popFirst() else { return nil }
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return argument }
        remaining.insert(String(argument[argument.index(after: equals)...]), at: remaining.startIndex)
        return String(argument[..<equals])
    }

    /// The value that follows `flag`.
    /// - Throws: `UsageError` ("FLAG needs a value") at the end of the command line.
    public mutating func value(for flag: String) throws(UsageError) -> String {
        guard let next = remaining.popFirst() else { throw UsageError("\(flag) needs a value") }
        return next
    }
}
