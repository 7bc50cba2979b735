import RingsideSnapshot

/// What a snapshot's series show, in a few numbers: two snapshots with equal keys have series
/// that render to the same bytes, so the /metrics renderer keeps their section of the page from
/// one to the next (see `MetricsPages`).
///
/// Exact, not a hash, because of how the publisher numbers series (`VersionCounter`, one counter
/// for the whole collector): a series' `id`, `version` and `wholeVersion` are each taken from it
/// and only grow. A series whose windows or whole figures change takes a new version, larger than
/// every number handed out before; a new series, a new id as large. So any change raises the
/// largest version, whole version or id, and a series gone without a new one lowers the count.
/// (The order of the series follows from which there are: bots by name, a bot's in its order.)
/// The windows, quantiles and native schema are the collector's options, the same all along, but
/// counted too.
struct SeriesContentKey: Equatable, Sendable {
    var count = 0
    var largestID: UInt64 = 0
    var largestVersion: UInt64 = 0
    var largestWholeVersion: UInt64 = 0
    var windowNanos: [UInt64] = []
    var quantiles: [Double] = []
    var nativeHistogramSchema: Int?

    init(_ snapshot: Snapshot) {
        count = snapshot.series.count
        for series in snapshot.series {
            largestID = max(largestID, series.id)
            largestVersion = max(largestVersion, series.version)
            largestWholeVersion = max(largestWholeVersion, series.wholeVersion)
        }
        windowNanos = snapshot.windowNanos
        quantiles = snapshot.quantiles
        nativeHistogramSchema = snapshot.nativeHistogramSchema
    }
}
