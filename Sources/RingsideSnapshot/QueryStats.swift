/// What the collector's routes did with their query strings since it started: the per-bot
/// `/metrics?ring=` pages served, and the requests refused for their query (400).
package struct QueryStats: Sendable, Equatable {
    /// Per-bot pages rendered for their scrape, and served again from the few kept (the same bots,
    /// format and encoding, of a snapshot that had not changed).
    package var botPagesRendered: UInt64 = 0
    package var botPagesReused: UInt64 = 0
    /// Per-bot pages kept now, and the bytes they hold (bounded: see `BotPages`).
    package var botPagesKept = 0
    package var botPagesKeptBytes = 0
    /// Requests answered 400 for their query string, by route: an unknown parameter, a malformed
    /// one, a ring that is no bot's name, too many rings.
    package var refused: [String: UInt64] = [:]

    package init() {}
}
