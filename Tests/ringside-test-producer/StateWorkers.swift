// The modes that feed the collector's totals and state (issue 45): a worker that adds a chosen
// amount, and a pool that recycles its workers at a steady rate.
import CRingside
import Foundation
import Ringside

/// `worker`: a worker of the bot (attached with `worker: true`). Adds ADD to counter
/// "worker_total" (when ADD > 0); then THREADS threads each record VALUE once into histogram
/// "worker_values" (sampleEvery W): a thread's first call is written, so each is one record
/// standing for W calls. Prints "worker PID" and exits.
func stateWorker(_ bot: Bot, options: [String: String]) throws {
    let add = UInt64(options["add"] ?? "0") ?? 0
    let threads = Int(options["threads"] ?? "0") ?? 0
    let value = UInt64(options["value"] ?? "1") ?? 1
    let every = UInt32(options["sample-every"] ?? "1") ?? 1
    let total = try bot.counter("worker_total")
    if add > 0 { total.increment(by: add) }
    if threads > 0 {
        let values = try bot.histogram("worker_values", unit: .none, sampleEvery: every)
        let done = DispatchGroup()
        for _ in 0..<threads {
            done.enter()
            Thread {
                values.record(value)
                bot.releaseCurrentThreadLane()
                done.leave()
            }.start()
        }
        done.wait()
    }
    print("worker \(getpid())")
}

/// `worker-churn`: registers counter "churn_total" and histogram "churn_values", then for
/// SECONDS forks RATE children a second, one after another, each a worker of the bot that
/// increments the counter once, records its number into the histogram and exits; prints
/// "workers N" once the last is reaped.
func workerChurn(_ bot: Bot, options: [String: String]) throws {
    let rate = Double(options["rate"] ?? "20") ?? 20
    let seconds = Double(options["seconds"] ?? "5") ?? 5
    let total = try bot.counter("churn_total")
    let values = try bot.histogram("churn_values", unit: .none)
    let start = rs_clock_precise_ns()
    let count = Int(rate * seconds)
    for index in 0..<count {
        let due = start + UInt64(Double(index) / rate * 1e9)
        let now = rs_clock_precise_ns()
        if due > now { usleep(useconds_t((due - now) / 1000)) }
        let pid = fork()
        if pid == 0 {
            total.increment()
            values.record(UInt64(index + 1))
            _exit(0)
        }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
    print("workers \(count)")
}
