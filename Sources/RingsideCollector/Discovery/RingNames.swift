import Ringside

extension WorkerRing {
    /// The bot a ring file writes for: a worker's ring (`<bot>@<pid>`) names its bot before the
    /// separator, any other ring is the bot's own.
    static func botName(ofRing ring: String) -> String { WorkerRing(ring)?.bot ?? ring }
}
