/// Events clients cause at will (failed TLS handshakes, refused passwords), each counted on
/// `/metrics` by the server's owner: the first is logged at once, then a line a minute at most
/// says how many came since and the last one's reason, so a flood cannot flood the log.
struct OccasionalLog {
    let what: String
    private var unsaid = 0
    private var nextLine: Int64 = 0

    init(what: String) { self.what = what }

    mutating func note(_ reason: String, now: Int64, log: HTTPServerLog) {
        unsaid += 1
        guard now >= nextLine else { return }
        let count = unsaid == 1 ? "" : " (\(unsaid) since the last line)"
        log("\(what)\(count); the last: \(reason). Logged at most once a minute", true)
        unsaid = 0
        nextLine = now + 60_000
    }
}
