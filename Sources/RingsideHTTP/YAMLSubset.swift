/// A value of a YAML document as `YAMLSubset` reads it, with the line it starts on (1-based),
/// so that whoever checks the value can name the line.
package indirect enum YAMLValue: Equatable, Sendable {
    /// A string as written: plain (`quoted` false) or in single or double quotes, unescaped.
    case scalar(String, quoted: Bool, line: Int)
    /// `~`, `null` or nothing after a key.
    case null(line: Int)
    /// Keys in the order written (no key twice).
    case mapping([YAMLEntry], line: Int)
    case sequence([YAMLValue], line: Int)

    package var line: Int {
        switch self {
        case .scalar(_, _, let line), .null(let line), .mapping(_, let line), .sequence(_, let line): line
        }
    }

    /// The items of a value written on one line (`[a, b]`, `{k: v}`: never nested), 0 for a scalar.
    var flowItems: Int {
        switch self {
        case .scalar, .null: 0
        case .mapping(let entries, _): entries.count
        case .sequence(let items, _): items.count
        }
    }
}

/// One key of a mapping and its value; `line` is the key's.
package struct YAMLEntry: Equatable, Sendable {
    package var key: String
    package var line: Int
    package var value: YAMLValue
}

/// Why a document is not in the subset `YAMLSubset` reads: the line and the reason.
package struct YAMLError: Error, Equatable, Sendable, CustomStringConvertible {
    package var line: Int
    package var reason: String

    package var description: String { "line \(line): \(reason)" }
}

/// A reader for the small part of YAML that configuration files such as exporter-toolkit's web
/// configuration use: block mappings and sequences by indentation, one-line flow sequences and
/// mappings of scalars (`[a, b]`, `{k: v}`), plain, single- and double-quoted scalars, comments,
/// and one document (`---` first is allowed).
///
/// Everything else is refused with its line and the reason, never guessed at: tabs in
/// indentation, block scalars (`|`, `>`), anchors, aliases and tags, several documents, a key
/// given twice (as strict YAML decoders refuse it). Scalars stay strings: types are the caller's
/// to check, with the line to name.
///
/// The text is outside input: its size is the caller's to bound (a file is read within one), and
/// the reader bounds the rest, refusing past them with the line: lists and mappings nested at
/// most `maxDepth` deep (the reader recurses once a level, so a file of nested `- - - ...` would
/// otherwise exhaust the thread's stack) and at most `maxValues` values in all.
package enum YAMLSubset {
    /// The deepest nesting read: a configuration file needs three or four levels.
    package static let maxDepth = 32
    /// The most values (scalars, lists, mappings) in one document.
    package static let maxValues = 100_000

    /// The document's value (`.null` for an empty document).
    package static func parse(_ text: String) throws(YAMLError) -> YAMLValue {
        var reader = try Reader(lines: try logicalLines(text))
        guard let first = reader.peek() else { return .null(line: 1) }
        let value = try reader.node(indent: first.indent)
        if let extra = reader.peek() {
            throw YAMLError(line: extra.number, reason: "unexpected indentation, or a second value at the top of the document")
        }
        return value
    }

    /// A line with content: its number, its indentation in spaces, and its text without the
    /// indentation and without a trailing comment.
    struct Line {
        var number: Int
        var indent: Int
        var text: Substring
    }

    /// The lines that hold content, after the document markers.
    private static func logicalLines(_ text: String) throws(YAMLError) -> [Line] {
        var lines: [Line] = []
        var sawContent = false
        var number = 0
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            number += 1
            var line = raw
            if line.last == "\r" { line = line.dropLast() }
            let indent = line.prefix { $0 == " " }.count
            let rest = line.dropFirst(indent)
            if rest.first == "\t" {
                throw YAMLError(line: number, reason: "a tab in the indentation; indent with spaces")
            }
            let content = try stripComment(rest, line: number)
            let trimmed = content.trimmingBlanks()
            if trimmed.isEmpty { continue }
            if indent == 0 && (trimmed == "---" || trimmed.hasPrefix("--- ")) {
                guard !sawContent else { throw YAMLError(line: number, reason: "a second document (---): the file holds one") }
                guard trimmed == "---" else { throw YAMLError(line: number, reason: "write the document on the lines after ---") }
                sawContent = true
                continue
            }
            if indent == 0 && trimmed == "..." { break }
            if trimmed.hasPrefix("%") { throw YAMLError(line: number, reason: "directives (%YAML, %TAG) are not supported") }
            sawContent = true
            lines.append(Line(number: number, indent: indent, text: trimmed))
        }
        return lines
    }

    /// `text` up to a `#` that starts a comment (at its start or after a blank, outside quotes).
    private static func stripComment(_ text: Substring, line: Int) throws(YAMLError) -> Substring {
        var quote: Character?
        var previous: Character = " "
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            if let open = quote {
                if open == "\"" && character == "\\" {
                    index = text.index(after: index)
                    if index < text.endIndex { index = text.index(after: index) }
                    previous = "x"
                    continue
                }
                if character == open { quote = nil }
            } else if character == "#" && (previous == " " || previous == "\t") {
                return text[..<index]
            } else if (character == "\"" || character == "'") && startsScalar(after: previous) {
                quote = character
            }
            previous = character
            index = text.index(after: index)
        }
        return text
    }

    /// Whether a quote after `previous` opens a quoted scalar (else it is part of a plain one, as in `it's`).
    private static func startsScalar(after previous: Character) -> Bool {
        " \t[{,:-".contains(previous)
    }

    /// Reads nodes from the lines, one at a time.
    private struct Reader {
        var lines: [Line]
        var next = 0
        /// The lists and mappings open around the node being read, and the values read so far.
        var depth = 0
        var values = 0

        init(lines: [Line]) throws(YAMLError) { self.lines = lines }

        func peek() -> Line? { next < lines.count ? lines[next] : nil }

        /// Counts a value read on `line`, refusing the document past `maxValues`.
        mutating func count(_ added: Int = 1, line: Int) throws(YAMLError) {
            values += added
            guard values <= YAMLSubset.maxValues else {
                throw YAMLError(line: line, reason: "more than \(YAMLSubset.maxValues) values: not a configuration file")
            }
        }

        /// Opens a list or mapping on `line`, refusing the document past `maxDepth`.
        mutating func enter(line: Int) throws(YAMLError) {
            guard depth < YAMLSubset.maxDepth else {
                throw YAMLError(line: line, reason: "nested more than \(YAMLSubset.maxDepth) lists or mappings deep")
            }
            depth += 1
        }

        /// The block node starting at the next line, which is indented `indent`.
        mutating func node(indent: Int) throws(YAMLError) -> YAMLValue {
            let line = lines[next]
            try count(line: line.number)
            if isSequenceItem(line.text) {
                try enter(line: line.number)
                defer { depth -= 1 }
                return try sequence(indent: indent)
            }
            if try YAMLSubset.mappingKey(line.text, line: line.number) != nil {
                try enter(line: line.number)
                defer { depth -= 1 }
                return try mapping(indent: indent)
            }
            next += 1
            let value = try YAMLSubset.inline(line.text, line: line.number)
            try count(value.flowItems, line: line.number)
            if let following = peek(), following.indent > indent {
                throw YAMLError(
                    line: following.number, reason: "a value spread over several lines is not supported; write it on one line, quoted")
            }
            return value
        }

        private func isSequenceItem(_ text: Substring) -> Bool {
            text == "-" || text.hasPrefix("- ")
        }

        private mutating func mapping(indent: Int) throws(YAMLError) -> YAMLValue {
            var entries: [YAMLEntry] = []
            let startLine = lines[next].number
            while let line = peek(), line.indent >= indent {
                guard line.indent == indent else {
                    throw YAMLError(line: line.number, reason: "unexpected indentation (the keys above are indented \(indent))")
                }
                if isSequenceItem(line.text) {
                    throw YAMLError(line: line.number, reason: "a list item (-) among the keys of a mapping")
                }
                guard let (key, rest) = try YAMLSubset.mappingKey(line.text, line: line.number) else {
                    throw YAMLError(line: line.number, reason: "expected KEY: VALUE")
                }
                if entries.contains(where: { $0.key == key }) {
                    throw YAMLError(line: line.number, reason: "key \"\(key)\" is given twice")
                }
                next += 1
                try count(line: line.number)
                let value: YAMLValue
                if !rest.isEmpty {
                    value = try YAMLSubset.inline(rest, line: line.number)
                    try count(value.flowItems, line: line.number)
                    if let following = peek(), following.indent > indent {
                        throw YAMLError(
                            line: following.number,
                            reason: "unexpected indentation: \"\(key)\" has its value on its own line already")
                    }
                } else if let following = peek(), following.indent > indent {
                    value = try node(indent: following.indent)
                } else if let following = peek(), following.indent == indent, isSequenceItem(following.text) {
                    // `key:` then `- item` at the key's indentation: a list of its own, counted as one.
                    try count(line: following.number)
                    try enter(line: following.number)
                    defer { depth -= 1 }
                    value = try sequence(indent: indent)
                } else {
                    value = .null(line: line.number)
                }
                entries.append(YAMLEntry(key: key, line: line.number, value: value))
            }
            return .mapping(entries, line: startLine)
        }

        private mutating func sequence(indent: Int) throws(YAMLError) -> YAMLValue {
            var items: [YAMLValue] = []
            let startLine = lines[next].number
            while let line = peek(), line.indent == indent, isSequenceItem(line.text) {
                let rest = line.text.dropFirst().trimmingBlanks()
                if rest.isEmpty {
                    next += 1
                    if let following = peek(), following.indent > indent {
                        items.append(try node(indent: following.indent))
                    } else {
                        try count(line: line.number)
                        items.append(.null(line: line.number))
                    }
                } else {
                    // The item's content as a line of its own, indented where it starts, so
                    // `- key: value` and the keys under it read as one mapping.
                    let offset = line.text.count - rest.count
                    lines[next] = Line(number: line.number, indent: indent + offset, text: rest)
                    items.append(try node(indent: indent + offset))
                }
            }
            if let line = peek(), line.indent > indent {
                throw YAMLError(line: line.number, reason: "unexpected indentation (the list items above are indented \(indent))")
            }
            return .sequence(items, line: startLine)
        }
    }

    /// The key of a `KEY: VALUE` line and the text after the colon, or nil when the line is no
    /// mapping entry (a colon followed by a blank or the line's end, outside quotes, marks one).
    fileprivate static func mappingKey(_ text: Substring, line: Int) throws(YAMLError) -> (String, Substring)? {
        if let first = text.first, first == "\"" || first == "'" {
            let (key, end) = try quoted(text, line: line)
            let after = text[end...]
            guard after.first == ":" else { return nil }
            let rest = after.dropFirst()
            guard rest.isEmpty || rest.first == " " else { return nil }
            return (key, rest.trimmingBlanks())
        }
        if let first = text.first, "[{".contains(first) { return nil }
        var index = text.startIndex
        while index < text.endIndex {
            if text[index] == ":" {
                let after = text.index(after: index)
                if after == text.endIndex || text[after] == " " {
                    let key = text[..<index].trimmingBlanks()
                    guard !key.isEmpty else { throw YAMLError(line: line, reason: "a key is missing before the colon") }
                    if key.hasPrefix("? ") || key == "?" { throw YAMLError(line: line, reason: "complex keys (?) are not supported") }
                    try checkPlain(key, line: line)
                    return (String(key), text[after...].trimmingBlanks())
                }
            }
            index = text.index(after: index)
        }
        return nil
    }

    /// A value written on one line: a scalar, `[...]` or `{...}`.
    fileprivate static func inline(_ text: Substring, line: Int) throws(YAMLError) -> YAMLValue {
        switch text.first {
        case "[":
            guard text.last == "]" else { throw YAMLError(line: line, reason: "a list [ ... ] must close on the same line") }
            var items: [YAMLValue] = []
            for part in try flowParts(text.dropFirst().dropLast(), line: line) {
                let item = try scalar(part, line: line)
                guard case .scalar = item else { throw YAMLError(line: line, reason: "null items in [ ... ] are not supported") }
                items.append(item)
            }
            return .sequence(items, line: line)
        case "{":
            guard text.last == "}" else { throw YAMLError(line: line, reason: "a mapping { ... } must close on the same line") }
            var entries: [YAMLEntry] = []
            for part in try flowParts(text.dropFirst().dropLast(), line: line) {
                guard let (key, rest) = try mappingKey(part, line: line) else {
                    throw YAMLError(line: line, reason: "expected KEY: VALUE in { ... }, got \"\(part)\"")
                }
                if entries.contains(where: { $0.key == key }) { throw YAMLError(line: line, reason: "key \"\(key)\" is given twice") }
                let value: YAMLValue = rest.isEmpty ? .null(line: line) : try scalar(rest, line: line)
                entries.append(YAMLEntry(key: key, line: line, value: value))
            }
            return .mapping(entries, line: line)
        default:
            return try scalar(text, line: line)
        }
    }

    /// The items of a flow collection's inside as written, split at the commas outside quotes
    /// (a trailing comma allowed).
    private static func flowParts(_ inside: Substring, line: Int) throws(YAMLError) -> [Substring] {
        var parts: [Substring] = []
        var rest = inside.trimmingBlanks()
        while !rest.isEmpty {
            let comma = try commaOutsideQuotes(rest, line: line)
            let part = rest[..<(comma ?? rest.endIndex)].trimmingBlanks()
            if part.isEmpty { throw YAMLError(line: line, reason: "an empty item in [ ... ] or { ... }") }
            if let first = part.first, "[{".contains(first) {
                throw YAMLError(line: line, reason: "nested [ ... ] and { ... } are not supported")
            }
            parts.append(part)
            guard let comma else { break }
            rest = rest[rest.index(after: comma)...].trimmingBlanks()
        }
        return parts
    }

    private static func commaOutsideQuotes(_ text: Substring, line: Int) throws(YAMLError) -> Substring.Index? {
        var index = text.startIndex
        var previous: Character = " "
        while index < text.endIndex {
            let character = text[index]
            if (character == "\"" || character == "'") && startsScalar(after: previous) {
                let (_, end) = try quoted(text[index...], line: line)
                index = end
                previous = character
                continue
            }
            if character == "," { return index }
            previous = character
            index = text.index(after: index)
        }
        return nil
    }

    /// A scalar on one line: quoted, plain, or null.
    private static func scalar(_ text: Substring, line: Int) throws(YAMLError) -> YAMLValue {
        if let first = text.first, first == "\"" || first == "'" {
            let (value, end) = try quoted(text, line: line)
            guard text[end...].trimmingBlanks().isEmpty else {
                throw YAMLError(line: line, reason: "text after the closing quote")
            }
            return .scalar(value, quoted: true, line: line)
        }
        if ["~", "null", "Null", "NULL"].contains(text) { return .null(line: line) }
        try checkPlain(text, line: line)
        if text.contains(": ") {
            throw YAMLError(line: line, reason: "a value holds \": \"; quote it if it is one string")
        }
        return .scalar(String(text), quoted: false, line: line)
    }

    /// Refuses the indicators a plain scalar may not start with, naming what they are.
    private static func checkPlain(_ text: Substring, line: Int) throws(YAMLError) {
        guard let first = text.first else { return }
        switch first {
        case "|", ">": throw YAMLError(line: line, reason: "block scalars (| and >) are not supported; write the value on one line")
        case "&": throw YAMLError(line: line, reason: "anchors (&) are not supported")
        case "*": throw YAMLError(line: line, reason: "aliases (*) are not supported")
        case "!": throw YAMLError(line: line, reason: "tags (!) are not supported")
        case "@", "`": throw YAMLError(line: line, reason: "a plain value cannot start with \(first); quote it")
        case "]", "}": throw YAMLError(line: line, reason: "\(first) without its opening bracket")
        default: return
        }
    }

    /// The quoted scalar at the start of `text`, unescaped, and the index after its closing quote.
    private static func quoted(_ text: Substring, line: Int) throws(YAMLError) -> (String, Substring.Index) {
        let quote = text.first!
        var value = ""
        var index = text.index(after: text.startIndex)
        while index < text.endIndex {
            let character = text[index]
            index = text.index(after: index)
            if character == quote {
                // '' inside single quotes is one quote.
                if quote == "'" && index < text.endIndex && text[index] == "'" {
                    value.append("'")
                    index = text.index(after: index)
                    continue
                }
                return (value, index)
            }
            if quote == "\"" && character == "\\" {
                guard index < text.endIndex else { break }
                let escape = text[index]
                index = text.index(after: index)
                switch escape {
                case "\\", "\"", "/": value.append(escape)
                case "n": value.append("\n")
                case "t": value.append("\t")
                case "r": value.append("\r")
                case "0": value.append("\0")
                case " ": value.append(" ")
                case "x", "u", "U":
                    let digits = escape == "x" ? 2 : escape == "u" ? 4 : 8
                    let end = text.index(index, offsetBy: digits, limitedBy: text.endIndex) ?? text.endIndex
                    guard text.distance(from: index, to: end) == digits, let code = UInt32(text[index..<end], radix: 16),
                        let scalar = Unicode.Scalar(code)
                    else { throw YAMLError(line: line, reason: "bad \\\(escape) escape in a double-quoted value") }
                    value.unicodeScalars.append(scalar)
                    index = end
                default:
                    throw YAMLError(line: line, reason: "unknown escape \\\(escape) in a double-quoted value")
                }
                continue
            }
            value.append(character)
        }
        throw YAMLError(line: line, reason: "a quoted value without its closing \(quote) (quoted values must end on their line)")
    }
}

extension Substring {
    /// Without the blanks (spaces, tabs) at either end.
    fileprivate func trimmingBlanks() -> Substring {
        let start = firstIndex { $0 != " " && $0 != "\t" } ?? endIndex
        let end = lastIndex { $0 != " " && $0 != "\t" }.map { index(after: $0) } ?? start
        return start < end ? self[start..<end] : self[start..<start]
    }
}
