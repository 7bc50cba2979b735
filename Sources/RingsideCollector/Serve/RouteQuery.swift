import Ringside
import RingsideCommandLine

/// The query string of a route that takes one of a few parameters (or none), checked whole: a
/// parameter the route does not take, one without a value, a bad value, is refused (400) with a
/// reason naming it, never ignored. (`/api/history` and `POST /api/capture` read their own.)
///
/// - `ring=NAME` (`/metrics`, `/health`; repeatable, as node_exporter's `collect[]`): a bot's
///   name (1 to 200 of `A-Z a-z 0-9 . _ -`; a worker's `bot@pid` is not one), at most `maxRings`.
/// - `max_age=DURATION` (`/health`): how long a live bot may go without a record before it is
///   stale (`30s`, `5m`, or seconds), 1 s to a day.
/// - `window=` (`/`) and `file=` (`/captures/view`): read by the page's script, which checks them.
package struct RouteQuery: Sendable, Equatable {
    /// The bots named, in the order given, each once.
    package var rings: [String] = []
    package var maxAgeSeconds: Double?

    /// The parameters each route takes (none for a route not listed).
    package static let parameters: [String: Set<String>] = [
        "/metrics": ["ring"], "/health": ["ring", "max_age"], "/": ["window"], CollectorEndpoints.timelinePath: ["file"],
    ]
    /// Bots one request may name.
    package static let maxRings = 64
    package static let maxAgeRange: ClosedRange<Double> = 1...86_400

    /// No parameter.
    package init() {}

    /// Parses `query` (without `?`) for `path`; throws a one-line reason that names the parameter.
    package init(parsing query: String?, path: String) throws(RouteQueryError) {
        let taken = Self.parameters[path] ?? []
        for item in (query ?? "").split(separator: "&", omittingEmptySubsequences: true) {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecoded(parts[0]) else { throw RouteQueryError("bad percent-encoding in \(Self.shown(item))") }
            guard taken.contains(name) else {
                let takes = taken.isEmpty ? "\(path) takes no parameter" : "\(path) takes \(taken.sorted().joined(separator: ", "))"
                throw RouteQueryError("unknown parameter \(Self.shown(name)): \(takes)")
            }
            guard parts.count == 2, let value = percentDecoded(parts[1]) else {
                throw RouteQueryError("\(name): expected \(name)=VALUE, percent-encoded")
            }
            switch name {
            case "ring": try addRing(value)
            case "max_age":
                guard let nanos = durationNanos(value, bareSeconds: true), Self.maxAgeRange.contains(Double(nanos) / 1e9) else {
                    throw RouteQueryError("max_age=\(Self.shown(value)): not a duration from 1s to 1d (30s, 5m, or seconds)")
                }
                maxAgeSeconds = Double(nanos) / 1e9
            default: break  // read by the page's script
            }
        }
    }

    private mutating func addRing(_ name: String) throws(RouteQueryError) {
        do { try RingDirectory.validate(name: name) } catch {
            let worker = name.contains("@") ? " (a worker's file is read as its bot's: name the bot)" : ""
            throw RouteQueryError(
                "ring=\(Self.shown(name)): not a bot's name: 1 to 200 of letters, digits, '.', '_' and '-'\(worker)")
        }
        guard !rings.contains(name) else { return }
        guard rings.count < Self.maxRings else { throw RouteQueryError("more than \(Self.maxRings) ring= in one request") }
        rings.append(name)
    }

    /// Text from a client, for a one-line reason: at most 80 characters, control characters escaped.
    static func shown(_ text: some StringProtocol) -> String {
        let short = text.count > 80 ? String(text.prefix(80)) + "..." : String(text)
        return short.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? $0.escaped(asASCII: true) : String($0) }.joined()
    }
}

package struct RouteQueryError: Error, Equatable, Sendable {
    package let reason: String
    package init(_ reason: String) { self.reason = reason }
}
