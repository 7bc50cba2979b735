import RingsideCollector
import RingsideCommandLine
import RingsideText
import RingsideSnapshot
import Ringside

/// The demo's live table: per series and window, p50, p99, p99.9, max, rate, and drops per ring.
enum DemoTable {
    static func render(_ snapshot: Snapshot, address: String) -> String {
        let windows = snapshot.windowNanos.map { formatDuration($0) }
        let index = { (q: Double) in snapshot.quantiles.firstIndex(of: q) }
        var rows: [[String]] = [["ring", "metric", "labels", "window", "p50", "p99", "p99.9", "max", "rate/s"]]
        for series in snapshot.series {
            let metric = series.metric
            let labels = metric.labels.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
            for (window, stats) in zip(windows, series.windows) {
                var row = [series.ring, metric.name, labels, window]
                switch metric.kind {
                case .histogram:
                    // An empty window's figures are nil: `-`, no data.
                    func measure(_ steps: Int128?) -> String { steps.map { formatMeasure(Double($0), unit: metric.unit) } ?? "-" }
                    func quantile(_ q: Double) -> String {
                        guard let i = index(q), let values = stats.quantileValues, i < values.count else { return "-" }
                        return measure(values[i])
                    }
                    row += [
                        quantile(0.5), quantile(0.99), quantile(0.999), measure(stats.max),
                        String(Int(stats.valuesPerSecond(atNanos: snapshot.monotonicNanos, tickNanos: snapshot.tickNanos).rounded())),
                    ]
                case .counter:
                    row += ["-", "-", "-", "-", String(Int(stats.rate.rounded()))]
                case .gauge:
                    let value = series.lastValue.map { formatMeasure($0, unit: metric.unit) } ?? "-"
                    row += ["last \(value)", "-", "-", stats.gaugeMax.map { formatMeasure($0, unit: metric.unit) } ?? "-", "-"]
                }
                rows.append(row)
            }
        }
        var text = "Ringside demo: \(snapshot.series.count) series; Ctrl-C stops (the demo's ring is removed)\n\n"
        text += table(rows)
        text += "\nrings:\n"
        for ring in snapshot.rings {
            let active = ring.lanes.filter { $0.state == .active }.count
            text +=
                "  \(ring.name): \(ring.state.rawValue), pid \(ring.producerPID), \(active) threads recording "
                + "(\(ring.lanes.count) lanes), backlog \(ring.backlog), written \(ring.recordsTotal), "
                + "drained \(ring.drainedTotal), dropped \(ring.droppedTotal)\n"
        }
        let stats = snapshot.collector
        text +=
            "\ncollector: \(stats.recordsDrained) records drained, \(Int(stats.drainRate))/s, lag "
            + formatMeasure(stats.lagSeconds * 1e9, unit: .nanoseconds) + "\n"
        text += "http://\(address)/metrics for Prometheus, /latest for JSON, /health\n"
        if let bot = snapshot.rings.first(where: { $0.name == DemoSession.ringName }) {
            text += "the bot: " + DemoSession.switchHint(pid: bot.producerPID) + "\n"
        }
        return text
    }

    /// One line for logs when there is no terminal.
    static func summary(_ snapshot: Snapshot) -> String {
        let dropped = snapshot.rings.reduce(0) { $0 + $1.droppedTotal }
        var line =
            "\(snapshot.series.count) series, \(snapshot.collector.recordsDrained) records drained "
            + "(\(Int(snapshot.collector.drainRate))/s), \(dropped) dropped"
        if let p99 = snapshot.quantiles.firstIndex(of: 0.99),
            let fill = snapshot.series.first(where: { $0.metric.name == "order_fill_latency" }),
            let values = fill.windows.last?.quantileValues, p99 < values.count
        {
            line +=
                "; \(fill.metric.name){\(fill.metric.encodedLabels.split(separator: "\n").joined(separator: ","))} p99 "
                + formatMeasure(Double(values[p99]), unit: fill.metric.unit)
                + " over \(formatDuration(snapshot.windowNanos.last ?? 0))"
        }
        return line
    }

    private static func table(_ rows: [[String]]) -> String {
        guard let header = rows.first else { return "" }
        var widths = header.map(\.count)
        for row in rows { for (column, cell) in row.enumerated() { widths[column] = max(widths[column], cell.count) } }
        return rows.map { row in
            row.enumerated().map { column, cell in
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                return column < 4 ? cell + pad : pad + cell
            }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }
}
