// ringside-collector: finds and drains every Ringside ring and exports what they say.
// The work lives in RingsideCollector; this file parses the command line and runs it.
import RingsideCollector
import RingsideDemo
#if canImport(Glibc)
import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())

func printError(_ line: String) {
    let text = line + "\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
}

// `--demo` re-executes this binary as the synthetic bot, a separate process.
if arguments.first == CollectorDaemon.demoBotFlag, arguments.count >= 2 {
    var unblocked = sigset_t()
    sigemptyset(&unblocked)
    sigaddset(&unblocked, SIGINT)
    sigaddset(&unblocked, SIGTERM)
    pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
    let directory = arguments.count >= 4 && arguments[2] == "--dir" ? arguments[3] : nil
    do {
        try DemoBot.run(ring: arguments[1], directory: directory)
        exit(0)
    } catch {
        printError("ringside-collector demo bot: \(error)")
        exit(1)
    }
}

do {
    switch try CollectorOptions.invocation(arguments) {
    case .help:
        print(CollectorOptions.usage)
        exit(0)
    case .version:
        print(CollectorOptions.versionLine)
        exit(0)
    case let .run(options):
        exit(CollectorDaemon.run(options, log: .standardError(format: options.logFormat)))
    }
} catch {
    printError("ringside-collector: \(error)")
    exit(2)
}
