import RingsideSystem
import Foundation
@testable import RingsideHTTP
import RingsideTestSupport
import Synchronization
import Testing
@testable import RingsideHTTPClient

/// `HTTPClient` over real sockets against peers that answer without end: each call ends at a
/// bound, its deadline, or a cancellation from another thread, never later.
@Suite("HTTPClient against a hostile peer")
struct HTTPClientHostilePeerTests {
    /// A call made on a thread of its own; its result once it returned.
    final class Call: Sendable {
        private let result = Locked<Result<HTTPClientResponse, HTTPClientError>?>(nil)

        init(port: Int, timeoutNanos: UInt64, cancellation: HTTPClientCancellation? = nil) throws {
            let request = HTTPClientRequest(
                method: "POST", url: try HTTPURL(parsing: "http://127.0.0.1:\(port)/v1/metrics"), headers: [], body: Array("body".utf8))
            Thread.detachNewThread { [self] in
                let outcome = Result { () throws(HTTPClientError) in
                    try HTTPClient.send(request, timeoutNanos: timeoutNanos, cancellation: cancellation)
                }
                result.withLock { $0 = outcome }
            }
        }

        var outcome: Result<HTTPClientResponse, HTTPClientError>? { result.withLock { $0 } }

        /// The result, polled for up to 20 s (a call that did not end by then fails the test).
        func wait() -> Result<HTTPClientResponse, HTTPClientError>? { eventually(seconds: 20) { outcome } }
    }

    @Test(
        "a peer that sends interim responses, trailers or headers without end fails the call at a bound, long before its timeout",
        arguments: [
            ("", "HTTP/1.1 100 Continue\r\n\r\n", "more than 10 interim (1xx) responses"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", "X-Trailer: 1\r\n", "(at a trailer)"),
            ("HTTP/1.1 200 OK\r\n", "X-Header: another\r\n", "(at a header line)"),
        ])
    func endlessAnswers(head: String, line: String, reason: String) throws {
        let peer = try HostilePeer(attack: endless(head, line))
        defer { peer.stop() }
        // 10 minutes: only a bound can end the call within the 20 s the test waits.
        let call = try Call(port: peer.port, timeoutNanos: 600_000_000_000)
        let outcome = call.wait()
        guard case .failure(.limitExceeded(let what)) = outcome else {
            Issue.record("the call did not fail at a bound: \(String(describing: outcome))")
            return
        }
        #expect(what.contains(reason))
    }

    @Test("a cancellation from another thread ends a call waiting on a peer that dribbles its answer, and every later call")
    func cancellation() throws {
        let peer = try HostilePeer { send in
            guard send(Array("HTTP/1.1 200 OK\r\nX-Slow: ".utf8)) else { return }
            while send([UInt8(ascii: "z")]) { usleep(1_000) }
        }
        defer { peer.stop() }
        let cancellation = HTTPClientCancellation()
        let call = try Call(port: peer.port, timeoutNanos: 600_000_000_000, cancellation: cancellation)
        // Still going after a second of dribbling: the deadline is 10 minutes off.
        Thread.sleep(forTimeInterval: 1)
        #expect(call.outcome == nil)
        cancellation.cancel()
        #expect(call.wait() == .failure(.cancelled))
        let later = try Call(port: peer.port, timeoutNanos: 600_000_000_000, cancellation: cancellation)
        #expect(later.wait() == .failure(.cancelled))
    }

    @Test("the deadline holds against a peer that dribbles its answer a byte at a time")
    func dribbleMeetsTheDeadline() throws {
        let peer = try HostilePeer { send in
            guard send(Array("HTTP/1.1 200 OK\r\nX-Slow: ".utf8)) else { return }
            while send([UInt8(ascii: "z")]) { usleep(1_000) }
        }
        defer { peer.stop() }
        let call = try Call(port: peer.port, timeoutNanos: 500_000_000)
        #expect(call.wait() == .failure(.timedOut("waiting for the response from 127.0.0.1:\(peer.port)")))
    }
}
