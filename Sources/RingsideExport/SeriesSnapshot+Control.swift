import CRingside
import RingsideSnapshot

// MARK: - What the exports read of a series beside its figures: its control word and its exact sum

extension SeriesSnapshot {
    /// Whether its metric records: neither it nor its bot is switched off (CONTROL in ringside.h).
    package var isEnabled: Bool { self.control & (RS_CONTROL_OFF | RS_CONTROL_BOT_OFF) == 0 }

    /// The operator's sampling of a histogram, 1 call in this many written (1: none), on top of its
    /// registered `sample_every`.
    package var controlSampleEvery: UInt64 { UInt64(1) << UInt64(min(self.control & RS_CONTROL_SAMPLE, RS_WEIGHT_LOG2_MAX)) }

    /// A histogram's all-time sum, or a counter's total, in steps: sign and magnitude, exactly.
    package var exactSumSteps: (negative: Bool, magnitude: UInt128) {
        self.metric.isSigned ? (self.cumulativeSignedSum < 0, self.cumulativeSignedSum.magnitude) : (false, self.cumulativeExactSum)
    }
}
