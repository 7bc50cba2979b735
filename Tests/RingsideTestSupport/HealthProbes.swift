import RingsideSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// `/latest` as a JSON object (nil when it does not answer).
package func latestDocument(port: Int) -> [String: Any]? {
    guard let response = try? httpGet(port: port, path: "/latest", timeoutSeconds: 30), response.status == 200 else { return nil }
    return (try? JSONSerialization.jsonObject(with: Data(response.body.utf8))) as? [String: Any]
}

/// `/health` asked every 50 ms until `stop()`: each probe's status (nil: no answer within 5 s)
/// and time.
package final class HealthProbes: Sendable {
    package struct Answer: Sendable {
        package var status: Int?
        package var millis: Double?
    }

    package let port: Int
    private let answers = Locked<[Answer]>([])
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    package init(port: Int) { self.port = port }

    package func run() {
        while !stopped.load(ordering: .acquiring) {
            let start = Date()
            let status = try? httpGet(port: port, path: "/health", timeoutSeconds: 5).status
            let millis = status.map { _ in Date().timeIntervalSince(start) * 1000 }
            answers.withLock { $0.append(Answer(status: status, millis: millis)) }
            usleep(50_000)
        }
        finished.signal()
    }

    /// Stops the probes (after the one under way: its answer is kept) and returns every answer.
    package func stop() -> [Answer] {
        if !stopped.exchange(true, ordering: .acquiringAndReleasing) { finished.wait() }
        return answers.withLock { $0 }
    }
}
