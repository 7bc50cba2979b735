// `worker-pool`: a pool of forked workers that keeps recycling them, as a pre-forking server does
// (gunicorn's --max-requests), for the soak (`ringside-bench soak`).
import CRingside
import Foundation
import Ringside

/// `worker-pool`: at nice NICE (`--nice`; its workers inherit it), registers histogram
/// "pool_values" and counter "pool_increments", prints "attached PID", then keeps WORKERS forked
/// workers of the bot running for SECONDS (or until SIGTERM): each records 1 ... COUNT into the histogram, incrementing the counter after each
/// record, RATE calls a second (in millisecond batches), tells the parent its calls and what its
/// lane wrote and dropped meanwhile (one line into a pipe, a single write), and exits; the parent starts
/// another in its place at once. At the end no worker is started, those running finish, and it
/// prints "workers N attempts A written W dropped D increments I", summed over every worker.
func workerPool(_ bot: Bot, options: [String: String], count: UInt64) throws {
    let workers = max(1, Int(options["workers"] ?? "4") ?? 4)
    let seconds = Double(options["seconds"] ?? "10") ?? 10
    let rate = max(1, Double(options["rate"] ?? "20000") ?? 20_000)
    let calls = max(1, count)
    if let niceness = options["nice"].flatMap(Int32.init) { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness) }
    let values = try bot.histogram("pool_values", unit: .none)
    let increments = try bot.counter("pool_increments")
    // SIGTERM ends the run in order, as in `blast`: it stays pending, and the loop looks for it.
    var terminate = sigset_t()
    sigemptyset(&terminate)
    sigaddset(&terminate, SIGTERM)
    sigprocmask(SIG_BLOCK, &terminate, nil)
    var reports: [Int32] = [-1, -1]
    guard pipe(&reports) == 0 else { fail("pipe failed") }
    _ = fcntl(reports[0], F_SETFL, fcntl(reports[0], F_GETFL) | O_NONBLOCK)
    FileHandle.standardOutput.write(Data("attached \(getpid())\n".utf8))

    var totals = PoolTotals()
    var pending = Data()
    /// Reads the reports waiting in the pipe, whole lines only.
    func collect() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let got = read(reports[0], &buffer, buffer.count)
            guard got > 0 else { break }
            pending.append(contentsOf: buffer[0..<got])
        }
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            totals.add(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
            pending.removeSubrange(pending.startIndex...newline)
        }
    }
    func startWorker() -> pid_t {
        let pid = fork()
        guard pid == 0 else { return pid }
        close(reports[0])
        // The lane first (the worker's file made now), and what it held: a worker whose pid was a
        // gone worker's, whose file the collector has not removed yet, continues that file, and
        // may get its lane, with its counts.
        guard let lane = try? bot.claimCurrentThreadLane() else { _exit(4) }
        let before = (written: lane.recordsWritten, dropped: lane.recordsDropped)
        let batch = max(1, UInt64(rate / 1000))
        let start = rs_clock_precise_ns()
        var value: UInt64 = 0
        while value < calls {
            let end = min(calls, value + batch)
            while value < end {
                value += 1
                values.record(value)
                increments.increment()
            }
            let due = start + UInt64(Double(value) / rate * 1e9)
            let now = rs_clock_precise_ns()
            if due > now { usleep(useconds_t((due - now) / 1000)) }
        }
        let line = Array("\(calls) \(lane.recordsWritten - before.written) \(lane.recordsDropped - before.dropped) \(calls)\n".utf8)
        _ = line.withUnsafeBytes { write(reports[1], $0.baseAddress, $0.count) }  // under PIPE_BUF: one piece
        _exit(0)
    }

    let end = rs_clock_precise_ns() + UInt64(seconds * 1e9)
    var running = 0, started: UInt64 = 0
    var stopping = false
    while true {
        while !stopping && running < workers {
            guard startWorker() > 0 else { fail("fork failed: \(String(cString: strerror(errno)))") }
            running += 1
            started += 1
        }
        if running == 0 { break }
        var status: Int32 = 0
        let reaped = waitpid(-1, &status, 0)
        if reaped > 0 {
            running -= 1
            if status != 0 { totals.failed += 1 }
        } else if errno != EINTR {
            fail("waitpid: \(String(cString: strerror(errno)))")
        }
        collect()
        var signals = sigset_t()
        sigpending(&signals)
        if sigismember(&signals, SIGTERM) == 1 || rs_clock_precise_ns() >= end { stopping = true }
    }
    collect()
    guard totals.failed == 0, totals.workers == started else {
        fail("of \(started) workers, \(totals.failed) failed and \(totals.workers) reported")
    }
    print(
        "workers \(totals.workers) attempts \(totals.attempts) written \(totals.written) dropped \(totals.dropped) increments \(totals.increments)"
    )
}

/// The workers' reports, summed.
struct PoolTotals {
    var workers: UInt64 = 0, attempts: UInt64 = 0, written: UInt64 = 0, dropped: UInt64 = 0, increments: UInt64 = 0
    var failed = 0

    /// Adds one report: "ATTEMPTS WRITTEN DROPPED INCREMENTS".
    mutating func add(_ line: String) {
        let numbers = line.split(separator: " ").compactMap { UInt64($0) }
        guard numbers.count == 4 else { fail("a worker's report is not 4 numbers: \(line)") }
        workers += 1
        attempts += numbers[0]
        written += numbers[1]
        dropped += numbers[2]
        increments += numbers[3]
    }
}
