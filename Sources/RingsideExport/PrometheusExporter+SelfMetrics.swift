import Ringside
import RingsideSnapshot

extension PrometheusExporter {
    // MARK: - Self-metrics

    /// A family of the collector's own, its samples and their lines.
    struct FixedFamily {
        let name: String
        let type: String
        let help: String
        /// The samples, and their lines in the text formats.
        let samples: Samples
        let lines: [UInt8]

        init(_ name: String, _ type: String, _ help: String, _ samples: Samples) {
            self.name = name
            self.type = type
            self.help = help
            self.samples = samples
            let text = TextBuffer(capacity: 256)
            for (labels, value) in samples { Self.appendLine(to: text, name: name, labels: labels, value: value) }
            lines = text.bytes
        }

        /// One sample's line in the text formats: `name{key="value",...} value`.
        static func appendLine(to text: TextBuffer, name: String, labels: [(String, String)], value: Double) {
            text.append(name)
            if !labels.isEmpty {
                text.append(UInt8(ascii: "{"))
                for (index, (key, value)) in labels.enumerated() {
                    if index > 0 { text.append(UInt8(ascii: ",")) }
                    text.append("\(key)=\"")
                    text.appendEscaped(value, inLabel: true)
                    text.append(UInt8(ascii: "\""))
                }
                text.append(UInt8(ascii: "}"))
            }
            text.append(UInt8(ascii: " "))
            text.appendNumber(value)
            text.append(UInt8(ascii: "\n"))
        }
    }

    /// The samples of a family: each a label set and its value.
    typealias Samples = [([(String, String)], Double)]
    /// Adds a family to the page: its name, type, help and samples.
    typealias AddFamily = (String, String, String, Samples) -> Void

    /// The collector's own families, in the page's order, but those with a line per series
    /// (`PerMetricFamily`), which the page writes with the series.
    static func selfMetrics(_ snapshot: Snapshot) -> [FixedFamily] {
        fixedFamilies { family in
            let attached = fileFamilies(snapshot, family)
            collectorFamilies(snapshot.collector, rings: attached, currentRealtimeNanos: snapshot.currentRealtimeNanos, family)
            queryFamilies(snapshot.collector.queries, family)
            sloFamilies(snapshot.slos, family)
        }
    }

    /// The families `add` adds, in its order.
    static func fixedFamilies(_ add: (AddFamily) -> Void) -> [FixedFamily] {
        var result: [FixedFamily] = []
        add { result.append(FixedFamily($0, $1, $2, $3)) }
        return result
    }

    /// The bot files' families (`ringside_ring_*`, `ringside_lane_*`); returns how many files are attached (not skipped).
    static func fileFamilies(_ snapshot: Snapshot, _ family: AddFamily) -> Int {
        let attached = snapshot.rings.filter { $0.state != .skipped }
        ringFamilies(snapshot.rings, attached: attached, family)
        laneFamilies(attached, family)
        return attached.count
    }

    /// Each ring's figures (`ringside_ring_*`): its producer, records and refusals; a skipped ring only as skipped.
    static func ringFamilies(_ rings: [RingSnapshot], attached: [RingSnapshot], _ family: AddFamily) {
        let subjects = attached.map { (labels: $0.labels, subject: $0) }
        RingSnapshot.producerFigures.addFamilies(of: subjects, family)
        family(
            "ringside_ring_skipped", "gauge", "1 for a ring the collector cannot read (see its log and /health)",
            rings.filter { $0.state == .skipped }.map { ([("ring", $0.name)], 1) })
        RingSnapshot.refusalFigures.addFamilies(of: subjects, family)
    }

    /// Each lane's figures (`ringside_lane_*`).
    static func laneFamilies(_ attached: [RingSnapshot], _ family: AddFamily) {
        let subjects = attached.flatMap { ring in
            ring.lanes.map { (labels: ring.labels + [("lane", String($0.index))], subject: $0) }
        }
        LaneSnapshot.figures.addFamilies(of: subjects, family)
    }

    /// Each SLO's figures (`ringside_slo_*`); its series carry its severity, which its alerts take
    /// (`severity=` after the rule).
    static func sloFamilies(_ slos: [SLOSnapshot], _ family: AddFamily) {
        SLOSnapshot.figures.addFamilies(of: slos.map { (labels: [("slo", $0.rule), ("severity", $0.severity)], subject: $0) }, family)
    }
}
