import Ringside
import RingsideJSON
#if canImport(Glibc)
import Glibc
#endif

// Tables, sizes and one-decimal numbers: RingsideText; durations: `formatDuration`, with the
// duration grammar.

/// The bytes of a value, as lowercase hex without separators.
package func hexBytes<T>(of value: T) -> String {
    withUnsafeBytes(of: value) { raw in
        raw.map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
    }
}

// MARK: - Metrics and values

extension MetricDescriptor {
    /// The labels as a JSON object.
    package var labelsJSON: JSON { .object(labels.map { ($0.key, .string($0.value)) }) }

    /// "1/N" for sampled metrics, "all" for the others.
    package var samplingText: String { sampleEvery > 1 ? "1/\(sampleEvery)" : "all" }
}

extension MetricDescriptor {
    /// Its unit, with its values' resolution and sign where it has them: `none`, `none in 0.01, signed`.
    var valuesText: String {
        guard hasSteps else { return unit.description }
        return unit.description + (scale != 0 ? " in " + resolutionText : "") + (isSigned ? ", signed" : "")
    }
}
