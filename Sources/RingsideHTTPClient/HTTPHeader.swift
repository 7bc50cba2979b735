/// One header line, name and value as the peer wrote them (the value without surrounding blanks).
package struct HTTPHeader: Sendable, Equatable {
    package var name: String
    package var value: String

    package init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// ASCII-only case folding: header names are ASCII, and this avoids Unicode-aware lowercasing
/// on every lookup.
package func asciiCaseInsensitiveEqual(_ a: String, _ b: String) -> Bool {
    let a = a.utf8, b = b.utf8
    guard a.count == b.count else { return false }
    return zip(a, b).allSatisfy { x, y in x == y || (x | 0x20 == y | 0x20 && (x | 0x20) >= 0x61 && (x | 0x20) <= 0x7A) }
}
