import Ringside
import RingsideCommandLine
import RingsideJSON
import RingsideText

/// `ringside-dump list`: one line per ring in the directory.
enum ListCommand {
    static func run(_ context: DumpContext) -> Int32 {
        let names: [String]
        do throws(RingError) { names = try context.ringNames() } catch { return context.fail(error) }
        let now = Now()
        let rings = names.map { name -> (name: String, status: Result<RingStatus, RingError>) in
            do throws(RingError) { return (name, .success(try context.inspector(name).settledStatus())) } catch {
                return (name, .failure(error))
            }
        }
        let console = context.console
        if context.json {
            let items: [JSON] = rings.map { ring in
                switch ring.status {
                case let .success(status): return statusJSON(status, now: now)
                case let .failure(error):
                    let path = context.directory.filePath(for: ring.name)
                    return .members([
                        ("name", .string(ring.name)), ("path", .string(path)),
                        ("file_size", FileFacts(path: path).map { JSON.uint(UInt64($0.size)) }),
                        ("owner_uid", FileFacts(path: path).map { JSON.uint(UInt64($0.owner)) }),
                        ("error", errorJSON(error)),
                    ])
                }
            }
            console.print(JSON.object([("directory", .string(context.directory.path)), ("rings", .array(items))]).text)
            return ExitStatus.success
        }
        guard !rings.isEmpty else {
            console.print("no rings in \(context.directory.path)")
            return ExitStatus.success
        }
        // CAPACITY is each lane's and FILL the fullest lane's; BACKLOG, WRITTEN and DROPPED add up the lanes.
        var table = TextTable(
            [
                "RING", "UID", "PID", "PRODUCER", "HEARTBEAT", "LANES", "CAPACITY", "BACKLOG", "FILL", "WRITTEN",
                "DROPPED", "SIZE", "AGE", "VER",
            ],
            right: [
                "UID", "PID", "HEARTBEAT", "LANES", "CAPACITY", "BACKLOG", "FILL", "WRITTEN", "DROPPED", "SIZE",
                "AGE", "VER",
            ])
        var notes: [String] = []
        for ring in rings {
            // Whose file it is: with --allow-uid, files of several users are listed.
            let uid = FileFacts(path: context.directory.filePath(for: ring.name)).map { "\($0.owner)" } ?? "-"
            switch ring.status {
            case let .success(status):
                let producer = ProducerLiveness(status: status)
                let pid: String = status.producerPID > 0 ? "\(status.producerPID)" : "-"
                let heartbeat: String =
                    now.age(ofMonotonic: status.heartbeatMonotonicNanos).map { formatDuration($0, approximate: true) } ?? "-"
                let age: String = now.age(ofRealtime: status.createdRealtimeNanos).map { formatDuration($0, approximate: true) } ?? "-"
                let fill: String = oneDecimal(status.fillPercent) + "%"
                table.add([
                    ring.name, uid, pid, producer.short, heartbeat, "\(status.lanes.count)/\(status.maxLanes)", "\(status.capacity)",
                    "\(status.backlog)", fill, "\(status.writeCursor)", "\(status.dropped)", humanBytes(status.fileSize), age,
                    "\(status.formatVersion)",
                ])
            case let .failure(error):
                let size = FileFacts(path: context.directory.filePath(for: ring.name)).map { humanBytes($0.size) } ?? "-"
                table.add([ring.name, uid, "-", stateWord(error), "-", "-", "-", "-", "-", "-", "-", size, "-", "-"])
                notes.append("\(error)")
            }
        }
        table.lines.forEach { console.print($0) }
        notes.forEach { console.print($0) }
        return ExitStatus.success
    }

    /// What a ring that cannot be read is, in a word for the table.
    static func stateWord(_ error: RingError) -> String {
        switch error {
        case .corrupt: return "corrupt"
        case .notReady: return "being created"
        case .permissionDenied: return "permission denied"
        case .notARegularFile: return "not a file"
        case .notFound: return "gone"
        default: return "unreadable"
        }
    }
}

// MARK: - Its command line

extension ListCommand: DumpCommand {
    static let name = "list"
    static let usage = """
        usage: ringside-dump list [--json]

        Every ring (bot file) in the directory: name, producer pid, alive or dead (and how that
        is known: the producer's lock on the file, then whether the pid exists), heartbeat age,
        lanes allocated of the most allowed, each lane's capacity, backlog (every lane's) and
        fill (the fullest lane's), records written and dropped, file size, age and format version.
        """

    static func run(parsing arguments: DumpArguments, _ context: DumpContext) throws(UsageError) -> Int32 {
        if let ring = arguments.positionals.first { throw arguments.error("takes no ring name (got \(ring))") }
        return run(context)
    }
}
