import Ringside
import RingsideAggregation

extension BotAggregator {
    // MARK: - Retiring (RETIRING A SERIES in ringside.h)

    /// The slot of a route whose file retired its metric: its records are refused (counted), its
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
        for index in sources[source].routes.indices {
            let route = sources[source].routes[index]
            guard route.slot != Self.refusedSlot, index < consumer.metrics.count else { continue }
            let retired = consumer.isRetired(metric: index)
            if retired, route.slot >= 0 {
                retire(index, route: route, of: consumer, source: source)
                changed = true
            } else if !retired, route.slot == Self.retiredSlot, let allowance {
                revive(index, of: consumer, source: source, room: allowance(usage))
                changed = true
            }
        }
        return changed
    }

    /// Routes metric `index` of `source` as retired: its cells now are where a revival counts
    /// from. Its series goes when no other source's route leads to it; else this source's figures
    /// are folded into it, as a removed source's.
    private mutating func retire(_ index: Int, route: Route, of consumer: RingConsumer, source: Int) {
        sources[source].retiredCells[index] = consumer.cells(ofMetric: index)
        sources[source].routes[index] = Route(kind: route.kind, slot: Self.retiredSlot, weight: 0, isSigned: route.isSigned)
        sources[source].retirements &+= 1
        let shared = sources.indices.contains { other in
            sources[other].inUse
                && sources[other].routes.contains { $0.kind == route.kind && $0.isSigned == route.isSigned && $0.slot == route.slot }
        }
        switch route.kind {
        case MetricKind.histogram.rawValue where route.isSigned:
            if shared { tables.signedHistograms[route.slot].removeSource(source) } else { removeSeries(route, of: \.signedHistograms) }
        case MetricKind.histogram.rawValue:
            if shared { tables.histograms[route.slot].removeSource(source) } else { removeSeries(route, of: \.histograms) }
        case MetricKind.counter.rawValue:
            if shared { tables.counters[route.slot].removeSource(source) } else { removeSeries(route, of: \.counters) }
        default:
            if shared { tables.gauges[route.slot].removeSource(source) } else { removeSeries(route, of: \.gauges) }
        }
    }

    /// Routes metric `index` of `source` again, as a metric registered now (`routeMetric`), its
    /// cells counted from those its retirement left.
    private mutating func revive(_ index: Int, of consumer: RingConsumer, source: Int, room: Usage) {
        var admitted = 0, charged = 0
        let route = routeMetric(consumer.metrics[index], of: consumer, source: source, room: room, admitted: &admitted, charged: &charged)
        memory.charged += charged
        sources[source].routes[index] = route
        guard let baseline = sources[source].retiredCells.removeValue(forKey: index), route.slot >= 0 else { return }
        switch route.kind {
        case MetricKind.histogram.rawValue where route.isSigned: tables.signedHistograms[route.slot].countFrom(baseline, source: source)
        case MetricKind.histogram.rawValue: tables.histograms[route.slot].countFrom(baseline, source: source)
        case MetricKind.counter.rawValue: tables.counters[route.slot].countFrom(baseline, source: source)
        default: tables.gauges[route.slot].countFrom(baseline, source: source)
        }
    }

    /// Removes the series `route` leads to in `table`: the last series takes its slot, and the
    /// routes to it follow (as a gone worker's gauge is removed).
    private mutating func removeSeries<Windows>(_ route: Route, of table: WritableKeyPath<SeriesTables, [Series<Windows>]>) {
        let slot = route.slot
        let gone = tables[keyPath: table][slot].metric
        if tables[keyPath: table][slot].saturated { saturation.count -= 1 }
        if tables[keyPath: table][slot].cached.isPacked { snapshotPass.removedFromABlock = true }
        index.set(nil, for: SeriesKey(name: gone.name, labels: gone.encodedLabels), in: tables)
        memory.charged -= memory.cost.bytes(of: gone)
        memory.counts -= tables[keyPath: table][slot].countsBytes
        let last = tables[keyPath: table].count - 1
        if slot != last {
            // The index checks a route against the series it leads to: moved before the series is.
            let moved = tables[keyPath: table][last].metric
            let movedKey = SeriesKey(name: moved.name, labels: moved.encodedLabels)
            if var movedRoute = index.route(for: movedKey, in: tables) {
                movedRoute.slot = slot
                index.set(movedRoute, for: movedKey, in: tables)
            }
            tables[keyPath: table].swapAt(slot, last)
            for source in sources.indices {
                for place in sources[source].routes.indices
                where sources[source].routes[place].kind == route.kind && sources[source].routes[place].isSigned == route.isSigned
                    && sources[source].routes[place].slot == last
                {
                    sources[source].routes[place].slot = slot
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
