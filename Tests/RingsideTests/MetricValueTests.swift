import CRingside
import Ringside
import Testing

/// What a stored value means (VALUES in ringside.h), decided once in `MetricDescriptor.value(ofStored:)`
/// for every reader: the tools, the trace, the collector's history and exporters.
@Suite("A stored value's meaning, decided in one place")
struct MetricValueTests {
    static func metric(_ kind: MetricKind, signed: Bool = false, scale: Int8 = 0, unit: MetricUnit = .none) -> MetricDescriptor {
        MetricDescriptor(
            index: 0, name: "m", kind: kind, unit: unit, encodedLabels: "", help: "", sampleEvery: 1, isSigned: signed, scale: scale)
    }

    /// A signed value as the producer stores it (`ringside_producer.h`: `(uint64_t)steps ^ RS_OFFSET_BINARY_BIAS`).
    static func stored(_ steps: Int64) -> UInt64 { UInt64(bitPattern: steps) ^ RS_OFFSET_BINARY_BIAS }

    @Test("a plain counter's or histogram's value is the unsigned number itself, 0 and the largest too")
    func plain() {
        for kind in [MetricKind.counter, .histogram] {
            let metric = Self.metric(kind)
            #expect(!metric.hasSteps)
            #expect(metric.value(ofStored: 0) == .unsigned(0))
            #expect(metric.value(ofStored: UInt64.max) == .unsigned(UInt64.max))
            #expect(metric.value(ofStored: UInt64.max).text == "18446744073709551615")
            #expect(metric.steps(ofStored: 1 << 63) == 1 << 63)
        }
    }

    @Test(
        "a signed histogram's value is offset binary: the middle is 0, 0 the least Int64, the largest the greatest; below the middle negative"
    )
    func signed() {
        let metric = Self.metric(.histogram, signed: true)
        #expect(metric.hasSteps)
        #expect(metric.value(ofStored: RS_OFFSET_BINARY_BIAS) == .steps(0, scale: 0))
        #expect(metric.value(ofStored: 0) == .steps(Int128(Int64.min), scale: 0))
        #expect(metric.value(ofStored: UInt64.max) == .steps(Int128(Int64.max), scale: 0))
        #expect(metric.value(ofStored: Self.stored(-5)).text == "-5")
        #expect(metric.value(ofStored: Self.stored(5)).text == "5")
        #expect(metric.value(ofStored: 0).text == "-9223372036854775808")
        #expect(metric.value(ofStored: RS_OFFSET_BINARY_BIAS - 1) == .steps(-1, scale: 0))
    }

    @Test("a signed, scaled histogram's value is negative steps of 10^scale, written exactly")
    func signedScaled() {
        let metric = Self.metric(.histogram, signed: true, scale: -2)
        #expect(metric.value(ofStored: Self.stored(-350)) == .steps(-350, scale: -2))
        #expect(metric.value(ofStored: Self.stored(-350)).text == "-3.5")
        #expect(metric.value(ofStored: Self.stored(-1)).text == "-0.01")
        #expect(metric.value(ofStored: RS_OFFSET_BINARY_BIAS).text == "0")
        #expect(metric.value(ofStored: 0).text == "-92233720368547758.08")
        #expect(metric.value(ofStored: UInt64.max).text == "92233720368547758.07")
        #expect(metric.value(ofStored: Self.stored(-350)).text(unit: MetricUnit.none) == "-3.5")
    }

    @Test("an unsigned scaled counter's or histogram's value is whole steps of 10^scale: below one, above one, 0, the largest")
    func scaled() {
        let micros = Self.metric(.counter, scale: -6)
        #expect(micros.hasSteps)
        #expect(micros.value(ofStored: 1350) == .steps(1350, scale: -6))
        #expect(micros.value(ofStored: 1350).text == "0.00135")
        #expect(micros.value(ofStored: 0).text == "0")
        #expect(micros.value(ofStored: UInt64.max).text == "18446744073709.551615")
        #expect(micros.steps(ofStored: 1 << 63) == 1 << 63)  // unsigned: the middle means nothing
        let thousands = Self.metric(.histogram, scale: 3, unit: .bytes)
        #expect(thousands.value(ofStored: 2).text == "2000")
        #expect(thousands.value(ofStored: 2).text(unit: thousands.unit) == "2000 bytes")
        #expect([micros.resolutionText, thousands.resolutionText, Self.metric(.counter).resolutionText] == ["0.000001", "1000", "1"])
    }

    @Test("a gauge's bits are a double, whatever its scale; a value of no known metric is read by the record's kind")
    func gaugesAndUnknown() {
        let gauge = Self.metric(.gauge)
        #expect(gauge.value(ofStored: (-1.5).bitPattern) == .double(-1.5))
        #expect(gauge.value(ofStored: 0) == .double(0))
        #expect(MetricValue(stored: (2.5).bitPattern, of: nil, kind: .gauge) == .double(2.5))
        #expect(MetricValue(stored: 7, of: nil, kind: .histogram) == .unsigned(7))
        #expect(MetricValue(stored: 7, of: nil) == .unsigned(7))
        // A known metric decides over the record's kind.
        let signed = Self.metric(.histogram, signed: true, scale: -2)
        #expect(MetricValue(stored: Self.stored(-350), of: signed, kind: .gauge) == .steps(-350, scale: -2))
    }
}
