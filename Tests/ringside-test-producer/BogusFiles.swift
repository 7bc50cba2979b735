import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `bogus-files`: files named as rings that no producer wrote, for the tests of discovery.
/// Without `rate`, makes `count` files `ringside.PREFIX-NNNNNN` (each `bytes` bytes of 0xA5: a
/// bad magic; 0: empty), prints "made N" and exits. With `rate`, makes files at that rate, in
/// batches each millisecond, and removes each once `count` newer ones exist (so at most `count`
/// stand at once), until `total` were made or SIGTERM; then removes what is left and prints
/// "churned N" (the files made).
func bogusFiles(directory: String, prefix: String, count: Int, bytes: Int, rate: Double, total: Int) -> Never {
    var terminate = sigset_t()
    sigemptyset(&terminate)
    sigaddset(&terminate, SIGTERM)
    sigprocmask(SIG_BLOCK, &terminate, nil)
    let content = [UInt8](repeating: 0xA5, count: bytes)
    func path(_ index: Int) -> String { directory + "/ringside." + prefix + "-" + String(format: "%06d", index) }
    func make(_ index: Int) {
        let fd = open(path(index), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { fail("open \(path(index)): errno \(errno)") }
        if !content.isEmpty { _ = content.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
        close(fd)
    }
    guard rate > 0 else {
        for index in 0..<count { make(index) }
        print("made \(count)")
        exit(0)
    }
    FileHandle.standardOutput.write(Data("churning \(getpid())\n".utf8))
    let startNanos = rs_clock_precise_ns()
    var made = 0
    while made < total {
        // Catch up with `rate` since the start, then sleep a millisecond.
        let due = min(total, Int(Double(rs_clock_precise_ns() &- startNanos) / 1e9 * rate) + 1)
        while made < due {
            make(made % 1_000_000)
            if made >= count { unlink(path((made - count) % 1_000_000)) }
            made += 1
        }
        var pending = sigset_t()
        sigpending(&pending)
        if sigismember(&pending, SIGTERM) == 1 { break }
        usleep(1_000)
    }
    for index in max(0, made - count)..<made { unlink(path(index % 1_000_000)) }
    print("churned \(made)")
    exit(0)
}
