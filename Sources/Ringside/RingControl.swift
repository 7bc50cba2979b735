import CRingside

/// The operator's switches of one bot file (CONTROL in ringside.h): a metric's recording off or
/// on, a histogram sampled 1 in 2^n, the whole bot off or on. Opened read-write without a lock,
/// beside the bot's producer and consumer; it writes the control words only, each in one atomic
/// step, so a producer's call sees the word as it was or as it is, never half of it.
package final class RingControl {
    private let file: MappedRingFile
    /// The file's registered metrics, as read at open.
    package let metrics: [MetricDescriptor]

    package init(_ name: String, directory: RingDirectory = RingDirectory()) throws(RingError) {
        file = try MappedRingFile.open(name: name, directory: directory, role: .operator)
        metrics = try file.metrics(from: 0)
    }

    /// A metric's control word (by registry index).
    package func control(of metric: Int) -> UInt32 { file.control(metric: metric) }

    /// Clears then sets bits of a metric's word; returns the word as it was.
    @discardableResult
    package func update(metric: Int, clear: UInt32, set: UInt32) -> UInt32 {
        rs_control_update(file.controlWord(metric: metric), clear, set)
    }

    /// Whether the bot is switched off (`bot_control`).
    package var isBotOff: Bool { rs_load_relaxed_u32(file.botControlWord) & RS_CONTROL_BOT_OFF != 0 }

    /// Switches the whole bot off or on: `bot_control` first, then, after a full fence, every
    /// metric published by then (a producer publishing one meanwhile reads `bot_control` after its
    /// own fence: of the two, one sees the other, CONTROL in ringside.h).
    package func setBotOff(_ off: Bool) throws(RingError) {
        rs_control_update(file.botControlWord, RS_CONTROL_BOT_OFF, off ? RS_CONTROL_BOT_OFF : 0)
        rs_control_fence()
        let published = try file.metrics(from: 0).count
        for metric in 0..<published { update(metric: metric, clear: RS_CONTROL_BOT_OFF, set: off ? RS_CONTROL_BOT_OFF : 0) }
    }
}
