import CRingsideBench
import Foundation
import Ringside
import RingsideSystem

/// A process of its own that makes rings and fills them on request, as bots are processes of
/// their own; the benchmark starts it by running itself with a hidden flag (see `runIfAsked`).
/// A process may attach at most 64 bots (RS_MAX_BOTS_PER_PROCESS): the drain rows' 1 + 8 + 64
/// rings need several.
///
/// The parent asks over the child's stdin (a line `fill`) and reads the answer from its stdout
/// (the records written, or `error: ...`). The child ends, letting go of its rings, when its
/// stdin closes: when `stop()` closes it, or when the parent dies.
package final class RingFiller {
    static let flag = "--ring-filler"
    private let process = Process()
    private let requests: FileHandle
    private let answers: FileHandle
    private var pending = Data()
    private let what: String

    /// Starts the process, which makes `rings` rings of one lane of `capacity` records in
    /// `directory` (named bot-0, bot-1, ...), each with `MetricMix`'s metrics (its values picked
    /// by `valueMask`), and pins itself to `cpu` (unless -1).
    init(rings: Int, capacity: Int, valueMask: Int, directory: String, cpu: Int32) throws(BenchError) {
        what = "the ring filler of \(rings) rings of \(capacity) records in \(directory)"
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.arguments = [Self.flag, directory, String(rings), String(capacity), String(valueMask), String(cpu)]
        do {
            process.executableURL = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            try process.run()
        } catch {
            throw BenchError("starting \(what): \(error)")
        }
        requests = input.fileHandleForWriting
        answers = output.fileHandleForReading
        let ready = try answer()
        guard ready == "ready" else {
            stop()
            throw BenchError("\(what): \(ready)")
        }
    }

    /// Fills every ring until its lane is full; returns the records written.
    func fill() throws(BenchError) -> Int {
        do { try requests.write(contentsOf: Data("fill\n".utf8)) } catch { throw BenchError("\(what): \(error)") }
        let line = try answer()
        guard let written = Int(line) else { throw BenchError("\(what): \(line)") }
        return written
    }

    /// Ends the process (it lets go of its rings) and waits for it.
    func stop() {
        try? requests.close()
        process.waitUntilExit()
    }

    /// The child's next line.
    private func answer() throws(BenchError) -> String {
        while true {
            if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending = Data(pending[(newline + 1)...])
                return line
            }
            let more = answers.availableData
            guard !more.isEmpty else { throw BenchError("\(what) exited (status \(process.isRunning ? 0 : process.terminationStatus))") }
            pending += more
        }
    }

    // MARK: - The child

    /// Runs the filler and exits when `arguments` (without the program name) are the hidden
    /// flag's, which is how `init` starts it; returns otherwise.
    package static func runIfAsked(_ arguments: [String]) {
        guard arguments.first == flag else { return }
        guard arguments.count == 6, let rings = Int(arguments[2]), let capacity = Int(arguments[3]), let mask = Int(arguments[4]),
            let cpu = Int32(arguments[5])
        else {
            FileHandle.standardError.write(Data("ringside-bench \(flag): expected DIRECTORY RINGS CAPACITY VALUE-MASK CPU\n".utf8))
            exit(2)
        }
        let directory = arguments[1]
        func say(_ line: String) { try? System.writeAll(STDOUT_FILENO, line + "\n") }
        if cpu >= 0 { _ = rsb_pin_current_thread(cpu) }
        var made: [(Bot, MetricMix)] = []
        do {
            for index in 0..<rings {
                let bot = try Bot.attach("bot-\(index)", directory: directory, options: Bot.Options(laneCapacity: capacity))
                made.append((bot, try MetricMix(bot, valueMask: mask)))
            }
        } catch {
            say("error: making \(rings) rings of \(capacity) records in \(directory): \(error)")
            exit(1)
        }
        say("ready")
        var i = 0
        while let request = readLine(), request == "fill" {
            var total = 0
            for (ring, mix) in made {
                // Counters write no records (their cells count), so write until the ring is
                // full and count the records it took, not the calls.
                let lane = ring.currentThreadLane
                let before = lane.recordsWritten
                while lane.freeSlots > 0 {
                    mix.write(i)
                    i &+= 1
                }
                total += Int(lane.recordsWritten - before)
            }
            say(String(total))
        }
        made.removeAll()
        exit(0)
    }
}
