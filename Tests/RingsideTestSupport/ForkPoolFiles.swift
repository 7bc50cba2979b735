import Ringside

/// One file of a fork pool as its writer left it: the bot `pool` or a worker's `pool@PID`, each
/// writing the histogram `pool_values` and, after each record, the counter `pool_increments`.
package struct ForkPoolFile {
    package let inspector: RingInspector
    package let status: RingStatus
    /// The histogram's drops, as its cells count them: what the collector reads.
    package let valuesDropped: UInt64
    /// The counter's total, as its cells count it.
    package let increments: UInt64

    package init(_ name: String, directory: RingDirectory) throws {
        let inspector = try RingInspector(name, directory: directory)
        let metrics = try inspector.metrics()
        func metric(_ metricName: String) throws -> MetricDescriptor {
            guard let found = metrics.first(where: { $0.name == metricName }) else {
                throw TestSupportError("\(name) has no metric \(metricName)")
            }
            return found
        }
        self.inspector = inspector
        status = try inspector.status()
        valuesDropped = try inspector.cells(of: metric("pool_values")).dropped
        increments = try inspector.cells(of: metric("pool_increments")).total
    }
}

/// The figures of a fork pool's files, summed: what the collector must show exactly.
package struct ForkPoolTotals {
    package var written: UInt64 = 0
    package var dropped: UInt64 = 0
    package var increments: UInt64 = 0
    package var valuesDropped: UInt64 = 0

    package init() {}

    package mutating func add(_ file: ForkPoolFile) {
        written += file.status.writeCursor
        dropped += file.status.dropped
        valuesDropped += file.valuesDropped
        increments += file.increments
    }

    /// One increment follows each record, but a kill may fall between the two.
    package var incrementsMatchRecords: Bool { increments <= written + dropped && increments + 1 >= written + dropped }

    /// A drop is counted in its lane, then in its metric's cell; a kill may fall between the two.
    package var valueDropsMatchLaneDrops: Bool { valuesDropped <= dropped && valuesDropped + 1 >= dropped }
}
