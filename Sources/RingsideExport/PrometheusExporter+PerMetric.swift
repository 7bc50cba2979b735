import Ringside
import RingsideSnapshot

extension PrometheusExporter {
    /// The collector's families with a line per series: its records dropped, and (a histogram's)
    /// calls gathered, and the dropped values' sum and largest. They change only when a series does
    /// (`SeriesContentKey`), so a renderer keeps them.
    static func perMetricFamilies(_ snapshot: Snapshot) -> [FixedFamily] {
        var drops: Samples = []
        var sampled: Samples = []
        var droppedSums: Samples = []
        var droppedMaxima: Samples = []
        var clamped: Samples = []
        var enabled: Samples = []
        var sampleEvery: Samples = []
        for series in snapshot.series {
            let labels = series.metric.labels.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
            let names = [("ring", series.ring), ("metric", series.metric.name), ("labels", labels)]
            // Only the series an operator switched, and the histograms that write fewer than every
            // call: a line for each of 100,000 series would double the page for what is nearly always 1.
            if series.control != 0 { enabled.append((names, series.isEnabled ? 1 : 0)) }
            let every = UInt64(series.metric.sampleEvery) * series.controlSampleEvery
            if series.metric.kind == .histogram, every > 1 { sampleEvery.append((names, Double(every))) }
            // Only metrics that take values other than whole units can be handed one they cannot hold.
            if series.metric.hasSteps { clamped.append((names, Double(series.clampedValues))) }
            guard series.metric.kind != .counter else { continue }
            drops.append((names, Double(series.droppedRecords)))
            guard series.metric.kind == .histogram else { continue }
            sampled.append((names, Double(series.sampledRecords)))
            // A counter never goes back: a signed histogram's dropped values' sum may (it is in /latest).
            if !series.metric.isSigned { droppedSums.append((names, series.metric.inBaseUnits(Double(series.droppedSum)))) }
            droppedMaxima.append((names, series.metric.inBaseUnits(Double(series.droppedMax))))
        }
        return [
            FixedFamily(
                perMetricFamilyNames[0], "counter",
                "Records of one metric and label set that were dropped (full lanes, or threads without a lane)", drops),
            // Counted in the histogram's count, sum and maximum exactly (SAMPLING in ringside.h).
            FixedFamily(
                perMetricFamilyNames[1], "counter",
                "Histogram calls of one metric and label set gathered rather than written while a lane filled: counted, summed and placed all the same",
                sampled),
            FixedFamily(
                perMetricFamilyNames[2], "counter",
                "The sum of the values of a histogram's dropped records, in base units (seconds for times): what full lanes hid",
                droppedSums),
            FixedFamily(
                perMetricFamilyNames[3], "gauge",
                "The largest value of a histogram's dropped records, in base units (seconds for times): what full lanes hid",
                droppedMaxima),
            FixedFamily(
                perMetricFamilyNames[4], "counter",
                "Values of a histogram or counter with a resolution or signed values that its producers clamped to what it holds, or did not record (NaN)",
                clamped),
            FixedFamily(
                perMetricFamilyNames[5], "gauge",
                "0 while the operator switched a metric or its bot off, 1 while it records under the operator's sampling (ringside-dump control); absent: as registered",
                enabled),
            FixedFamily(
                perMetricFamilyNames[6], "gauge",
                "A histogram writes 1 call in this many (absent: every call): its registered sample_every times the operator's (ringside-dump control); its count, sum and maximum stay exact",
                sampleEvery),
        ]
    }

    static let perMetricFamilyNames = [
        "ringside_metric_records_dropped_total", "ringside_metric_records_sampled_total", "ringside_metric_dropped_values_total",
        "ringside_metric_dropped_max", "ringside_metric_clamped_total", "ringside_metric_enabled", "ringside_metric_sample_every",
    ]
}
