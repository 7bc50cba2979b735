import Ringside
import RingsideAggregation

extension BotAggregator {
    // MARK: - Retiring (RETIRING A SERIES in ringside.h)

    /// The slot of an address whose file retired its metric: its records are refused (counted), its
    /// cells not counted, until the file revives it.
    static let retiredSlot = -2

    /// Looks at the `retired` word of each metric of source `source`: a series its file retired
    /// leaves the bot (once no other file holds it live: its windows, exemplars and totals let go,
    /// so it is on no page and in no saved state), and one revived starts anew, counting from the
    /// cells as they were when its retirement was seen (a counter from zero). Revived series are
    /// admitted as new ones are, by `allowance` (nil: none is, this time).
    /// - Returns: whether any series left or came back.
    mutating func retireAndRevive(of consumer: RingConsumer, source: Int, admitting allowance: ((_ held: Usage) -> Usage)?) -> Bool {
        var changed = false
        for index in sources[source].addresses.indices {
            let address = sources[source].addresses[index]
            guard address.slot != Self.refusedSlot, index < consumer.metrics.count else { continue }
            let retired = consumer.isRetired(metric: index)
            if retired, address.slot >= 0 {
                retire(index, address: address, of: consumer, source: source)
                changed = true
            } else if !retired, address.slot == Self.retiredSlot, let allowance {
                revive(index, of: consumer, source: source, room: allowance(usage))
                changed = true
            }
        }
        return changed
    }

    /// Marks metric `index` of `source` retired: its cells now are where a revival counts
    /// from. Its series goes when no other source's address leads to it; else this source's figures
    /// are folded into it, as a removed source's.
    private mutating func retire(_ index: Int, address: SeriesAddress, of consumer: RingConsumer, source: Int) {
        sources[source].retiredCells[index] = consumer.cells(ofMetric: index)
        sources[source].addresses[index] = SeriesAddress(kind: address.kind, slot: Self.retiredSlot, weight: 0, isSigned: address.isSigned)
        sources[source].retirements &+= 1
        let shared = sources.indices.contains { other in
            sources[other].inUse
                && sources[other].addresses.contains {
                    $0.kind == address.kind && $0.isSigned == address.isSigned && $0.slot == address.slot
                }
        }
        switch address.kind {
        case MetricKind.histogram.rawValue where address.isSigned:
            if shared { tables.signedHistograms[address.slot].removeSource(source) } else { removeSeries(address, of: \.signedHistograms) }
        case MetricKind.histogram.rawValue:
            if shared { tables.histograms[address.slot].removeSource(source) } else { removeSeries(address, of: \.histograms) }
        case MetricKind.counter.rawValue:
            if shared { tables.counters[address.slot].removeSource(source) } else { removeSeries(address, of: \.counters) }
        default:
            if shared { tables.gauges[address.slot].removeSource(source) } else { removeSeries(address, of: \.gauges) }
        }
    }

    /// Maps metric `index` of `source` to its series again, as a metric registered now (`findOrAddSeries`), its
    /// cells counted from those its retirement left.
    private mutating func revive(_ index: Int, of consumer: RingConsumer, source: Int, room: Usage) {
        var admitted = 0, charged = 0
        let address = findOrAddSeries(
            consumer.metrics[index], of: consumer, source: source, room: room, admitted: &admitted, charged: &charged)
        memory.charged += charged
        sources[source].addresses[index] = address
        guard let baseline = sources[source].retiredCells.removeValue(forKey: index), address.slot >= 0 else { return }
        switch address.kind {
        case MetricKind.histogram.rawValue where address.isSigned: tables.signedHistograms[address.slot].countFrom(baseline, source: source)
        case MetricKind.histogram.rawValue: tables.histograms[address.slot].countFrom(baseline, source: source)
        case MetricKind.counter.rawValue: tables.counters[address.slot].countFrom(baseline, source: source)
        default: tables.gauges[address.slot].countFrom(baseline, source: source)
        }
    }

    /// Removes the series `address` leads to in `table`: the last series takes its slot, and the
    /// addresses to it follow (as a gone worker's gauge is removed).
    private mutating func removeSeries<Windows>(_ address: SeriesAddress, of table: WritableKeyPath<SeriesTables, [Series<Windows>]>) {
        let slot = address.slot
        let gone = tables[keyPath: table][slot].metric
        if tables[keyPath: table][slot].saturated { saturation.count -= 1 }
        if tables[keyPath: table][slot].cached.isPacked { snapshotPass.removedFromABlock = true }
        index.set(nil, for: SeriesKey(name: gone.name, labels: gone.encodedLabels), in: tables)
        memory.charged -= memory.cost.bytes(of: gone)
        memory.counts -= tables[keyPath: table][slot].countsBytes
        let last = tables[keyPath: table].count - 1
        if slot != last {
            // The index checks an address against the series it leads to: moved before the series is.
            let moved = tables[keyPath: table][last].metric
            let movedKey = SeriesKey(name: moved.name, labels: moved.encodedLabels)
            if var movedAddress = index.address(for: movedKey, in: tables) {
                movedAddress.slot = slot
                index.set(movedAddress, for: movedKey, in: tables)
            }
            tables[keyPath: table].swapAt(slot, last)
            for source in sources.indices {
                for place in sources[source].addresses.indices
                where sources[source].addresses[place].kind == address.kind && sources[source].addresses[place].isSigned == address.isSigned
                    && sources[source].addresses[place].slot == last
                {
                    sources[source].addresses[place].slot = slot
                }
            }
        }
        tables[keyPath: table].removeLast()
    }
}

extension BotAggregator.Series {
    /// Counts source `source`'s cells from `baseline` on: what they held when its retirement was
    /// seen counts for nothing (a revived series starts anew).
    mutating func countFrom(_ baseline: MetricCells, source: Int) {
        var counted = baseline
        counted.total = 0
        counted.dropped = 0
        counted.clamped = 0
        if sourceCells.count <= source { sourceCells += Array(repeating: nil, count: source + 1 - sourceCells.count) }
        sourceCells[source] = BotAggregator.SourceCells(counting: counted, from: baseline)
    }
}
