// ringside-bench: arguments and output only; the benchmarks live in RingsideBench.
import Foundation
import RingsideBench
import RingsideCollector
import RingsideExport

// The drain rows' ring fillers are this program, run again with a hidden flag.
RingFiller.runIfAsked(Array(CommandLine.arguments.dropFirst()))
// So are the wake rows' holders of idle bots.
IdleBots.runIfAsked(Array(CommandLine.arguments.dropFirst()))

let command: BenchCommand
do {
    switch try BenchCommand.invocation(Array(CommandLine.arguments.dropFirst())) {
    case .help:
        print(BenchCommand.usage)
        exit(0)
    case .version:
        print(BenchCommand.versionLine)
        exit(0)
    case let .run(parsed):
        command = parsed
    }
} catch {
    FileHandle.standardError.write(Data("ringside-bench: \(error)\n".utf8))
    exit(2)
}

func progress(_ step: String) {
    if !command.json { FileHandle.standardError.write(Data("  running \(step)...\n".utf8)) }
}

do {
    #if DEBUG
    FileHandle.standardError.write(Data("ringside-bench: a debug build; its figures mean nothing (use -c release)\n".utf8))
    #endif
    for benchmark in command.benchmarks {
        switch benchmark {
        case .emit:
            let report = try EmitBenchmark.run(
                command.settings, only: command.rows.intersection(EmitBenchmark.allRowNames), progress: progress)
            print(command.json ? report.json.text : report.table)
            if let path = command.svgPath {
                let chart = PercentileChart(
                    title: "ringside-bench emit: ns per call by percentile",
                    subtitle: report.machine.line, rows: report.rows)
                do { try chart.svg.write(toFile: path, atomically: true, encoding: .utf8) } catch {
                    throw BenchError("writing \(path): \(error.localizedDescription)")
                }
            }
        case .collector:
            let report = try CollectorBenchmark.run(command.settings, only: command.rows, progress: progress)
            print(command.json ? report.json.text : report.table)
        case .scrape:
            let report = try ScrapeBenchmark.run(command.settings, progress: progress)
            print(command.json ? report.json.text : report.table)
        case .burst:
            let report = try BurstBenchmark.run(command.settings, progress: progress)
            print(command.json ? report.json.text : report.table)
        case .scale:
            let report = try ScaleBenchmark.run(command.scale, progress: progress)
            print(report.table)
        case .attack:
            let report = try AttackBenchmark.run(progress: progress)
            print(report.table)
            if !report.passed { exit(1) }
        case .gap:
            let report = try GapBenchmark.run(command.settings, progress: progress)
            print(command.json ? report.json.text : report.table)
        case .wake:
            let report = try WakeBenchmark.run(command.settings, only: command.rows, progress: progress)
            print(command.json ? report.json.text : report.table)
        case .soak:
            let report = try SoakBenchmark.run(command.soak) { line in
                if !command.json { FileHandle.standardError.write(Data("  \(line)\n".utf8)) }
            }
            print(command.json ? report.json.text : report.table)
            if !report.passed { exit(1) }
        }
    }
} catch {
    FileHandle.standardError.write(Data("ringside-bench: \(error)\n".utf8))
    exit(1)
}
