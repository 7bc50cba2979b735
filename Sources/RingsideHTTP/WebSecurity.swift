import Glibc
import RingsideSnapshot
import RingsideSystem
import Synchronization

/// A server's web configuration file (`--web-config-file`), loaded and kept up to date: the TLS
/// context new connections get, the users requests must name, and the figures of what was refused.
///
/// Re-read when it or a file it names (certificate, key, client CA) changes, as exporter-toolkit
/// re-reads it per request: the server looks at the files' identity, size and times at most once
/// a second, when a connection comes or a request is read. A version that does not load (a
/// syntax error, a certificate that does not match its key) leaves the running one in place, is
/// logged once with its line and reason, and is tried again at the files' next change. Connections
/// open keep the TLS context they began with; new ones get a rotated certificate at once.
///
/// Made before the server starts; then the server's loop thread reads and refreshes it. The
/// counters are safe to read from any thread.
package final class WebSecurity: Sendable {
    /// The file's path, as given.
    package let path: String
    /// Paths answered without a password (the collector's `/health` and `/-/healthy`).
    package let openPaths: Set<String>
    /// The passwords that verified under the current configuration.
    let verified = VerifiedPasswords()
    private let state: Locked<State>
    private let figures = Figures()

    private struct State {
        var config: WebConfig
        var tls: TLSContext?
        var rules: AccessRules
        /// The files watched (the configuration and those it names, running and tried), as last seen.
        var seen: [String: FileVersion?]
        var nextCheck: Int64 = 0
    }

    private final class Figures: Sendable {
        let authMissing = Atomic<UInt64>(0)
        let authWrong = Atomic<UInt64>(0)
        let authThrottled = Atomic<UInt64>(0)
        let passwordChecks = Atomic<UInt64>(0)
        let handshakeFailures = Atomic<UInt64>(0)
        let reloads = Atomic<UInt64>(0)
        let reloadFailures = Atomic<UInt64>(0)
        let lastReloadSucceeded = Atomic<Bool>(true)
        let tls = Atomic<Bool>(false)
        let users = Atomic<Int>(0)
    }

    /// Loads the file and what it names.
    ///
    /// - Parameters:
    ///   - path: the web configuration file.
    ///   - openPaths: request paths answered without a password.
    /// - Throws: `WebConfigError` with the line (when one is to blame) and the reason.
    package init(path: String, openPaths: Set<String> = []) throws(WebConfigError) {
        self.path = path
        self.openPaths = openPaths
        let identity = FileVersion.of(path)
        let (config, tls) = try Self.load(path)
        var seen: [String: FileVersion?] = [path: identity]
        for file in config.referencedFiles { seen[file] = FileVersion.of(file) }
        state = Locked(State(config: config, tls: tls, rules: AccessRules(config), seen: seen))
        figures.tls.store(tls != nil, ordering: .relaxed)
        figures.users.store(config.users.count, ordering: .relaxed)
    }

    /// Checks a file without keeping it, as `init` would load it (for a command line's check).
    package static func check(path: String) throws(WebConfigError) { _ = try load(path) }

    /// The configuration in `path`, with its TLS context when it asks for TLS.
    private static func load(_ path: String) throws(WebConfigError) -> (WebConfig, TLSContext?) {
        let config = try WebConfig.parse(try readText(path), directory: directory(of: path))
        return (config, try config.tls.map { settings throws(WebConfigError) in try TLSContext(settings) })
    }

    /// The file's text: at most 1 MiB of UTF-8, in a file trusted as `TrustedFile` says.
    private static func readText(_ path: String) throws(WebConfigError) -> String {
        let bytes: [UInt8]
        do { bytes = try TrustedFile.read(path, maxBytes: 1 << 20) } catch { throw WebConfigError(reason: error.reason) }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw WebConfigError(reason: "not UTF-8 text") }
        return text
    }

    // MARK: - On the loop

    /// Whether TLS is on now.
    package var isTLS: Bool { figures.tls.load(ordering: .relaxed) }

    /// The TLS context for a new connection, nil for plain HTTP.
    var tlsContext: TLSContext? { state.withLock { $0.tls } }

    /// The rules a request is checked against now.
    var rules: AccessRules { state.withLock { $0.rules } }

    /// Re-reads the files if a second has passed since the last look and one of them changed.
    /// `log` is told what happened: a reload, or a version refused (once per change).
    func refresh(now: Int64, log: HTTPServerLog) {
        state.withLock { state in
            guard now >= state.nextCheck else { return }
            state.nextCheck = now + 1000
            var current: [String: FileVersion?] = [:]
            for file in state.seen.keys { current[file] = FileVersion.of(file) }
            guard current != state.seen else { return }
            state.seen = current
            do {
                let (config, tls) = try Self.load(path)
                for file in config.referencedFiles where state.seen[file] == nil { state.seen[file] = FileVersion.of(file) }
                // Files the old version named and this one does not are no longer watched.
                state.seen = state.seen.filter { $0.key == path || config.referencedFiles.contains($0.key) }
                let changed = config != state.config
                state.config = config
                state.tls = tls
                state.rules = AccessRules(config)
                verified.removeAll()
                figures.reloads.add(1, ordering: .relaxed)
                figures.lastReloadSucceeded.store(true, ordering: .relaxed)
                figures.tls.store(tls != nil, ordering: .relaxed)
                figures.users.store(config.users.count, ordering: .relaxed)
                log(
                    "--web-config-file \(path): reloaded (\(changed ? "settings changed" : "files changed")): "
                        + Self.summary(config), false)
            } catch {
                figures.reloadFailures.add(1, ordering: .relaxed)
                figures.lastReloadSucceeded.store(false, ordering: .relaxed)
                // Watch what the refused version names too, so that creating a file it lacks retries it.
                if let text = try? Self.readText(path), let config = try? WebConfig.parse(text, directory: Self.directory(of: path)) {
                    for file in config.referencedFiles where state.seen[file] == nil { state.seen[file] = FileVersion.of(file) }
                }
                log("--web-config-file \(path): \(error); keeping the running configuration", true)
            }
        }
    }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }

    /// What a configuration turns on, for the log: `TLS (client certificates: RequireAndVerifyClientCert), 2 users`.
    package static func summary(_ config: WebConfig) -> String {
        let tls =
            config.tls.map { settings in
                settings.clientAuth == .none ? "TLS" : "TLS (client certificates: \(settings.clientAuth.rawValue))"
            } ?? "no TLS"
        let users = config.users.isEmpty ? "no password" : "basic auth for \(config.users.count) user\(config.users.count == 1 ? "" : "s")"
        return "\(tls), \(users)"
    }

    /// Whether the configuration running now lets no one read without a secret: TLS, and
    /// passwords or checked client certificates (the open paths aside).
    package var protectsEverything: Bool {
        state.withLock { state in
            guard let tls = state.config.tls else { return false }
            return !state.config.users.isEmpty || tls.clientAuth == .requireAndVerify
        }
    }

    /// The summary of the configuration running now.
    package var summary: String { state.withLock { Self.summary($0.config) } }

    /// Checks a password with bcrypt, remembering it when it verifies: the password worker's work.
    func verify(_ verification: AccessRules.Verification) -> Bool {
        figures.passwordChecks.add(1, ordering: .relaxed)
        return AccessRules.verify(verification, remembering: verified)
    }

    func countAuthMissing() { figures.authMissing.add(1, ordering: .relaxed) }
    func countAuthWrong() { figures.authWrong.add(1, ordering: .relaxed) }
    func countAuthThrottled() { figures.authThrottled.add(1, ordering: .relaxed) }
    func countHandshakeFailure() { figures.handshakeFailures.add(1, ordering: .relaxed) }

    // MARK: - From any thread

    /// What was refused and reloaded since the server started, as the collector's snapshot carries it.
    package var counters: WebSecurityStats {
        var counters = WebSecurityStats()
        counters.authMissing = figures.authMissing.load(ordering: .relaxed)
        counters.authWrong = figures.authWrong.load(ordering: .relaxed)
        counters.authThrottled = figures.authThrottled.load(ordering: .relaxed)
        counters.passwordChecks = figures.passwordChecks.load(ordering: .relaxed)
        counters.tlsHandshakeFailures = figures.handshakeFailures.load(ordering: .relaxed)
        counters.reloads = figures.reloads.load(ordering: .relaxed)
        counters.reloadFailures = figures.reloadFailures.load(ordering: .relaxed)
        counters.lastReloadSucceeded = figures.lastReloadSucceeded.load(ordering: .relaxed)
        counters.tls = figures.tls.load(ordering: .relaxed)
        counters.users = figures.users.load(ordering: .relaxed)
        return counters
    }
}
