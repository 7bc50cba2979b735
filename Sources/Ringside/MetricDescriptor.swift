import CRingside

/// What a metric's values are.
public enum MetricKind: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// Increments that add up to a total.
    case counter = 1
    /// A value that is set, and read as the last one set.
    case gauge = 2
    /// Observations whose distribution matters (latencies, sizes).
    case histogram = 3

    public var description: String {
        switch self {
        case .counter: return "counter"
        case .gauge: return "gauge"
        case .histogram: return "histogram"
        }
    }
}

/// The unit of a metric's values, as recorded (the collector converts to base units on export).
public enum MetricUnit: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case none = 0
    case nanoseconds = 1
    case microseconds = 2
    case milliseconds = 3
    case seconds = 4
    case bytes = 5

    /// The short symbol used in flags and JSON: `ns`, `us`, `ms`, `s`, `bytes`, `none`.
    public var description: String {
        switch self {
        case .none: return "none"
        case .nanoseconds: return "ns"
        case .microseconds: return "us"
        case .milliseconds: return "ms"
        case .seconds: return "s"
        case .bytes: return "bytes"
        }
    }

    /// The unit with this symbol (`ns`, `us`, `ms`, `s`, `bytes`, `none`), or nil.
    public init?(symbol: String) {
        guard let unit = Self.allCases.first(where: { $0.description == symbol }) else { return nil }
        self = unit
    }

    /// Nanoseconds in one unit, for time units; nil for the others.
    public var nanoseconds: UInt64? {
        switch self {
        case .nanoseconds: return 1
        case .microseconds: return 1_000
        case .milliseconds: return 1_000_000
        case .seconds: return 1_000_000_000
        case .none, .bytes: return nil
        }
    }
}

/// How the collector merges a gauge across the workers of a bot (processes writing it, each its
/// own file): declared at registration. A bot of one process has one value, whatever the policy.
public enum GaugeMerge: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// The value set last, by any worker, as across threads: a shared fact (a price, a limit).
    case last = 0
    /// The sum of the live workers' last values: a per-worker quantity (requests in flight).
    case sum = 1
    /// The largest of the live workers' last values.
    case max = 2
    /// The smallest of the live workers' last values.
    case min = 3
    /// A series per live worker, labelled `pid`.
    case perWorker = 4

    /// The policy's name in flags, JSON and messages: `last`, `sum`, `max`, `min`, `per_worker`.
    public var description: String {
        switch self {
        case .last: return "last"
        case .sum: return "sum"
        case .max: return "max"
        case .min: return "min"
        case .perWorker: return "per_worker"
        }
    }
}

/// One registry entry: a metric's identity and how to read its records.
public struct MetricDescriptor: Sendable, Equatable, Hashable {
    /// The metric's position in the registry; records name their metric by it.
    public let index: UInt32
    public let name: String
    public let kind: MetricKind
    public let unit: MetricUnit
    /// Label pairs, sorted by key.
    public var labels: [(key: String, value: String)] { Self.decodeLabels(encodedLabels) }
    /// The labels as stored: `key=value` pairs sorted by key, joined by newlines.
    public let encodedLabels: String
    public let help: String
    /// 1 in `sampleEvery` calls is written; a reader multiplies counts by it.
    public let sampleEvery: UInt32
    /// A gauge's merge across workers (`.last` for the other kinds).
    public let gaugeMerge: GaugeMerge
    /// A histogram of signed values: each value (records, gather and metric cells) is an `Int64`
    /// stored in offset binary (VALUES in ringside.h).
    public let isSigned: Bool
    /// A histogram's or counter's values are whole numbers of `10^scale` of its unit (0: whole units).
    public let scale: Int8

    package init(
        index: UInt32, name: String, kind: MetricKind, unit: MetricUnit,
        encodedLabels: String, help: String, sampleEvery: UInt32, gaugeMerge: GaugeMerge = .last,
        isSigned: Bool = false, scale: Int8 = 0
    ) {
        self.isSigned = isSigned
        self.scale = scale
        self.index = index
        self.name = name
        self.kind = kind
        self.unit = unit
        self.encodedLabels = encodedLabels
        self.help = help
        self.sampleEvery = sampleEvery
        self.gaugeMerge = gaugeMerge
    }

    /// The labels as a dictionary.
    public var labelDictionary: [String: String] {
        Dictionary(labels.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
    }
}

// MARK: - Validation, shared by the writer and the reader

extension MetricDescriptor {
    /// Why `name` is not a metric name (`[a-zA-Z_][a-zA-Z0-9_]*`, 1 to 104 bytes), or nil.
    package static func problem(withName name: String) -> String? {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty else { return "the name is empty" }
        guard bytes.count <= Int(RS_NAME_MAX) else {
            return "the name has \(bytes.count) bytes; at most \(RS_NAME_MAX) are allowed"
        }
        guard isIdentifier(bytes) else {
            return "the name must match [a-zA-Z_][a-zA-Z0-9_]* (letters, digits and '_', not starting with a digit)"
        }
        return nil
    }

    /// Encodes labels as stored (sorted `key=value` lines), or says what is wrong with them.
    package static func encode(labels: [String: String]) -> Result<String, LabelProblem> {
        var lines: [String] = []
        for (key, value) in labels.sorted(by: { $0.key < $1.key }) {
            guard isIdentifier(Array(key.utf8)) else {
                return .failure(LabelProblem("label key \"\(key)\" must match [a-zA-Z_][a-zA-Z0-9_]*"))
            }
            guard !key.hasPrefix("__") else {
                return .failure(LabelProblem("label key \"\(key)\" starts with \"__\", which Prometheus reserves"))
            }
            guard !value.utf8.contains(where: { $0 == 0 || $0 == 0x0A }) else {
                return .failure(LabelProblem("label \"\(key)\" has a newline or NUL in its value"))
            }
            lines.append(key + "=" + value)
        }
        let encoded = lines.joined(separator: "\n")
        guard encoded.utf8.count <= Int(RS_LABELS_MAX) else {
            return .failure(LabelProblem("the labels take \(encoded.utf8.count) bytes; at most \(RS_LABELS_MAX) are allowed"))
        }
        return .success(encoded)
    }

    /// Why stored labels are malformed, or nil. The reader's check of untrusted bytes: one pass
    /// over them, since a collector asks it of every series a bot registers (a million at once).
    static func problem(withEncodedLabels encoded: String) -> String? {
        let bytes = encoded.utf8
        guard !bytes.isEmpty else { return nil }
        var previousKey: Substring.UTF8View?
        var lineStart = bytes.startIndex
        while true {
            let lineEnd = bytes[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
            let line = bytes[lineStart..<lineEnd]
            guard let equals = line.firstIndex(of: UInt8(ascii: "=")) else { return "a label has no '='" }
            let key = line[..<equals]
            guard isIdentifier(key) else { return "a label key is not an identifier" }
            // Keys are identifiers, ASCII: their bytes sort as the strings do.
            if let previousKey, !previousKey.lexicographicallyPrecedes(key) { return "label keys are not sorted and unique" }
            previousKey = key
            if line.contains(0) { return "a label value has a NUL" }
            guard lineEnd < bytes.endIndex else { return nil }
            lineStart = bytes.index(after: lineEnd)
        }
    }

    static func decodeLabels(_ encoded: String) -> [(key: String, value: String)] {
        guard !encoded.isEmpty else { return [] }
        return encoded.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            let equals = line.firstIndex(of: "=") ?? line.endIndex
            let value = equals < line.endIndex ? line[line.index(after: equals)...] : ""
            return (String(line[..<equals]), String(value))
        }
    }

    private static func isIdentifier(_ bytes: some Collection<UInt8>) -> Bool {
        guard let first = bytes.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
        return bytes.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
        }
    }
}

/// Why a set of labels cannot be registered.
package struct LabelProblem: Error, Equatable, Sendable {
    package let reason: String
    init(_ reason: String) { self.reason = reason }
}

extension MetricDescriptor {
    /// The `scale` of a step of `resolution` (0.01: -2), or nil when it is not a power of ten
    /// from 1e-18 to 1e18 (VALUES in ringside.h).
    package static func scale(ofResolution resolution: Double) -> Int8? {
        (Int(RS_SCALE_MIN)...Int(RS_SCALE_MAX)).first { Double("1e\($0)") == resolution }.map { Int8($0) }
    }
}
