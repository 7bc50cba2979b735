// `sched-threads` and `spin`: threads whose scheduling the collector's thread sampler reads (a
// thread that burns a CPU, one that sleeps, one that exits when told), and a process that competes
// for the burner's CPU.
import Foundation
import Ringside

/// `sched-threads`: attaches `ring`, and starts three threads, each naming itself and recording
/// one value into histogram "sched_values" (so it holds a lane): "burner" spins when `burn` (else
/// it waits), pinned to `cpu` when given; "napper" sleeps 1 ms at a time; "leaver" waits to be
/// told to exit. Prints "ready PID burner TID napper TID leaver TID"; then, for each line "leave"
/// on its input, lets the leaver exit and prints "left TID" once its thread is gone; at the end
/// of its input, exits.
func schedThreads(ring: String, directory: String?, cpu: Int, burn: Bool) throws -> Never {
    let bot = try Bot.attach(ring, directory: directory, options: .init(laneCapacity: 1024))
    let values = try bot.histogram("sched_values", unit: .none)
    let started = DispatchSemaphore(value: 0), leave = DispatchSemaphore(value: 0), idle = DispatchSemaphore(value: 0)
    let ids = ThreadIDs()
    func begin(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            nameCurrentThread(name)  // the kernel's name, which the producer writes into the lane it claims
            if name == "burner", cpu >= 0, !pinCurrentThread(to: cpu) { fail("cannot pin the burner to CPU \(cpu)") }
            values.record(1)
            ids.set(name, currentThreadID())
            started.signal()
            body()
        }
        thread.start()
        started.wait()
    }
    begin("burner") {
        guard burn else { return idle.wait() }  // holds its lane, asleep, until the process exits
        var spins: UInt64 = 0
        while true {
            spins &+= 1
            if spins & 0xF_FFFF == 0 { values.record(spins) }  // a side effect, so the loop stays
        }
    }
    begin("napper") {
        while true { usleep(1_000) }
    }
    begin("leaver") { leave.wait() }
    say("ready \(getpid()) burner \(ids.get("burner")) napper \(ids.get("napper")) leaver \(ids.get("leaver"))")
    while let line = readLine() {
        guard line == "leave" else { continue }
        leave.signal()
        let leaver = ids.get("leaver")
        // Gone from /proc once it has exited (and its lane retired, by its thread-exit destructor).
        while FileManager.default.fileExists(atPath: "/proc/self/task/\(leaver)") { usleep(1_000) }
        say("left \(leaver)")
    }
    withExtendedLifetime(bot) {}
    exit(0)
}

/// `spin`: pins itself to `cpu` (when given), prints "spinning PID", and spins until killed.
func spin(cpu: Int) -> Never {
    if cpu >= 0, !pinCurrentThread(to: cpu) { fail("cannot pin to CPU \(cpu)") }
    say("spinning \(getpid())")
    var spins: UInt64 = 0
    while true {
        spins &+= 1
        if spins & 0xFFF_FFFF == 0 { usleep(0) }  // a side effect, so the loop stays
    }
}

/// Writes a line to standard output at once (the test reads it while this process runs).
private func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

/// Names the calling thread for the kernel (its comm, which `Thread.name` may not reach: a
/// thread that runs before its creator records it is left unnamed), as pthread_setname_np does
/// for another thread.
func nameCurrentThread(_ name: String) {
    guard let comm = FileHandle(forWritingAtPath: "/proc/thread-self/comm") else { fail("cannot open /proc/thread-self/comm") }
    comm.write(Data(name.utf8))
    try? comm.close()
}

/// The kernel's id of the calling thread: `/proc/thread-self` links to `PID/task/TID`.
func currentThreadID() -> Int32 {
    let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
    guard let tid = target.split(separator: "/").last.flatMap({ Int32($0) }) else { fail("cannot read /proc/thread-self: \(target)") }
    return tid
}

/// Pins the calling thread to `cpu` with sched_setaffinity (id 0: the calling thread), which
/// Swift's Glibc module leaves out: looked up at run time.
func pinCurrentThread(to cpu: Int) -> Bool {
    typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sched_setaffinity"), cpu >= 0,
        cpu < MemoryLayout<cpu_set_t>.size * 8
    else { return false }
    var set = cpu_set_t()
    withUnsafeMutableBytes(of: &set) { bytes in bytes[cpu / 8] |= UInt8(1) << UInt8(cpu % 8) }
    return withUnsafeBytes(of: &set) { unsafeBitCast(symbol, to: SetAffinity.self)(0, $0.count, $0.baseAddress!) } == 0
}

/// Thread ids by name, set by the threads and read by the main thread.
private final class ThreadIDs: @unchecked Sendable {
    // @unchecked: the lock guards `ids`.
    private let lock = NSLock()
    private var ids: [String: Int32] = [:]

    func set(_ name: String, _ id: Int32) { lock.withLock { ids[name] = id } }
    func get(_ name: String) -> Int32 { lock.withLock { ids[name] ?? 0 } }
}
