import CRingside
import RingsideExport
import RingsideHTTP
import RingsideSnapshot
import RingsideSystem

extension CollectorEndpoints {
    /// The query string of `request` as its route takes it (`RouteQuery`), or the 400 that
    /// refuses it (counted). Routes that read their own (`/api/history`, `POST /api/capture`) and
    /// paths that are no route pass with an empty query.
    func checkedQuery(of request: HTTPRequest) -> CheckedQuery {
        guard request.query?.isEmpty == false, let route = queryRoute(request.path) else { return .taken(RouteQuery()) }
        do throws(RouteQueryError) { return .taken(try RouteQuery(parsing: request.query, path: request.path)) } catch {
            queryFigures.refuse(route)
            return .refused(HTTPResponse(status: 400, text: "bad request: \(error.reason)\n"))
        }
    }

    /// A request's query: taken, or refused with this answer.
    enum CheckedQuery {
        case taken(RouteQuery)
        case refused(HTTPResponse)
    }

    /// The route a path's query is checked for (its name in `ringside_collector_queries_refused_total`),
    /// nil for those that read their own query and for paths that are no route (404).
    private func queryRoute(_ path: String) -> String? {
        switch path {
        case "/metrics", "/latest", "/", "/health", "/-/healthy", "/-/ready", Self.capturesPath, Self.timelinePath: path
        case Self.reloadPath where reloadRequests != nil: path
        case let path where path.hasPrefix(Self.capturesPath + "/"): Self.capturesPath + "/FILE"
        default: nil
        }
    }

    /// `/health`, and `/health?ring=NAME`: 503 while the drain loop makes no progress, or when a
    /// bot named is not alive (`BotHealth`: dead, stopped, stale past `max_age`, quarantined,
    /// skipped or unknown), with each one's state and reason.
    func health(asking query: RouteQuery) -> HTTPResponse {
        let snapshot = latestSnapshot()
        let progress = drainProgress()
        let now = rs_clock_realtime_ns()
        let maxAge = query.maxAgeSeconds ?? BotHealth.defaultMaxAgeSeconds
        let asked =
            query.rings.isEmpty ? nil : query.rings.map { BotHealth(bot: $0, in: snapshot, nowNanos: now, maxAgeSeconds: maxAge) }
        let healthy = progress.ready && (asked?.allSatisfy(\.isAlive) ?? true)
        return HTTPResponse(
            status: healthy ? 200 : 503, contentType: JSONExporter.contentType,
            body: JSONExporter.health(
                snapshot, isHealthy: progress.ready, lastPassAgeSeconds: progress.lastPassAgeSeconds,
                snapshotAgeSeconds: Self.age(of: snapshot), maxAgeSeconds: maxAge, asked: asked, nowNanos: now))
    }
}

/// What the routes did with their query strings: the per-bot pages, and the requests refused
/// (400) by route, shown on `/metrics` (`QueryStats`). Safe from any thread.
final class QueryFigures: Sendable {
    let botPages = BotPages()
    private let refused = Locked<[String: UInt64]>([:])

    /// Counts a request refused for its query; `route` is one of a few known routes' names.
    func refuse(_ route: String) { refused.withLock { $0[route, default: 0] += 1 } }

    func apply(to snapshot: inout Snapshot) {
        botPages.report(into: &snapshot.collector.queries)
        snapshot.collector.queries.refused = refused.withLock { $0 }
    }
}
