import RingsideCommandLine
import CRingside
import Ringside
import RingsideJSON
import RingsideText

/// `ringside-dump control`: the operator's switches of a running bot (CONTROL in ringside.h): a
/// metric's recording off or on, a histogram sampled 1 in N, the whole bot off or on. It writes
/// the bot's file and every worker file of the bot (`<bot>@...`), each word in one atomic step; a
/// worker file made later takes the bot file's words as it registers its metrics. Without a
/// change, it shows the switches.
enum ControlCommand {
    /// What to change.
    enum Change: Equatable {
        case metricOff
        case metricOn
        case sampleEvery(UInt32)
        case botOff
        case botOn
    }

    /// The metrics of one file a change applies to: `metric` (every label set, or those with
    /// `labels`), or every metric when nil.
    static func selected(_ metrics: [MetricDescriptor], metric: String?, labels: [String: String]) -> [MetricDescriptor] {
        metrics.filter { candidate in
            guard let metric else { return true }
            return candidate.name == metric && labels.allSatisfy { candidate.labelDictionary[$0.key] == $0.value }
        }
    }

    /// 1 in `every` as the word keeps it: n with 2^n >= every (100 is 1 in 128), at most 2^15.
    static func sampleLog2(_ every: UInt32) -> UInt32 {
        var n: UInt32 = 0
        while n < RS_WEIGHT_LOG2_MAX && (UInt32(1) << n) < every { n += 1 }
        return n
    }

    /// A word for people: `on`, `1 in 128`, `off`, `bot off (1 in 128)`.
    static func describe(_ word: UInt32) -> String {
        let n = min(word & RS_CONTROL_SAMPLE, RS_WEIGHT_LOG2_MAX)
        let sampling = n == 0 ? "on" : "1 in \(1 << n)"
        let offs = [word & RS_CONTROL_OFF != 0 ? "off" : nil, word & RS_CONTROL_BOT_OFF != 0 ? "bot off" : nil].compactMap { $0 }
        return offs.isEmpty ? sampling : offs.joined(separator: ", ") + (n == 0 ? "" : " (\(sampling))")
    }

    static func run(
        _ bot: String, metric: String?, labels: [String: String], change: Change?, _ context: DumpContext
    ) -> Int32 {
        if WorkerRing(bot) != nil {
            context.console.printError("ringside-dump control: \(bot) is a worker's file: name its bot (before the @)")
            return ExitStatus.usage
        }
        // The bot's file first (a worker made meanwhile copies its words), then its workers'.
        let names: [String]
        do throws(RingError) {
            names = [bot] + (try context.ringNames()).filter { WorkerRing($0)?.bot == bot }.sorted()
        } catch { return context.fail(error) }
        var rows: [(file: String, metric: MetricDescriptor, before: UInt32, after: UInt32)] = []
        var matched = false
        for name in names {
            let control: RingControl
            do throws(RingError) { control = try RingControl(name, directory: context.directory) } catch {
                if name == bot { return context.fail(error) }
                context.console.printError("ringside-dump control: worker file \(name) left as it is: \(error)")
                continue
            }
            let chosen = selected(control.metrics, metric: metric, labels: labels)
            let before = chosen.map { control.control(of: Int($0.index)) }
            if change == .botOff || change == .botOn {
                do throws(RingError) { try control.setBotOff(change == .botOff) } catch { return context.fail(error) }
            }
            for (described, before) in zip(chosen, before) {
                matched = true
                let index = Int(described.index)
                switch change {
                case .metricOff: control.update(metric: index, clear: 0, set: RS_CONTROL_OFF)
                case .metricOn: control.update(metric: index, clear: RS_CONTROL_OFF | RS_CONTROL_SAMPLE, set: 0)
                case .sampleEvery(let every):
                    guard described.kind == .histogram else { break }
                    control.update(metric: index, clear: RS_CONTROL_SAMPLE, set: sampleLog2(every))
                case .botOff, .botOn, nil: break
                }
                rows.append((name, described, before, control.control(of: index)))
            }
        }
        if let metric, !matched {
            context.console.printError(
                "ringside-dump control: bot \(bot) has no metric \(metric)\(labels.isEmpty ? "" : " with those labels")")
            return ExitStatus.failure
        }
        if context.json {
            context.console.print(
                JSON.object([
                    ("bot", .string(bot)),
                    (
                        "metrics",
                        .array(
                            rows.map { row in
                                .object([
                                    ("file", .string(row.file)), ("metric", .string(row.metric.name)), ("labels", row.metric.labelsJSON),
                                    ("kind", .string(row.metric.kind.description)), ("before", .string(describe(row.before))),
                                    ("after", .string(describe(row.after))),
                                ])
                            })
                    ),
                ]).text)
            return ExitStatus.success
        }
        var table = TextTable(["FILE", "METRIC", "KIND"] + (change == nil ? ["NOW"] : ["BEFORE", "AFTER"]), right: [])
        for row in rows {
            table.add(
                [row.file, row.metric.displayName, row.metric.kind.description, describe(row.before)]
                    + (change == nil ? [] : [describe(row.after)]))
        }
        table.lines.forEach { context.console.print($0) }
        return ExitStatus.success
    }
}

// MARK: - Its command line

extension ControlCommand: DumpCommand {
    static let name = "control"
    static var options: OptionSpec {
        OptionSpec(
            flags: ["--off", "--on", "--bot-off", "--bot-on"], valued: ["--metric", "--label", "--sample-every"], repeatable: ["--label"])
    }

    static let usage = """
        usage: ringside-dump control BOT [--metric NAME [--label KEY=VALUE]...]
                                    [--off | --on | --sample-every N | --bot-off | --bot-on] [--json]

        The operator's switches of a running bot, taking effect at each thread's next call, in
        every process of the bot (its file and every worker file; a worker started later takes
        the bot file's switches): --off stops recording a metric (every metric without
        --metric), --on records it again as registered (sampling back to 1), --sample-every N
        writes 1 histogram call in N (rounded up to a power of two, at most 32768; the others
        are counted, summed and their largest kept exactly, while a collector reads them),
        --bot-off / --bot-on switch the whole bot. Without a change, shows the switches. They
        stay in the bot's file: a restarted bot keeps them until they are switched back.
        The collector exports them (ringside_metric_enabled, ringside_metric_sample_every)
        and logs each change.
        """

    static func run(parsing arguments: DumpArguments, _ context: DumpContext) throws(UsageError) -> Int32 {
        let bot = try arguments.ring()
        let change = try change(arguments)
        let metric = arguments.value("--metric")
        if (change == .botOff || change == .botOn) && metric != nil {
            throw arguments.error("--bot-off and --bot-on switch the whole bot: no --metric")
        }
        var labels: [String: String] = [:]
        for label in arguments.all("--label") {
            guard metric != nil else { throw arguments.error("--label narrows --metric: give --metric too") }
            guard let equals = label.firstIndex(of: "="), equals != label.startIndex else {
                throw arguments.error("--label \(label): expected KEY=VALUE")
            }
            labels[String(label[..<equals])] = String(label[label.index(after: equals)...])
        }
        return run(bot, metric: metric, labels: labels, change: change, context)
    }

    /// The change asked for (one at most); nil: show the switches.
    private static func change(_ arguments: DumpArguments) throws(UsageError) -> Change? {
        var changes: [Change] = []
        if arguments.has("--off") { changes.append(.metricOff) }
        if arguments.has("--on") { changes.append(.metricOn) }
        if arguments.has("--bot-off") { changes.append(.botOff) }
        if arguments.has("--bot-on") { changes.append(.botOn) }
        if let n = try arguments.count("--sample-every", 1...(1 << Int(RS_WEIGHT_LOG2_MAX))) { changes.append(.sampleEvery(UInt32(n))) }
        guard changes.count <= 1 else {
            throw arguments.error("one change at a time (--off, --on, --sample-every, --bot-off or --bot-on)")
        }
        return changes.first
    }
}
