// The /metrics page's plan: the snapshot's series grouped by metric, and the families they and
// the collector's own figures fall into, each claimed by one type. The text and protobuf writers
// (PrometheusPage+Text.swift, PrometheusPage+Protobuf.swift) follow it.

import Ringside
import RingsideSnapshot

/// One /metrics page, written in one pass.
///
/// Series of one metric (name, unit and kind) across rings export the same families, so they are
/// grouped first; each family then gets its HELP and TYPE once, followed by the lines of every
/// group that exports it. Nothing is rendered twice and nothing is allocated per line: a page of
/// 10,000 series is some 200,000 lines, written in slices on a few threads (see `write`, in
/// PrometheusPage+Text.swift; `writeProtobuf` is in PrometheusPage+Protobuf.swift).
struct PrometheusPage {
    /// The families a series' lines fall into.
    enum Part {
        case whole, windowed, windowMax, windowMin, rate
        /// A signed histogram's windows on its OpenMetrics page: three gauges (its quantiles, sums
        /// and counts), not a summary, whose quantiles and sums OpenMetrics forbids to be negative.
        case windowedQuantiles, windowedSum, windowedCount

        var help: HelpRole {
            switch self {
            case .whole: return .metric
            case .windowed, .windowedQuantiles: return .windowed
            case .windowedSum: return .windowedSum
            case .windowedCount: return .windowedCount
            case .windowMax: return .windowMax
            case .windowMin: return .windowMin
            case .rate: return .rate
            }
        }
    }

    /// The series of one metric across rings.
    struct MetricGroup {
        let names: PrometheusExporter.FamilyNames
        let metric: MetricDescriptor
        var members: [Int] = []
    }

    enum Member {
        /// One part of every series of a group.
        case group(Int, Part)
        /// The collector's own figures: samples, and their lines rendered already.
        case fixed(PrometheusExporter.FixedFamily)
        /// The collector's line for each series in one of its per-metric families, written as
        /// the series' own lines are.
        case perMetric(PrometheusExporter.PerMetricFamily)
    }

    struct Family {
        let name: String
        let type: String
        /// The registered name of the metric whose series claimed the family; nil for the collector's own.
        let metric: String?
        let help: String
        var members: [Member] = []
    }

    let snapshot: Snapshot
    private(set) var groups: [MetricGroup] = []
    private(set) var families: [Family] = []
    private var familyIndex: [String: Int] = [:]
    /// Series left out because another metric claimed one of their family names with another type.
    private(set) var conflicts = 0
    /// The families of the page's first section: those the series' groups claimed, then the
    /// collector's per metric (`PerMetricFamily`), which change only when a series does. The
    /// collector's other families follow, each depending on the snapshot's other figures.
    private(set) var seriesFamilyCount = 0
    /// Whether a family of the collector's own joined one the series claimed (a bot's metric
    /// named as it, with its type): the page then does not split into `sections`.
    private var ownJoinedSeries = false

    /// The plan of `snapshot`'s page, with the `process_*` families of `process`; `openMetrics`:
    /// of its OpenMetrics page, whose signed histograms export other families (see `FamilyNames`);
    /// without `collectorFamilies`, a per-bot page's: the series and their files' families alone
    /// (see `PrometheusRenderer.render(_:bots:format:)`).
    init(_ snapshot: Snapshot, process: ProcessMetrics? = nil, openMetrics: Bool = false, collectorFamilies: Bool = true) {
        self.snapshot = snapshot
        var groupIndex: [GroupKey: Int] = [:]
        snapshot.series.forEachInPlace { position, series in
            let metric = series.pointee.metric
            let key = GroupKey(name: metric.name, unit: metric.unit, kind: metric.kind, isSigned: metric.isSigned)
            if let known = groupIndex[key] {
                groups[known].members.append(position)
            } else {
                groupIndex[key] = groups.count
                groups.append(MetricGroup(names: PrometheusExporter.FamilyNames(metric), metric: metric, members: [position]))
            }
        }
        for (number, group) in groups.enumerated() {
            let parts = openMetrics ? group.names.openMetricsParts : group.names.parts
            guard claim(parts.map { ($0.family, $0.type) }) else {
                conflicts += group.members.count
                continue
            }
            guard keepApart(number, exporting: parts[0].family) else { continue }
            for part in parts {
                add(
                    .group(number, part.part), to: part.family, type: part.type, metric: group.metric.name,
                    help: PrometheusExporter.help(part.part.help, of: group.metric))
            }
        }
        seriesFamilyCount = families.count
        // The collector's families with a line per series (its drops and samples per metric) come
        // next, in the series' section: they change only when a series does, and at a million
        // series they are 4 million lines, too many to write and deflate again for every snapshot.
        for family in PrometheusExporter.PerMetricFamily.allCases {
            addOwn(.perMetric(family), name: family.name, type: family.type, help: family.help)
        }
        seriesFamilyCount = families.count
        guard collectorFamilies else {
            for family in PrometheusExporter.botFamilies(snapshot) { addFixed(family) }
            return
        }
        for family in PrometheusExporter.selfMetrics(snapshot) { addFixed(family) }
        for family in PrometheusExporter.threadHealthFamilies(snapshot) { addFixed(family) }
        addFixed(PrometheusExporter.buildInfo)
        for family in process?.families() ?? [] { addFixed(family) }
        addFixed(
            PrometheusExporter.FixedFamily(
                "ringside_collector_series_conflicts", "gauge",
                "Series left out because another metric claimed their family name "
                    + "with another type, or under another name (lat_us in us and lat in ns both export lat_seconds)",
                [([], Double(conflicts))]))
    }

    private struct GroupKey: Hashable {
        let name: String
        let unit: MetricUnit
        let kind: MetricKind
        /// A signed histogram's windows are other families' on an OpenMetrics page: a group of its own.
        let isSigned: Bool
    }

    /// Whether every family is free or already of the same type.
    private func claim(_ wanted: [(family: String, type: String)]) -> Bool {
        wanted.allSatisfy { want in familyIndex[want.family].map { families[$0].type == want.type } ?? true }
    }

    /// Leaves out of group `number` the series of rings whose series of another registered name
    /// export `family` already (`lat_us` in us beside `lat` in ns, `orders` beside `orders_total`):
    /// two names share a family across bots, never within one, where their series would repeat.
    /// Counts them; false when none is left. Only a family another name claimed pays for the look.
    private mutating func keepApart(_ number: Int, exporting family: String) -> Bool {
        guard let known = familyIndex[family], let owner = families[known].metric, owner != groups[number].metric.name else { return true }
        var taken: Set<String> = []
        for case let .group(claimant, _) in families[known].members {
            for position in groups[claimant].members { taken.insert(snapshot.series[position].ring) }
        }
        let members = groups[number].members
        groups[number].members = members.filter { !taken.contains(snapshot.series[$0].ring) }
        conflicts += members.count - groups[number].members.count
        return !groups[number].members.isEmpty
    }

    private mutating func add(
        _ member: Member, to family: String, type: String, metric: String? = nil, help: @autoclosure () -> String
    ) {
        if let known = familyIndex[family] {
            families[known].members.append(member)
        } else {
            familyIndex[family] = families.count
            families.append(Family(name: family, type: type, metric: metric, help: help(), members: [member]))
        }
    }

    /// The page's families in two runs, the series' and the collector's own, that written one
    /// after the other make the page; nil when a family of the collector's own joined one of the
    /// series' (see `ownJoinedSeries`).
    var sections: (series: Range<Int>, own: Range<Int>)? {
        ownJoinedSeries ? nil : (0..<seriesFamilyCount, seriesFamilyCount..<families.count)
    }

    private mutating func addFixed(_ family: PrometheusExporter.FixedFamily) {
        addOwn(.fixed(family), name: family.name, type: family.type, help: family.help)
    }

    /// Adds a family of the collector's own, unless a series' family of another type has its name.
    private mutating func addOwn(_ member: Member, name: String, type: String, help: String) {
        guard claim([(name, type)]) else {
            conflicts += 1
            return
        }
        if let known = familyIndex[name], known < seriesFamilyCount { ownJoinedSeries = true }
        add(member, to: name, type: type, help: help)
    }
}
