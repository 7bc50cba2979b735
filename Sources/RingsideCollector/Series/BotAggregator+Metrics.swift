import CRingside
import RingsideSnapshot
import Ringside
import RingsideAggregation

extension BotAggregator {
    // MARK: - Metrics

    /// Maps `consumer`'s metrics not known yet (they arrive in index order) from source
    /// `source` to the bot's series: an existing series of the same name and labels, or a new
    /// one, as many as `allowance` (given what is held) leaves room for, in series and in bytes;
    /// the rest are refused (given no series, their records counted, their descriptors' strings
    /// let go). A metric whose name and labels another source registered as another kind, or in
    /// another unit, is refused too.
    /// - Returns: how many series were added.
    @discardableResult
    mutating func addMetrics(of consumer: RingConsumer, source: Int, admitting allowance: (_ held: Usage) -> Usage) -> Int {
        let room = allowance(usage)
        var admitted = 0
        var charged = 0
        for declared in consumer.metrics[sources[source].addresses.count...] where Int(declared.index) == sources[source].addresses.count {
            let index = Int(declared.index)
            if consumer.isRetired(metric: index) {
                // Retired before it was seen (RETIRING A SERIES in ringside.h): no series until revived.
                sources[source].retiredCells[index] = consumer.cells(ofMetric: index)
                let retired = SeriesAddress(kind: declared.kind.rawValue, slot: Self.retiredSlot, weight: 0, isSigned: declared.isSigned)
                sources[source].addresses.append(retired)
                continue
            }
            sources[source].addresses.append(
                findOrAddSeries(declared, of: consumer, source: source, room: room, admitted: &admitted, charged: &charged))
        }
        memory.charged += charged
        return admitted
    }

    /// The address of the series of metric `declared` of source `source`: an existing series of the
    /// same name and labels, or a new one, if `room` (less what `admitted` and `charged` hold already) leaves
    /// it room, in series and in bytes; else refused (its strings let go). A metric whose name and
    /// labels another source registered as another kind, or in another unit, is refused too.
    mutating func findOrAddSeries(
        _ declared: MetricDescriptor, of consumer: RingConsumer, source: Int, room: Usage, admitted: inout Int, charged: inout Int
    ) -> SeriesAddress {
        var metric = declared
        if metric.kind == .gauge {
            // Every source must merge a gauge alike; a per-worker gauge's series is its source's.
            let declaredKey = SeriesKey(name: metric.name, labels: metric.encodedLabels)
            if let policy = gaugePolicies[declaredKey], policy != metric.gaugeMerge {
                return refuse(metric, in: consumer, source: source, forBytes: false)
            }
            gaugePolicies[declaredKey] = metric.gaugeMerge
            if metric.gaugeMerge == .perWorker {
                guard let labelled = metric.labelled(pid: sources[source].pid) else {
                    return refuse(metric, in: consumer, source: source, forBytes: false)
                }
                metric = labelled
            }
        }
        let key = SeriesKey(name: metric.name, labels: metric.encodedLabels)
        if let existing = index.address(for: key, in: tables) {
            // Records of another unit would merge wrongly scaled: only the same kind, unit and
            // gauge policy join; a per-worker series is its own source's only.
            // Nor do values of another form or step.
            if existing.kind == metric.kind.rawValue, unit(of: existing) == metric.unit, policy(of: existing) == metric.gaugeMerge,
                metric.gaugeMerge != .perWorker, values(of: existing) == Values(metric)
            {
                return SeriesAddress(kind: existing.kind, slot: existing.slot, weight: metric.sampleEvery, isSigned: existing.isSigned)
            }
            return refuse(metric, in: consumer, source: source, forBytes: false)
        }
        let bytes = memory.cost.bytes(of: metric)
        guard admitted < room.series, charged + bytes <= room.bytes else {
            refusals.count += 1
            return refuse(metric, in: consumer, source: source, forBytes: admitted < room.series)
        }
        admitted += 1
        charged += bytes
        let address: SeriesAddress
        switch metric.kind {
        case .histogram where metric.isSigned:
            address = SeriesAddress(
                kind: metric.kind.rawValue, slot: tables.signedHistograms.count, weight: metric.sampleEvery, isSigned: true)
            tables.signedHistograms.append(Series(ring: ring, metric: metric, windows: WindowedSignedHistogram(layout: layout)))
        case .histogram:
            address = SeriesAddress(kind: metric.kind.rawValue, slot: tables.histograms.count, weight: metric.sampleEvery)
            tables.histograms.append(Series(ring: ring, metric: metric, windows: WindowedHistogram(layout: layout)))
        case .counter:
            address = SeriesAddress(kind: metric.kind.rawValue, slot: tables.counters.count, weight: 1)
            tables.counters.append(Series(ring: ring, metric: metric, windows: WindowedCounter(layout: layout)))
        case .gauge:
            address = SeriesAddress(kind: metric.kind.rawValue, slot: tables.gauges.count, weight: 1)
            let owner = metric.gaugeMerge == .perWorker ? source : nil
            tables.gauges.append(Series(ring: ring, metric: metric, owner: owner, windows: WindowedGauge(layout: layout)))
        }
        index.set(address, for: key, in: tables)
        takeRestored(of: key, kind: metric.kind, address: address)
        return address
    }

    /// Gives a new series what the collector's last run left it.
    private mutating func takeRestored(of key: SeriesKey, kind: MetricKind, address: SeriesAddress) {
        if kind == .histogram, let earlier = restored.histograms.removeValue(forKey: key) {
            if address.isSigned {
                tables.signedHistograms[address.slot].windows.seedAllTime(earlier)
            } else {
                tables.histograms[address.slot].windows.seedAllTime(earlier.nonNegative)
            }
        }
        if let seed = restored.totals.removeValue(forKey: key) {
            switch kind {
            case .histogram where address.isSigned: tables.signedHistograms[address.slot].takeFolded(seed)
            case .histogram: tables.histograms[address.slot].takeFolded(seed)
            case .counter: tables.counters[address.slot].takeFolded(seed)
            case .gauge: tables.gauges[address.slot].takeFolded(seed)
            }
        }
    }

    /// The gauge policy of the series an address leads to (`.last` for other kinds).
    private func policy(of address: SeriesAddress) -> GaugeMerge {
        address.kind == MetricKind.gauge.rawValue ? tables.gauges[address.slot].gaugeMerge : .last
    }

    /// The metric of the series an address leads to.
    private func metric(of address: SeriesAddress) -> MetricDescriptor { tables.metric(of: address) }

    /// A series' values: signed or not, and their step.
    private struct Values: Equatable {
        let isSigned: Bool
        let scale: Int8
        init(_ metric: MetricDescriptor) { (isSigned, scale) = (metric.isSigned, metric.scale) }
    }

    /// The values of the series an address leads to.
    private func values(of address: SeriesAddress) -> Values { Values(metric(of: address)) }

    /// The unit of the series an address leads to.
    private func unit(of address: SeriesAddress) -> MetricUnit { metric(of: address).unit }

    /// The address of a metric of `source` refused: nowhere; its records are counted, its strings let go.
    private mutating func refuse(_ metric: MetricDescriptor, in consumer: RingConsumer, source: Int, forBytes: Bool) -> SeriesAddress {
        sources[source].refusedSeries += 1
        memory.refused += MemoryLayout<MetricDescriptor>.stride
        if refusals.first == nil {
            refusals.first = metric
            refusals.firstForBytes = forBytes
        }
        consumer.forgetStrings(ofMetric: Int(metric.index))
        return SeriesAddress(kind: metric.kind.rawValue, slot: Self.refusedSlot, weight: 0)
    }

    /// Reads the registry again and adds series for the metrics registered since (see `addMetrics`).
    /// - Returns: how many metrics the registry had that were not known.
    @discardableResult
    mutating func refreshMetrics(of consumer: RingConsumer, source: Int, admitting allowance: (_ held: Usage) -> Usage) -> Int {
        let added = (try? consumer.refreshMetrics()) ?? 0
        if added > 0 { addMetrics(of: consumer, source: source, admitting: allowance) }
        return added
    }
}
