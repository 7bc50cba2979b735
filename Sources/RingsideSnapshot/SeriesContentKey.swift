/// What a snapshot's series show, in a few numbers: two snapshots with equal keys have series
/// that render to the same bytes, so the /metrics pages keep what they rendered of them from one
/// to the next (the collector's `MetricsPages`).
///
/// Exact, not a hash, because of how the collector's publisher numbers series (`VersionCounter`,
/// one counter for the whole collector): a series' `id`, `version` and `wholeVersion` are each taken from it
/// and only grow. A series whose windows or whole figures change takes a new version, larger than
/// every number handed out before; a new series, a new id as large. So any change raises the
/// largest version, whole version or id, and a series gone without a new one lowers the count.
/// (The order of the series follows from which there are: bots by name, a bot's in its order.)
/// The windows, quantiles and native schema are the collector's options, the same all along, but
/// counted too.
/// A snapshot made by hand, whose series carry no versions, has a key that says nothing
/// (`isVersioned` false): nothing may be reused for it.
package struct SeriesContentKey: Equatable, Sendable {
    package private(set) var count = 0
    package private(set) var largestID: UInt64 = 0
    package private(set) var largestVersion: UInt64 = 0
    package private(set) var largestWholeVersion: UInt64 = 0
    package private(set) var windowNanos: [UInt64] = []
    package private(set) var quantiles: [Double] = []
    package private(set) var nativeHistogramSchema: Int?

    /// Whether the series carry the collector's versions (every series it publishes has a whole
    /// version, from its first snapshot on).
    package var isVersioned: Bool { count == 0 || largestWholeVersion > 0 }

    package init(_ snapshot: Snapshot) {
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
