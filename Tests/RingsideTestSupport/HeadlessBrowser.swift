import Foundation
import Ringside
#if canImport(Glibc)
import Glibc
#endif

/// Runs `body` with the path of chromium and a fresh ring directory: a browser test's start.
/// Returns without running it when chromium is missing outside CI (see `requiredSystemTool`).
package func withChromium(_ body: (String, RingDirectory) throws -> Void) throws {
    guard let chromium = try requiredSystemTool("chromium") else { return }
    try withRingDirectory { try body(chromium, $0) }
}

/// Chromium, headless, driven as a person would use a page: opened, clicked, read back, and
/// photographed. It speaks the DevTools protocol over `--remote-debugging-pipe` (JSON messages,
/// each ended by a NUL byte, that the browser reads from its descriptor 3 and writes to its 4),
/// here one end of a socket pair given as both, so that a browser gone is an error, never SIGPIPE.
/// One page per browser; not for use from two threads at once.
package final class HeadlessBrowser: @unchecked Sendable {
    // @unchecked: one test's thread uses it at a time.
    private let process: SpawnedProcess
    private let profile: TemporaryDirectory
    private let socket: Int32
    private var received: [UInt8] = []
    private var nextID = 0
    private var session = ""
    /// What the page threw or logged as an error (`Runtime.exceptionThrown`, `console.error`), in order.
    package private(set) var pageErrors: [String] = []

    /// Starts `chromium` with a page of `width` x `height` CSS pixels, showing about:blank.
    package init(_ chromium: String, width: Int = 1400, height: Int = 900) throws {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw TestSupportError("socketpair: \(String(cString: strerror(errno)))")
        }
        socket = pair[0]
        defer { Glibc.close(pair[1]) }  // the browser has its copies
        let profile = try TemporaryDirectory("ringside-chromium")
        self.profile = profile
        do {
            process = try SpawnedProcess(
                path: chromium,
                arguments: [
                    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile.path)",
                    "--remote-debugging-pipe", "about:blank",
                ], environment: ProcessInfo.processInfo.environment, standardInput: .nullDevice, standardOutput: .nullDevice,
                standardError: .nullDevice, extraDescriptors: [pair[1], pair[1]])
        } catch {
            Glibc.close(pair[0])
            profile.remove()
            throw error
        }
        let target = try call("Target.createTarget", ["url": "about:blank"], inSession: false)
        let attached = try call("Target.attachToTarget", ["targetId": target["targetId"] ?? "", "flatten": true], inSession: false)
        session = try require(attached["sessionId"] as? String, "the browser attached to no page")
        _ = try call("Runtime.enable")
        _ = try call("Emulation.setDeviceMetricsOverride", ["width": width, "height": height, "deviceScaleFactor": 1, "mobile": false])
    }

    deinit { close() }

    /// Ends the browser (asked, then killed with its process group) and removes its profile.
    package func close() {
        guard process.isRunning else { return finish() }
        _ = try? call("Browser.close", inSession: false, timeoutSeconds: 10)
        let deadline = monotonicSeconds() + 10
        while process.isRunning && monotonicSeconds() < deadline { usleep(20_000) }
        if process.isRunning { Glibc.kill(-process.pid, SIGKILL) }  // its own group: the renderers too
        process.killAndReap()
        finish()
    }

    private var finished = false
    private func finish() {
        guard !finished else { return }
        finished = true
        Glibc.close(socket)
        profile.remove()
    }

    /// Opens `url` in the page and waits, up to `seconds`, for its document to have loaded (its
    /// scripts' fetches may still run: wait for what they show with `waitFor`).
    package func open(_ url: String, seconds: Double = 60) throws {
        let result = try call("Page.navigate", ["url": url])
        if let failure = result["errorText"] as? String { throw TestSupportError("open \(url): \(failure)") }
        let literal = String(decoding: try JSONSerialization.data(withJSONObject: [url]), as: UTF8.self).dropFirst().dropLast()
        guard try waitFor("location.href === \(literal) && document.readyState === 'complete'", seconds: seconds) != nil else {
            throw TestSupportError("open \(url): not loaded within \(seconds) s")
        }
    }

    /// The value of the JavaScript `expression` in the page (a promise's, once settled), as
    /// JSONSerialization reads it: nil for undefined or null.
    package func evaluate(_ expression: String, timeoutSeconds: Double = 60) throws -> Any? {
        let answer = try call(
            "Runtime.evaluate", ["expression": expression, "awaitPromise": true, "returnByValue": true], timeoutSeconds: timeoutSeconds)
        if let exception = answer["exceptionDetails"] as? [String: Any] {
            let description = (exception["exception"] as? [String: Any])?["description"] as? String
            throw TestSupportError("\(expression.prefix(200)): \(description ?? exception["text"] as? String ?? "an exception")")
        }
        let result = answer["result"] as? [String: Any]
        return result?["value"].flatMap { $0 is NSNull ? nil : $0 }
    }

    /// Evaluates `expression` every 100 ms until its value is neither null, undefined nor false;
    /// returns it, or nil after `seconds`.
    package func waitFor(_ expression: String, seconds: Double) throws -> Any? {
        let deadline = monotonicSeconds() + seconds
        while true {
            if let value = try evaluate(expression), (value as? Bool) != false { return value }
            if monotonicSeconds() > deadline { return nil }
            usleep(100_000)
        }
    }

    /// A left click at (x, y), CSS pixels of the page's viewport: the mouse moved there, pressed, released.
    package func click(x: Double, y: Double) throws {
        for (kind, count) in [("mouseMoved", 0), ("mousePressed", 1), ("mouseReleased", 1)] {
            var event: [String: Any] = ["type": kind, "x": x, "y": y]
            if count > 0 { event.merge(["button": "left", "clickCount": count, "buttons": kind == "mousePressed" ? 1 : 0]) { $1 } }
            _ = try call("Input.dispatchMouseEvent", event)
        }
    }

    /// A click in the middle of the element `selector` selects (scrolled into view first), once it
    /// holds still: at the same place 100 ms apart and not covered there (a page that redraws
    /// itself may move it between the look and the click, as Playwright's actionability checks
    /// say). Throws after `seconds` without.
    package func click(_ selector: String, seconds: Double = 30) throws {
        let quoted = String(decoding: try JSONSerialization.data(withJSONObject: [selector]), as: UTF8.self).dropFirst().dropLast()
        let look =
            "(() => { const e = document.querySelector(\(quoted)); if (!e) return null; e.scrollIntoView({block: 'center'});"
            + " const r = e.getBoundingClientRect(), x = r.left + r.width / 2, y = r.top + r.height / 2;"
            + " const hit = document.elementFromPoint(x, y); return hit && e.contains(hit) ? [x, y] : null; })()"
        let deadline = monotonicSeconds() + seconds
        var last: [Double]?
        while monotonicSeconds() < deadline {
            let point = try evaluate(look) as? [Double]
            if let point, point == last { return try click(x: point[0], y: point[1]) }
            last = point
            usleep(100_000)
        }
        throw TestSupportError("\(selector): not found, covered or moving for \(seconds) s")
    }

    /// The page as a PNG, as the viewport shows it.
    package func screenshot() throws -> Data {
        let result = try call("Page.captureScreenshot", ["format": "png"])
        guard let text = result["data"] as? String, let data = Data(base64Encoded: text) else {
            throw TestSupportError("no screenshot in the browser's answer")
        }
        return data
    }

    // MARK: - The protocol

    /// Sends one command and reads until its answer, keeping the page's errors from the events
    /// read meanwhile; the answer's `result`, or a thrown error.
    private func call(
        _ method: String, _ parameters: [String: Any] = [:], inSession: Bool = true, timeoutSeconds: Double = 60
    ) throws -> [String: Any] {
        nextID += 1
        let id = nextID
        var message: [String: Any] = ["id": id, "method": method, "params": parameters]
        if inSession { message["sessionId"] = session }
        try send(Array(try JSONSerialization.data(withJSONObject: message)) + [0])
        let deadline = monotonicSeconds() + timeoutSeconds
        while true {
            let answer = try readMessage(until: deadline, waitingFor: method)
            if answer["id"] as? Int == id {
                if let error = answer["error"] as? [String: Any] {
                    throw TestSupportError("\(method): \(error["message"] as? String ?? "\(error)")")
                }
                return answer["result"] as? [String: Any] ?? [:]
            }
            note(event: answer)
        }
    }

    private func note(event: [String: Any]) {
        let parameters = event["params"] as? [String: Any] ?? [:]
        switch event["method"] as? String {
        case "Runtime.exceptionThrown":
            let details = parameters["exceptionDetails"] as? [String: Any] ?? [:]
            let exception = details["exception"] as? [String: Any]
            pageErrors.append(exception?["description"] as? String ?? details["text"] as? String ?? "an exception")
        case "Runtime.consoleAPICalled" where parameters["type"] as? String == "error":
            let arguments = parameters["args"] as? [[String: Any]] ?? []
            pageErrors.append("console.error: " + arguments.map { "\($0["value"] ?? $0["description"] ?? "")" }.joined(separator: " "))
        default:
            break
        }
    }

    private func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else { throw TestSupportError("the browser does not read: \(String(cString: strerror(errno)))") }
            offset += sent
        }
    }

    private func readMessage(until deadline: Double, waitingFor method: String) throws -> [String: Any] {
        while true {
            if let end = received.firstIndex(of: 0) {
                let message = Array(received[..<end])
                received.removeSubrange(...end)
                guard let object = try JSONSerialization.jsonObject(with: Data(message)) as? [String: Any] else {
                    throw TestSupportError("the browser sent no JSON object")
                }
                return object
            }
            let left = deadline - monotonicSeconds()
            guard left > 0 else { throw TestSupportError("\(method): the browser did not answer in time") }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(left, 1) * 1000) + 1)
            if ready < 0 && errno != EINTR { throw TestSupportError("poll: \(String(cString: strerror(errno)))") }
            guard ready > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw TestSupportError("\(method): the browser closed its end (it exited)") }
            received += chunk[..<count]
        }
    }
}

/// `value`, or an error saying `what` is missing.
private func require<T>(_ value: T?, _ what: String) throws -> T {
    guard let value else { throw TestSupportError(what) }
    return value
}
