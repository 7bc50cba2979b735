import Ringside

/// The tracker's state, in parts by what each is for.
extension RingTracker {
    /// What passes last did and found.
    struct PassMarks {
        /// When every ring was last looked at for new lanes (see `DrainTiming.identityCheckNanos`).
        var sweepNanos: UInt64 = 0
        /// The rings open as discovery was last told.
        var toldRingsOpen = 0
        /// When a ring was last attached or taken up again.
        var attachNanos: UInt64 = 0
        /// Something changed that the next snapshot should show (a ring came, went or changed state).
        var ringsChanged = false
        /// Age of the oldest record drained lately: how far behind the drain runs.
        var lagSeconds: Double = 0
        /// Which producer processes are stopped, read once per process per look.
        var processStates = ProcessStates()
        /// What looking at rings' cells costs, to space the looks at those with no sign of change.
        var cellLookPace = CellLookPace()
        /// Every bot's series and their memory, for the series caps.
        var seriesUsage = SeriesUsageTally()
    }

    /// The directory's lock and state: what the bots' workers that are gone left, kept across
    /// restarts (opening it takes the lock); why another collector holds the directory (said
    /// once), while it does; when its state was last tried.
    struct DirectoryHold {
        let state: CollectorState
        var heldBy: String?
        var triedNanos: UInt64 = 0
    }

    /// What the drain feeds besides the series: the flight recorder (nil with
    /// `--recorder-seconds 0`), and the desk where a bot that dies or stops asks for a capture
    /// (nil without `--capture-dir`).
    struct DrainOutputs {
        let recorder: Recorder?
        var captureDesk: CaptureDesk?
    }
}
