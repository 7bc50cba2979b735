import Foundation

/// Runs `body(thread)` on `threads` threads alive at once (so each holds a lane of its own, or
/// none when the bot has fewer lanes), and returns when they have all exited.
package func onConcurrentThreads(_ threads: Int, _ body: @escaping @Sendable (Int) -> Void) {
    guard threads > 0 else { return }
    let ran = DispatchGroup(), exited = DispatchGroup()
    let release = DispatchSemaphore(value: 0)
    for thread in 0..<threads {
        ran.enter()
        exited.enter()
        Thread {
            body(thread)
            ran.leave()
            release.wait()
            exited.leave()
        }.start()
    }
    ran.wait()
    for _ in 0..<threads { release.signal() }
    exited.wait()
    usleep(20_000)  // the threads' exit destructors, which retire their lanes, run after `exited`
}
