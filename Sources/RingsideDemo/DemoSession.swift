import Foundation
import Ringside
import RingsideCollector
import RingsideSnapshot
import RingsideSystem
#if canImport(Glibc)
import Glibc
#endif

/// `ringside-collector --demo`: the synthetic bot as a child process (this binary re-executed
/// with a hidden flag), and the live table (or a log line now and then).
package final class DemoSession: CollectorSidecar {
    /// The ring the demo bot writes.
    package static let ringName = "demo-bot"
    /// The hidden flag that makes the collector's binary run the demo bot instead.
    static let botFlag = "--demo-bot"

    private let bot: Process
    private let directory: RingDirectory
    private let address: String
    private let log: CollectorLog
    private let isTerminal = System.isatty(1)
    private var lastDrawNanos: UInt64 = 0

    private struct StartError: Error, CustomStringConvertible {
        let description: String
    }

    /// Starts the bot writing into `directory`; `address` is the collector's, for the table.
    package init(directory: RingDirectory, address: String, log: CollectorLog) throws {
        self.directory = directory
        self.address = address
        self.log = log
        bot = Process()
        do {
            bot.executableURL = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            bot.arguments = [Self.botFlag, Self.ringName, "--dir", directory.path]
            try bot.run()
        } catch {
            throw StartError(description: "cannot start the demo bot: \(error)")
        }
        let pid = bot.processIdentifier
        log(
            "demo: started the synthetic bot (pid \(pid)) writing ring \(Self.ringName)"
                + (isTerminal ? "" : "; a summary is logged every 10 s") + "; " + Self.switchHint(pid: pid))
    }

    /// How to slow the bot's fills (`SlowFills`), as the log and the table say it.
    static func switchHint(pid: Int32) -> String {
        "kill -USR1 \(pid) slows its fills \(Int(SlowFills.factor))-fold for \(SlowFills.seconds) s "
            + "(an incident to capture), kill -USR2 \(pid) ends it"
    }

    /// The demo's run of the collector: `options` with the bot beside it.
    package static func runCollector(_ options: CollectorOptions, log: CollectorLog) -> Int32 {
        CollectorDaemon.run(options, log: log) { address, log in
            try DemoSession(directory: options.directory, address: address, log: log)
        }
    }

    /// Runs the bot and exits when `arguments` (without the program name) are the hidden flag's,
    /// which is how the session starts it; returns otherwise.
    package static func runBotIfAsked(_ arguments: [String]) {
        guard arguments.first == botFlag, arguments.count >= 2 else { return }
        // The collector blocks these to take them synchronously; the bot is stopped by them.
        System.pthreadSigmask(SIG_UNBLOCK, [SIGINT, SIGTERM])
        let directory = arguments.count >= 4 && arguments[2] == "--dir" ? arguments[3] : nil
        do {
            try DemoBot.run(ring: arguments[1], directory: directory)
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("ringside-collector demo bot: \(error)\n".utf8))
            exit(1)
        }
    }

    package func tick(_ snapshot: Snapshot, nowNanos now: UInt64) {
        let interval: UInt64 = isTerminal ? 1_000_000_000 : 10_000_000_000
        guard now &- lastDrawNanos >= interval else { return }
        lastDrawNanos = now
        if isTerminal {
            FileHandle.standardOutput.write(Data(("\u{1B}[H\u{1B}[2J" + DemoTable.render(snapshot, address: address)).utf8))
        } else {
            log("demo: " + DemoTable.summary(snapshot))
        }
        if !bot.isRunning { log("demo: the bot exited with status \(bot.terminationStatus)") }
    }

    package func stop() {
        if bot.isRunning { bot.terminate() }
        bot.waitUntilExit()
    }

    /// The demo's ring is the demo's own: remove it once the collector let go of it.
    package func finish() {
        try? directory.remove(Self.ringName)
    }
}
