import RingsideCommandLine
import Ringside
import RingsideHTTPClient
import RingsideSystem
import RingsideText

#if canImport(Glibc)
import Glibc
#endif

/// `ringside-dump capture`: asks a running collector for a capture of its flight recorder's
/// records now, as `POST /api/capture` does (a capture is the collector's: only it holds the
/// seconds drained before now). Plain `http://`, with basic auth when the listener asks for it;
/// a listener behind TLS is asked with `curl -X POST https://.../api/capture`.
enum CaptureCommand {
    static func run(bot: String?, collector: String, user: String?, passwordFile: String?, _ context: DumpContext) -> Int32 {
        let console = context.console
        let base = collector.contains("://") ? collector : "http://" + collector
        let url: HTTPURL
        do { url = try HTTPURL(parsing: base + "/api/capture" + (bot.map { "?bot=" + percentEncoded($0) } ?? "")) } catch {
            console.printError("ringside-dump capture: --collector \(collector): \(error) (https: use curl -X POST)")
            return ExitStatus.usage
        }
        var headers: [HTTPHeader] = []
        if let user {
            guard let passwordFile else {
                console.printError("ringside-dump capture: --user needs --password-file FILE")
                return ExitStatus.usage
            }
            let password: [UInt8]
            switch readPasswordFile(passwordFile) {
            case .success(let bytes): password = bytes
            case .failure(let why):
                console.printError("ringside-dump capture: --password-file \(passwordFile): \(why.reason)")
                return ExitStatus.failure
            }
            let trimmed = password.last == UInt8(ascii: "\n") ? Array(password.dropLast()) : password
            headers.append(HTTPHeader("Authorization", "Basic " + Base64.encode(Array(user.utf8) + [UInt8(ascii: ":")] + trimmed)))
        }
        let response: HTTPClientResponse
        do {
            response = try HTTPClient.send(
                HTTPClientRequest(method: "POST", url: url, headers: headers, body: []), timeoutNanos: 10_000_000_000)
        } catch {
            console.printError("ringside-dump capture: cannot ask the collector at \(base): \(error)")
            return ExitStatus.failure
        }
        let body = String(decoding: response.body, as: UTF8.self)
        guard response.status == 202 else {
            console.printError(
                "ringside-dump capture: the collector at \(base) answered \(response.status): "
                    + body.trimmingCharacters(in: "\n"))
            return ExitStatus.failure
        }
        if context.json {
            console.print(body)
        } else {
            console.print(
                "capture asked for\(bot.map { " of bot \($0)" } ?? " of every bot"): \(body); the collector writes it once its "
                    + "seconds after now are drained (--capture-after), and lists it at \(base)/api/captures")
        }
        return ExitStatus.success
    }

    /// A query value with everything but unreserved characters percent-encoded.
    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(Character(UnicodeScalar(byte)))
            default:
                out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return out
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        String(reversed().drop(while: { set.contains($0) }).reversed())
    }
}

extension CaptureCommand {
    /// Why the password file was not read: a sentence.
    struct PasswordFileError: Error {
        let reason: String
    }

    /// The password file's bytes (at most 4 KiB and one more): a regular file, opened without
    /// waiting, so that a FIFO or a device at its path is refused at once (its type and owner said)
    /// instead of holding the tool until a writer comes.
    static func readPasswordFile(_ path: String) -> Result<[UInt8], PasswordFileError> {
        let fd: Int32
        do { fd = try System.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) } catch {
            return .failure(PasswordFileError(reason: "\(error)"))
        }
        defer { System.close(fd) }
        do {
            let info = try System.fstat(fd)
            guard info.st_mode & S_IFMT == S_IFREG else {
                return .failure(PasswordFileError(reason: "\(fileKind(info.st_mode)) owned by uid \(info.st_uid), not a regular file"))
            }
            return .success(try System.readAll(fd, atMost: 4096))
        } catch {
            return .failure(PasswordFileError(reason: "\(error)"))
        }
    }
}

// MARK: - Its command line

extension CaptureCommand: DumpCommand {
    static let name = "capture"
    static var options: OptionSpec { OptionSpec(valued: ["--collector", "--user", "--password-file"]) }
    static let usage = """
        usage: ringside-dump capture [BOT] [--collector HOST:PORT|URL] [--user NAME --password-file FILE]

        Asks a running collector (started with --capture-dir) for a capture of its flight recorder's
        records of BOT (of every bot without), now: the seconds before (--recorder-seconds) and after
        (--capture-after) written as a trace and a latency log in its capture directory, listed at
        /api/captures. The same as POST /api/capture, and rate-limited as it is (--capture-min-interval:
        a request within it is refused, exit 1). Prints the capture's id.
          --collector   the collector's address (default 127.0.0.1:9464), plain http://
          --user        a basic-auth user of the collector's --web-config-file, its password the
                        first line of --password-file
        """

    static func run(parsing arguments: DumpArguments, _ context: DumpContext) throws(UsageError) -> Int32 {
        let positionals = arguments.positionals
        guard positionals.count <= 1 else { throw arguments.error("unexpected argument \(positionals[1]) (one bot at most)") }
        if let bot = positionals.first {
            do { try RingDirectory.validate(ringName: bot) } catch { throw arguments.error("\(error)") }
        }
        return run(
            bot: positionals.first, collector: arguments.value("--collector") ?? "127.0.0.1:9464", user: arguments.value("--user"),
            passwordFile: arguments.value("--password-file"), context)
    }
}
