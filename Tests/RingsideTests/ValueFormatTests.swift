import CRingside
import Foundation
@testable import Ringside
import RingsideTestSupport
import Testing

/// Issue 41, the format's part (VALUES in ringside.h, format 4): signed histograms stored in
/// offset binary, values in steps of 10^scale, and what does not fit clamped and counted. Through
/// the C producer, read back with the Swift reader.
@Suite("Format 4: signed and scaled values through the C producer")
struct ValueFormatTests {
    /// A C bot attached in `directory`, detached at the end.
    static func withCBot(_ name: String, in directory: RingDirectory, _ body: (OpaquePointer) throws -> Void) throws {
        var bot: UnsafeMutablePointer<rs_bot>?
        var error = rs_error()
        var options = rs_bot_options()
        options.lane_capacity = 1024
        let attached = directory.path.withCString { path in
            options.directory = path
            return rs_bot_attach(&bot, name, &options, &error)
        }
        try #require(attached == 0, "\(text(error))")
        let pointer = try #require(bot)
        defer { rs_bot_detach(pointer) }
        try body(OpaquePointer(pointer))
    }

    /// An rs_error's message.
    static func text(_ error: rs_error) -> String {
        let bytes = withUnsafeBytes(of: error.message) { Array($0) }
        return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// The metric cell's `clamped` of metric `index` in ring `path`.
    static func clamped(_ path: String, metric index: Int) -> UInt64 {
        let header = fileHeader(path)
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        var value: UInt64 = 0
        let offset =
            off_t(header.cells_offset) + off_t(index * Int(RS_METRIC_CELL_SIZE))
            + off_t(MemoryLayout<rs_metric_cell>.offset(of: \.clamped)!)
        _ = withUnsafeMutableBytes(of: &value) { pread(fd, $0.baseAddress, 8, offset) }
        return value
    }

    @Test("a signed histogram's values are stored in offset binary, rounded to its steps; the registry says signed and the scale")
    func signedInOffsetBinary() throws {
        try withRingDirectory { directory in
            try Self.withCBot("signed", in: directory) { opaque in
                let bot = UnsafeMutablePointer<rs_bot>(opaque)
                var slippage = rs_metric(), commission = rs_metric(), error = rs_error()
                #expect(
                    rs_bot_register_values(
                        bot, &slippage, "slippage_bps", RS_KIND_HISTOGRAM, RS_UNIT_NONE,
                        rs_values(form: UInt8(RS_FORM_SIGNED.rawValue), scale: -2),
                        nil, "", 1, &error) == 0)
                #expect(
                    rs_bot_register_values(
                        bot, &commission, "commission_usd", RS_KIND_COUNTER, RS_UNIT_NONE, rs_values(form: 0, scale: -6), nil, "", 1, &error
                    )
                        == 0)
                #expect(slippage.kind == UInt8(RS_METRIC_SIGNED_HISTOGRAM) && slippage.scale == -2)
                for value in [-3.5, 0, 2.25, -0.005, 0.015, 1e-9] { _ = rs_bot_record_value(bot, slippage, value) }
                #expect(rs_bot_record_signed(bot, slippage, -7) == 1)
                #expect(rs_bot_record(bot, slippage, 5) == 0, "the unsigned path refuses a signed histogram")
                for _ in 0..<1000 { rs_bot_count_value(bot, commission, 0.37) }

                let consumer = try RingConsumer("signed", directory: directory)
                let metric = consumer.metrics[0]
                #expect(metric.isSigned && metric.scale == -2 && metric.kind == .histogram)
                #expect(!consumer.metrics[1].isSigned && consumer.metrics[1].scale == -6)
                let values = try drainAll(consumer).map { Int64(bitPattern: $0.record.value ^ RS_OFFSET_BINARY_BIAS) }
                // -0.005 and 0.015 round to even steps: -0 and 2.
                #expect(values == [-350, 0, 225, 0, 2, 0, -7])
                #expect(consumer.cells(of: consumer.metrics[1]).total == 370_000_000, "1,000 x 0.37 dollars in micro-dollars, exactly")
                #expect(
                    fileHeader(directory.filePath(for: "signed")).version == RS_FORMAT_VERSION, "made format 4 by its first signed metric")
            }
        }
    }

    @Test("a bot file is made format 3, which older readers and producers read, until its first signed or scaled metric")
    func formatThreeUntilNeeded() throws {
        try withRingDirectory { directory in
            try Self.withCBot("plain", in: directory) { opaque in
                let bot = UnsafeMutablePointer<rs_bot>(opaque)
                var metric = rs_metric(), error = rs_error()
                let path = directory.filePath(for: "plain")
                #expect(rs_bot_register(bot, &metric, "latency", RS_KIND_HISTOGRAM, RS_UNIT_NANOSECONDS, nil, "", 1, &error) == 0)
                #expect(fileHeader(path).version == RS_FORMAT_VERSION_MIN)
                #expect(
                    rs_bot_register_values(
                        bot, &metric, "fees", RS_KIND_COUNTER, RS_UNIT_NONE, rs_values(form: 0, scale: -2), nil, "", 1, &error) == 0)
                #expect(fileHeader(path).version == RS_FORMAT_VERSION)
            }
        }
    }

    @Test("values a metric cannot hold are clamped to its ends and counted; a NaN is counted, not recorded")
    func clampedAndCounted() throws {
        try withRingDirectory { directory in
            try Self.withCBot("clamps", in: directory) { opaque in
                let bot = UnsafeMutablePointer<rs_bot>(opaque)
                var signed = rs_metric(), unsigned = rs_metric(), counter = rs_metric(), error = rs_error()
                let signedValues = rs_values(form: UInt8(RS_FORM_SIGNED.rawValue), scale: 0)
                #expect(rs_bot_register_values(bot, &signed, "pnl", RS_KIND_HISTOGRAM, RS_UNIT_NONE, signedValues, nil, "", 1, &error) == 0)
                #expect(
                    rs_bot_register_values(
                        bot, &unsigned, "size", RS_KIND_HISTOGRAM, RS_UNIT_NONE, rs_values(form: 0, scale: -3), nil, "", 1, &error) == 0)
                #expect(
                    rs_bot_register_values(
                        bot, &counter, "fees", RS_KIND_COUNTER, RS_UNIT_NONE, rs_values(form: 0, scale: -2), nil, "", 1, &error) == 0)
                for value in [Double.infinity, -Double.infinity, 1e30, .nan] { _ = rs_bot_record_value(bot, signed, value) }
                _ = rs_bot_record_signed(bot, signed, .min)
                for value in [-1.0, .nan, 2e20] { _ = rs_bot_record_value(bot, unsigned, value) }
                for value in [-0.5, .nan, 1.5] { rs_bot_count_value(bot, counter, value) }

                let path = directory.filePath(for: "clamps")
                #expect(Self.clamped(path, metric: 0) == 5 && Self.clamped(path, metric: 1) == 3 && Self.clamped(path, metric: 2) == 2)
                let consumer = try RingConsumer("clamps", directory: directory)
                let records = try drainAll(consumer).map(\.record)
                let signedValuesRead = records.filter { $0.metric == 0 }.map { Int64(bitPattern: $0.value ^ RS_OFFSET_BINARY_BIAS) }
                #expect(signedValuesRead == [.max, -.max, .max, -.max], "clamped to +-(2^63 - 1); the NaN not recorded")
                #expect(records.filter { $0.metric == 1 }.map(\.value) == [0, .max])
                #expect(consumer.cells(of: consumer.metrics[2]).total == 150, "only 1.5 added, in hundredths")
            }
        }
    }

    @Test(
        "the same metric registered again with another form or scale is a conflict; signed counters, scaled gauges and scales past 18 are refused"
    )
    func refusals() throws {
        try withRingDirectory { directory in
            try Self.withCBot("refusals", in: directory) { opaque in
                let bot = UnsafeMutablePointer<rs_bot>(opaque)
                var metric = rs_metric(), error = rs_error()
                let signed = rs_values(form: UInt8(RS_FORM_SIGNED.rawValue), scale: -2)
                #expect(rs_bot_register_values(bot, &metric, "slip", RS_KIND_HISTOGRAM, RS_UNIT_NONE, signed, nil, "", 1, &error) == 0)
                #expect(rs_bot_register(bot, &metric, "slip", RS_KIND_HISTOGRAM, RS_UNIT_NONE, nil, "", 1, &error) == RS_E_CONFLICT)
                let message = Self.text(error)
                #expect(message.contains("signed values in steps of 1e-2"), "\(message)")
                #expect(
                    rs_bot_register_values(bot, &metric, "c", RS_KIND_COUNTER, RS_UNIT_NONE, signed, nil, "", 1, &error) == RS_E_INVALID)
                #expect(
                    rs_bot_register_values(bot, &metric, "g", RS_KIND_GAUGE, RS_UNIT_NONE, rs_values(form: 0, scale: 1), nil, "", 1, &error)
                        == RS_E_INVALID)
                #expect(
                    rs_bot_register_values(
                        bot, &metric, "h", RS_KIND_HISTOGRAM, RS_UNIT_NONE, rs_values(form: 0, scale: 19), nil, "", 1, &error)
                        == RS_E_INVALID)
                #expect(
                    rs_bot_register_values(
                        bot, &metric, "h", RS_KIND_HISTOGRAM, RS_UNIT_NONE, rs_values(form: 2, scale: 0), nil, "", 1, &error)
                        == RS_E_INVALID)
            }
        }
    }

    @Test("a span or a duration into a histogram with a resolution records its steps: 5.5 ms as 5500 microsecond steps of a ms histogram")
    func spansInSteps() throws {
        try withBot("spans") { directory, bot in
            let latency = try bot.histogram("order_ms", unit: .milliseconds, resolution: 0.001)
            latency.record(.microseconds(5_500))
            latency.record(2.5)  // 2.5 ms: 2500 steps
            let timing = latency.startTiming()
            timing.stop()
            var metric = rs_metric(), error = rs_error()
            #expect(
                rs_bot_register_values(
                    bot.attachment.pointer, &metric, "order_ms", RS_KIND_HISTOGRAM, RS_UNIT_MILLISECONDS, rs_values(form: 0, scale: -3),
                    nil, "", 1, &error) == 0)
            #expect(rs_metric_steps_of_ns(metric, 5_500_000) == 5_500 && rs_metric_steps_of_ns(metric, 999) == 0)
            let consumer = try RingConsumer("spans", directory: directory)
            let records = try drainAll(consumer).map(\.record)
            #expect(records.prefix(2).map(\.value) == [5_500, 2_500])
            let span = try #require(records.last)
            #expect(span.flags & UInt8(RS_FLAG_SPAN) != 0 && span.value < 1_000_000, "a span of microseconds, in microsecond steps")
        }
    }
}
