// ringside-collector: finds and drains every Ringside ring and exports what they say.
// The work lives in RingsideCollector, the demo in RingsideDemo; this file reads the command line and runs it.
import RingsideCollector
import RingsideDemo
import RingsideSystem
#if canImport(Glibc)
import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())

// `--demo` re-executes this binary as the synthetic bot, a separate process.
DemoSession.runBotIfAsked(arguments)

do {
    switch try CollectorOptions.invocation(arguments) {
    case .help:
        print(CollectorOptions.usage)
        exit(0)
    case .version:
        print(CollectorOptions.versionLine)
        exit(0)
    case let .run(options):
        let log = CollectorLog.standardError(format: options.logFormat)
        exit(options.demo ? DemoSession.runCollector(options, log: log) : CollectorDaemon.run(options, log: log))
    }
} catch {
    try? System.writeAll(2, "ringside-collector: \(error)\n")
    exit(2)
}
