import RingsideSystem
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Synchronization
import Testing

@Suite("The tests' processes start cleanly from a test process holding many descriptors")
struct ProcessSpawnTests {
    // Foundation's Process.run() crashed here (it read /proc/self/fd past readdir's buffer once
    // about 1,365 descriptors were open), and each child inherited every descriptor not marked
    // close-on-exec, so a test's sockets stayed open in the children it started.
    @Test("with 1,500 descriptors open, children start from two threads and see only their standard three")
    func manyDescriptorsOpen() throws {
        let limit = raiseDescriptorLimit(to: 4096)
        try #require(limit >= 1800, "cannot raise RLIMIT_NOFILE (soft limit \(limit))")
        let held = (0..<1500).map { _ in open("/dev/null", O_RDONLY) }
        defer { held.filter { $0 >= 0 }.forEach { close($0) } }
        try #require(held.allSatisfy { $0 >= 0 })

        let listings = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            for _ in 0..<10 {
                // ls opens the directory it lists as descriptor 3.
                let listing: String
                if let run = try? runProcess("/bin/ls", ["/proc/self/fd"]) {
                    listing = run.status == 0 ? run.outputLines.joined(separator: " ") : "ended with \(String(describing: run.status))"
                } else {
                    listing = "not started"
                }
                listings.withLock { $0.append(listing) }
            }
        }
        let all = listings.withLock { $0 }
        #expect(all.count == 20)
        #expect(all.allSatisfy { $0 == "0 1 2 3" }, "\(Set(all))")
    }
}
