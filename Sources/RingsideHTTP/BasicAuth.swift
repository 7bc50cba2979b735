import RingsideSystem
import Synchronization
import RingsideHTTPClient

/// Who may read what, as one version of the web configuration says: the basic-auth users with
/// their bcrypt hashes, and the headers every response carries. A plain value, handed to the
/// thread that checks passwords with the request it checks.
struct AccessRules: Sendable {
    /// User name (its UTF-8 bytes) to bcrypt hash. Empty: no password asked.
    var users: [[UInt8]: String] = [:]
    var headers: [HTTPHeader] = []
    /// A bcrypt setting of the users' highest cost, hashed against for an unknown user, so that
    /// a wrong name costs what a wrong password does and the time does not tell which names exist.
    var unknownUserSetting = ""

    init() {}

    init(_ config: WebConfig) {
        for user in config.users { users[Array(user.name.utf8)] = user.hash }
        headers = config.headers
        let cost = config.users.compactMap { Bcrypt.cost(of: $0.hash) }.max() ?? 10
        unknownUserSetting = Bcrypt.randomSetting(cost: cost) ?? "$2b$\(cost < 10 ? "0" : "")\(cost)$" + String(repeating: ".", count: 22)
    }

    /// What to do with a request before it is answered.
    enum Decision {
        case allow
        /// Answer 401 at once: no credentials, or not in the Basic scheme.
        case refuseMissing
        /// The password is not among those verified: check it with bcrypt (tens of milliseconds), off the loop.
        case verify(Verification)
    }

    /// A user and password to check with bcrypt, with the rules to check them against.
    struct Verification: Sendable {
        var user: [UInt8]
        var password: [UInt8]
        var rules: AccessRules
    }

    /// Whether `request` may be answered now, must be refused, or needs its password checked.
    /// `open` paths need no password; a password verified before (`verified`) is not checked again.
    func decide(_ request: HTTPRequest, open: Set<String>, verified: VerifiedPasswords) -> Decision {
        guard !users.isEmpty, !open.contains(request.path) else { return .allow }
        guard let header = request.header("Authorization"), let credentials = BasicCredentials(header: header) else {
            return .refuseMissing
        }
        if let hash = users[credentials.user], verified.contains(user: credentials.user, hash: hash, password: credentials.password) {
            return .allow
        }
        return .verify(Verification(user: credentials.user, password: credentials.password, rules: self))
    }

    /// Checks a password with bcrypt (an unknown user against `unknownUserSetting`, at the same
    /// cost); a password that verifies is remembered in `verified`. Costs tens of milliseconds:
    /// called on the password worker, never on the loop.
    static func verify(_ verification: Verification, remembering verified: VerifiedPasswords) -> Bool {
        let hash = verification.rules.users[verification.user]
        let matches = Bcrypt.verify(password: verification.password, hash: hash ?? verification.rules.unknownUserSetting)
        guard let hash, matches else { return false }
        verified.insert(user: verification.user, hash: hash, password: verification.password)
        return true
    }
}

/// The user and password of an `Authorization: Basic` header (RFC 7617): base64 of `user:password`.
struct BasicCredentials: Equatable {
    var user: [UInt8]
    var password: [UInt8]

    /// Nil unless `header` is `Basic` (any case) and valid base64 of text with a colon.
    init?(header: String) {
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "basic", let decoded = Self.base64(parts[1].utf8),
            let colon = decoded.firstIndex(of: UInt8(ascii: ":"))
        else { return nil }
        user = Array(decoded[..<colon])
        password = Array(decoded[(colon + 1)...])
    }

    /// The bytes of standard base64 (padding required when the length asks for it), or nil.
    private static func base64<Bytes: Collection>(_ text: Bytes) -> [UInt8]? where Bytes.Element == UInt8 {
        let symbols = text.filter { $0 != UInt8(ascii: " ") }
        guard symbols.count % 4 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(symbols.count / 4 * 3)
        var accumulator: UInt32 = 0
        var bits = 0
        var padding = 0
        for symbol in symbols {
            let value: UInt32
            switch symbol {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = UInt32(symbol - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = UInt32(symbol - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt32(symbol - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="):
                padding += 1
                continue
            default: return nil
            }
            guard padding == 0 else { return nil }  // a symbol after padding
            accumulator = accumulator << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return padding <= 2 ? bytes : nil
    }
}

/// The passwords that verified, so that a scraper's password costs one bcrypt, not one a
/// scrape (as exporter-toolkit caches them). Kept as SHA-256 digests of this process's random
/// salt, the user, the hash and the password, never the password itself; compared in constant
/// time. At most `perUser` passwords a user and hash, the oldest forgotten first, so the cache
/// stays as small as the users list. Safe from any thread.
final class VerifiedPasswords: Sendable {
    private let salt = OpenSSL.randomBytes(32)
    private let entries = Locked<[[UInt8]: [[UInt8]]]>([:])
    static let perUser = 4

    init() {}

    private func key(user: [UInt8], hash: String) -> [UInt8] { OpenSSL.sha256([user, [0], Array(hash.utf8)]) }

    private func digest(user: [UInt8], hash: String, password: [UInt8]) -> [UInt8] {
        OpenSSL.sha256([salt, user, [0], Array(hash.utf8), [0], password])
    }

    func contains(user: [UInt8], hash: String, password: [UInt8]) -> Bool {
        let candidate = digest(user: user, hash: hash, password: password)
        let known = entries.withLock { $0[key(user: user, hash: hash)] ?? [] }
        var found = false
        for digest in known { found = OpenSSL.constantTimeEqual(digest, candidate) || found }  // every one compared
        return found
    }

    func insert(user: [UInt8], hash: String, password: [UInt8]) {
        let value = digest(user: user, hash: hash, password: password)
        let key = key(user: user, hash: hash)
        entries.withLock { entries in
            var list = entries[key] ?? []
            guard !list.contains(value) else { return }
            list.append(value)
            if list.count > Self.perUser { list.removeFirst() }
            entries[key] = list
        }
    }

    /// Forgets every password (a new web configuration: its hashes may differ).
    func removeAll() { entries.withLock { $0.removeAll() } }
}
