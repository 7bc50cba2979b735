import CRingside
import Foundation
import Ringside
@testable import RingsideCollector
import RingsideSnapshot
import RingsideTestSupport
import Synchronization
import Testing

/// What `promtool check metrics` says of `page` (nothing when it is clean), or nil when promtool
/// is not installed (the test skips).
func promtoolCheckMetrics(_ page: String) throws -> (status: Int32?, report: String)? {
    guard let promtool = try requiredSystemTool("promtool") else { return nil }
    let check = try runProcess(promtool, ["check", "metrics"], stdin: page, mergingErrors: true)
    return (check.status, check.output.trimmingCharacters(in: .whitespacesAndNewlines))
}

/// One pass at the precise clock's now (or `offset` nanoseconds later), forcing a snapshot.
@discardableResult
func pass(_ collector: Collector, offset: UInt64 = 0) -> Snapshot {
    collector.runPass(nowNanos: rs_clock_precise_ns() + offset, forcePublish: true)
    return collector.snapshot
}

extension Snapshot {
    func series(_ metric: String, ring: String? = nil, labels: [String: String]? = nil) -> SeriesSnapshot? {
        series.first { entry in
            entry.metric.name == metric && (ring == nil || entry.ring == ring)
                && (labels == nil || entry.metric.labelDictionary == labels!)
        }
    }

    func ring(_ name: String) -> RingSnapshot? { rings.first { $0.name == name } }
}
