import Ringside
import RingsideSnapshot

extension PrometheusExporter {
    /// The collector's families with a line per series: its records dropped, and (a histogram's)
    /// calls gathered, and the dropped values' sum and largest; values clamped, and what an
    /// operator switched. They change only when a series does (`SeriesContentKey`), so they are
    /// written in the page's series' section, a series at a time as the series' own lines are:
    /// at a million series they are 4 million lines, never held as samples.
    enum PerMetricFamily: Int, CaseIterable {
        case dropped, sampled, droppedSum, droppedMax, clamped, exemplarsRefused, enabled, sampleEvery

        var name: String {
            switch self {
            case .dropped: "ringside_metric_records_dropped_total"
            case .sampled: "ringside_metric_records_sampled_total"
            case .droppedSum: "ringside_metric_dropped_values_total"
            case .droppedMax: "ringside_metric_dropped_max"
            case .clamped: "ringside_metric_clamped_total"
            case .exemplarsRefused: "ringside_metric_exemplars_refused_total"
            case .enabled: "ringside_metric_enabled"
            case .sampleEvery: "ringside_metric_sample_every"
            }
        }

        var type: String {
            switch self {
            case .dropped, .sampled, .droppedSum, .clamped, .exemplarsRefused: "counter"
            case .droppedMax, .enabled, .sampleEvery: "gauge"
            }
        }

        var help: String {
            switch self {
            case .dropped: "Records of one metric and label set that were dropped (full lanes, or threads without a lane)"
            // Counted in the histogram's count, sum and maximum exactly (SAMPLING in ringside.h).
            case .sampled:
                "Histogram calls of one metric and label set gathered rather than written while a lane filled: counted, summed and placed all the same"
            case .droppedSum:
                "The sum of the values of a histogram's dropped records, in base units (seconds for times): what full lanes hid"
            case .droppedMax:
                "The largest value of a histogram's dropped records, in base units (seconds for times): what full lanes hid"
            case .clamped:
                "Values of a histogram or counter its producers could not take as given: clamped to what it holds (below 0, too large, infinite), rounded to its step, or not recorded (NaN, not a number)"
            case .exemplarsRefused:
                "Exemplars of a histogram its producers refused (malformed, too long, or given to a signed histogram): the values were recorded without them"
            case .enabled:
                "0 while the operator switched a metric or its bot off, 1 while it records under the operator's sampling (ringside-dump control); absent: as registered"
            case .sampleEvery:
                "A histogram writes 1 call in this many (absent: every call): its registered sample_every times the operator's (ringside-dump control); its count, sum and maximum stay exact"
            }
        }

        /// The family's value for `series`; nil when the series has no line in it.
        func value(of series: SeriesSnapshot) -> Double? {
            let metric = series.metric
            switch self {
            // A line for each of 100,000 series would double the page for what is nearly always
            // 1: only the series an operator switched, and the histograms that write fewer than every call.
            case .enabled: return series.control != 0 ? (series.isEnabled ? 1 : 0) : nil
            case .sampleEvery:
                let every = UInt64(metric.sampleEvery) * series.controlSampleEvery
                return metric.kind == .histogram && every > 1 ? Double(every) : nil
            // Metrics that take values other than whole units can be handed one they cannot hold in
            // any language; the others only by a binding that takes any number (Python): a line once it did.
            case .clamped:
                return metric.hasSteps || series.clampedValues > 0 ? Double(series.clampedValues) : nil
            case .exemplarsRefused: return series.exemplarsRefused > 0 ? Double(series.exemplarsRefused) : nil
            case .dropped: return metric.kind != .counter ? Double(series.droppedRecords) : nil
            case .sampled: return metric.kind == .histogram ? Double(series.sampledRecords) : nil
            // A counter never goes back: a signed histogram's dropped values' sum may (it is in /latest).
            case .droppedSum:
                return metric.kind == .histogram && !metric.isSigned ? metric.inBaseUnits(Double(series.droppedSum)) : nil
            case .droppedMax: return metric.kind == .histogram ? metric.inBaseUnits(Double(series.droppedMax)) : nil
            }
        }

        /// A series' labels in these families: its ring, its metric's name, and its own labels
        /// as one value (`key=value,key=value`).
        static func labels(of series: SeriesSnapshot) -> [(String, String)] {
            let labels = series.metric.labels.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
            return [("ring", series.ring), ("metric", series.metric.name), ("labels", labels)]
        }
    }
}
