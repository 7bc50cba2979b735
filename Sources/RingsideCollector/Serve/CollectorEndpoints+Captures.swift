import CRingside
import Glibc
import RingsideExport
import RingsideHTTP
import RingsideJSON
import RingsideSystem
import RingsideHTTPClient

extension CollectorEndpoints {
    /// Where a capture is asked for (`POST`), and where the captures are listed and served.
    static let capturePath = "/api/capture"
    static let capturesPath = "/api/captures"
    /// The page that draws a capture's trace: `/captures/view?file=NAME.trace.json`.
    static let timelinePath = "/captures/view"

    /// `POST /api/capture[?bot=NAME]`: asks for a capture of that bot (or of every bot) now.
    /// 202 with its id, 429 with `Retry-After` within `--capture-min-interval` of the last
    /// request's, 404 without `--capture-dir`. Behind the listener's authentication, as every
    /// route but the probes.
    func askForCapture(_ request: HTTPRequest) -> HTTPResponse {
        guard let captureDesk else {
            return HTTPResponse(status: 404, text: "captures are off: start the collector with --capture-dir DIR\n")
        }
        var bots: Set<String>?
        for item in (request.query ?? "").split(separator: "&") where !item.isEmpty {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0] == "bot", let bot = percentDecoded(parts[1]), !bot.isEmpty else {
                queryFigures.refuse(Self.capturePath)
                return HTTPResponse(status: 400, text: "bad request: \(item): the only parameter is bot=NAME\n")
            }
            bots = (bots ?? []).union([bot])
        }
        switch captureDesk.submit(.request, bots: bots, nowNanos: rs_clock_precise_ns()) {
        case let .accepted(id):
            let json = JSONWriter()
            json.object {
                json.field("id", id)
                json.field("status", "pending")
                json.field("list", Self.capturesPath)
            }
            return HTTPResponse(status: 202, contentType: JSONExporter.contentType, body: json.bytes)
        case let .suppressed(retryAfterNanos):
            let seconds = (retryAfterNanos + 999_999_999) / 1_000_000_000
            return HTTPResponse(
                status: 429, text: "a capture was asked for less than --capture-min-interval ago: retry in \(seconds) s\n",
                headers: [HTTPHeader("Retry-After", "\(seconds)")])
        case .busy:
            return HTTPResponse(
                status: 429, text: "\(CaptureDesk.maxInFlight) captures are being made: retry in a few seconds\n",
                headers: [HTTPHeader("Retry-After", "5")])
        }
    }

    /// `GET /api/captures/FILE`: a file of a capture listed in the latest snapshot (no other name
    /// is opened), as written, sent from the file (`ResponseFile`: no copy of it is held, however
    /// many clients download it and however slowly); `503` while `ResponseFile.maxOpen` files are
    /// being sent.
    func captureFile(named name: String) -> HTTPResponse {
        guard let captureDirectory, let captures = published.snapshot.collector.captures,
            captures.recent.contains(where: { $0.files.contains(name) })
        else {
            return HTTPResponse(status: 404, text: "not found: no capture file \(name) (GET \(Self.capturesPath) lists them)\n")
        }
        let contentType =
            name.hasSuffix(".json")
            ? JSONExporter.contentType : name.hasSuffix(".hlog") ? "text/plain; charset=utf-8" : "application/octet-stream"
        let opened: (descriptor: Int32, info: stat)?
        do throws(LogDirectoryError) { opened = try captureDirectory.openOwn(name, access: O_RDONLY) } catch {
            return HTTPResponse(status: 500, text: "\(error)\n")
        }
        guard let opened else {
            return HTTPResponse(status: 404, text: "not found: \(name) is no longer in \(captureDirectory.path)\n")
        }
        guard let file = ResponseFile(descriptor: opened.descriptor, length: Int(opened.info.st_size)) else {
            System.close(opened.descriptor)
            return HTTPResponse(
                status: 503, text: "\(ResponseFile.maxOpen) files are being downloaded: retry shortly\n",
                headers: [HTTPHeader("Retry-After", "1")])
        }
        return HTTPResponse(
            contentType: contentType, file: file, headers: [HTTPHeader("Content-Disposition", "attachment; filename=\"\(name)\"")])
    }
}
