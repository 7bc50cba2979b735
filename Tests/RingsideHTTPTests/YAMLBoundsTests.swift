@testable import RingsideHTTP
import Testing

@Suite("YAMLSubset's bounds: nesting and values past them refused with the line, never a crash")
struct YAMLBoundsTests {
    /// The attack's file: a list nested 25,000 deep on one line (50 KB), which exhausted the
    /// reader's stack (SIGSEGV) before the depth bound.
    @Test("25,000 nested list items on one line are refused at the bound's depth, with the line")
    func deepListOnOneLine() {
        let text = "slo:\n  " + String(repeating: "- ", count: 25_000) + "x\n"
        expectRefused(text, line: 2, reason: "nested more than \(32)")
    }

    @Test("lists nested one a line, each indented further, are refused at the first line past the bound")
    func deepListByIndentation() {
        let text = (0..<200).map { String(repeating: " ", count: $0) + "-" }.joined(separator: "\n") + "\n"
        expectRefused(text, line: YAMLSubset.maxDepth + 1, reason: "nested more than")
    }

    @Test("mappings nested by indentation are bounded as lists are")
    func deepMappings() {
        let text = (0..<100).map { String(repeating: " ", count: $0) + "k\($0):" }.joined(separator: "\n") + "\n"
        expectRefused(text, line: YAMLSubset.maxDepth + 1, reason: "nested more than")
    }

    @Test("nesting up to the bound is read")
    func nestingAtTheBound() throws {
        let text = (0..<32).map { String(repeating: " ", count: $0) + "-" }.joined(separator: "\n") + " x\n"
        var value = try YAMLSubset.parse(text)
        var depth = 0
        while case .sequence(let items, _) = value, let first = items.first {
            depth += 1
            value = first
        }
        #expect(depth == 32)
        #expect(value == .scalar("x", quoted: false, line: 32))
    }

    @Test("more values than the bound, in a block list or in flow lists, are refused with the line that passes it")
    func tooManyValues() {
        let block = "a:\n" + String(repeating: "- x\n", count: YAMLSubset.maxValues + 10)
        // The document's mapping, "a" and its list are three values: the list's items pass the bound at the item that is value maxValues + 1.
        expectRefused(block, line: YAMLSubset.maxValues - 1, reason: "more than \(YAMLSubset.maxValues) values")
        let flow = (0..<(YAMLSubset.maxValues / 100 + 1)).map { "k\($0): [" + String(repeating: "1,", count: 100) + "]" }
            .joined(separator: "\n")
        #expect(throws: YAMLError.self) { _ = try YAMLSubset.parse(flow) }
    }

    private func expectRefused(_ text: String, line: Int, reason: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(sourceLocation: sourceLocation) {
            _ = try YAMLSubset.parse(text)
        } throws: { error in
            guard let error = error as? YAMLError else { return false }
            return error.line == line && error.reason.contains(reason)
        }
    }
}
