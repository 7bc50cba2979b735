import RingsideCollector
import RingsideHTTPClient

/// The OTLP client's response parser: the input's first byte is how the bytes arrive (pieces of
/// 1 to 256 bytes), the rest is what an OTLP receiver sends back, read by the client's
/// `HTTPResponseParser` (status line, headers, interim responses, bodies by length, chunks or the
/// end of the connection; its bounds), then judged as the pusher judges an attempt
/// (`OTLPPusher.outcome`: a 2xx's `partial_success` in protobuf, `Retry-After`).
///
/// Checks: the response (or the kind of error) is the same however the bytes are split; a body kept is
/// within the client's bound.
enum OTLPResponseTarget {
    static let target = FuzzTarget(
        name: "otlp-response",
        covers: "an OTLP receiver's answer: the client's response parser, the pusher's verdict",
        run: run,
        seeds: { seeds })

    static func run(_ bytes: [UInt8]) {
        func finding(_ what: String) -> Never { FuzzFinding.report("otlp-response", what) }
        let stream = Array(bytes.dropFirst())
        let whole = response(stream, pieceBytes: max(1, stream.count))
        let pieces = response(stream, pieceBytes: Int(bytes.first ?? 0) + 1)
        if !same(whole, pieces) { finding("\(whole) read whole, \(pieces) in pieces of \(Int(bytes.first ?? 0) + 1)") }
        if case .success(let answer) = whole, answer.body.count > HTTPClient.maxBodyBytes {
            finding("a body of \(answer.body.count) bytes kept, past \(HTTPClient.maxBodyBytes)")
        }
        _ = OTLPPusher.outcome(of: whole)
        _ = OTLPPartialSuccess(stream)
    }

    /// The same response, or errors of the same kind (their messages quote what had come, which
    /// depends on how the bytes came).
    private static func same(_ a: Result<HTTPClientResponse, HTTPClientError>, _ b: Result<HTTPClientResponse, HTTPClientError>) -> Bool {
        switch (a, b) {
        case (.success(let one), .success(let other)): return one == other
        case (.failure(let one), .failure(let other)): return caseName(one) == caseName(other)
        default: return false
        }
    }

    private static func caseName(_ error: HTTPClientError) -> String {
        Mirror(reflecting: error).children.first?.label ?? "\(error)"
    }

    /// The response the client reads from `stream` given `pieceBytes` at a time, then its end.
    private static func response(_ stream: [UInt8], pieceBytes: Int) -> Result<HTTPClientResponse, HTTPClientError> {
        var parser = HTTPResponseParser(maxBodyBytes: HTTPClient.maxBodyBytes)
        do throws(HTTPClientError) {
            var start = 0
            while start < stream.count {
                let end = min(stream.count, start + pieceBytes)
                if let response = try parser.take(stream[start..<end]) { return .success(response) }
                start = end
            }
            return .success(try parser.finish())
        } catch {
            return .failure(error)
        }
    }

    /// `ExportMetricsServiceResponse { partial_success { rejected_data_points: 3, error_message: "..." } }`.
    static let partialSuccess: [UInt8] = {
        let message = Array("3 points of unknown metrics".utf8)
        let inner = [0x08, 0x03, 0x12, UInt8(message.count)] + message
        return [0x0A, UInt8(inner.count)] + inner
    }()

    static func head(_ lines: String) -> [UInt8] { Array(lines.utf8) }

    static let seeds = [
        FuzzSeed("ok-empty", [0xFF] + head("HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n")),
        FuzzSeed(
            "ok-partial-success",
            [0x07] + head("HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: \(partialSuccess.count)\r\n\r\n")
                + partialSuccess),
        FuzzSeed(
            "chunked",
            [0x02] + head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\(String(partialSuccess.count, radix: 16));ext=1\r\n")
                + partialSuccess + head("\r\n0\r\nX-Trailer: t\r\n\r\n")),
        FuzzSeed(
            "continue-then-503", [0x00] + head("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Service Unavailable\r\nRetry-After: 30\r\n\r\n")),
        FuzzSeed(
            "429-until-close", [0x10] + head("HTTP/1.0 429 Too Many Requests\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\n\nslow down\n")),
        FuzzSeed("folded-header", [0x03] + head("HTTP/1.1 400 Bad Request\r\nX-A: a\r\n  b\r\nContent-Length: 5, 5\r\n\r\nbad\r\n")),
        FuzzSeed("not-http", [0x00] + head("SSH-2.0-OpenSSH_9.2\r\n")),
    ]
}
