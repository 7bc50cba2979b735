import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// `setpriv` arguments that run a program as nobody (uid and gid 65534, no other groups).
private let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]

/// `ringside-test-producer sched-threads` run as nobody in `directory`: its pid and its threads'
/// ids by name (burner, napper, leaver, holding lanes 0, 1 and 2).
private struct NobodysBot {
    let process: ChildProcess
    let pid: Int32
    let tids: [String: Int32]
    let ring: String
    let path: String

    init(setpriv: String, ring: String, in directory: RingDirectory) throws {
        self.ring = ring
        process = try ChildProcess(
            setpriv,
            asNobody + [try builtExecutable("ringside-test-producer"), "sched-threads", "--dir", directory.path, "--ring", ring],
            withInput: true)
        let words = process.readLine()?.split(separator: " ").map(String.init) ?? []
        guard words.count == 8, words[0] == "ready", let pid = Int32(words[1]) else {
            throw TestSupportError("nobody's producer of \(ring) did not start: \(words) \(process.waitForExit().standardError)")
        }
        self.pid = pid
        var tids: [String: Int32] = [:]
        for index in stride(from: 2, to: 8, by: 2) { tids[words[index]] = Int32(words[index + 1]) }
        self.tids = tids
        path = directory.filePath(for: ring)
    }

    /// Writes into its file what nobody may write into its own: `pid` as its producer, and for
    /// each lane held by one of its threads, the thread id `lanes` maps that thread's to.
    func pose(as pid: Int32?, lanes: [String: Int32]) {
        if let pid { patch(path, at: headerOffset(\.producer_pid), with: pid) }
        let header = fileHeader(path)
        for lane in 0..<Int(header.lanes_allocated) {
            let at = Int(header.lanes_offset) + lane * Int(header.lane_size) + laneHeaderOffset(\.owner_tid)
            var holder: Int32 = 0
            let fd = open(path, O_RDONLY)
            _ = withUnsafeMutableBytes(of: &holder) { pread(fd, $0.baseAddress, $0.count, off_t(at)) }
            close(fd)
            guard let name = tids.first(where: { $0.value == holder })?.key, let tid = lanes[name] else { continue }
            patch(path, at: at, with: tid)
        }
    }
}

/// The thread ids of this process (root's): from /proc/self/task, its main thread's first.
private func ownThreadIDs() throws -> [Int32] {
    let ids = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").compactMap { Int32($0) }
    return [getpid()] + ids.filter { $0 != getpid() }.sorted()
}

/// The lines of a Prometheus page whose name starts with one of `prefixes`, for ring `ring`.
private func seriesLines(_ page: String, ring: String, _ prefixes: String...) -> [Substring] {
    page.split(separator: "\n").filter { line in
        prefixes.contains { line.hasPrefix($0 + "{") } && line.contains("ring=\"\(ring)\"")
    }
}

/// The value of the series `line` (name and labels as written) on `page`, or nil.
private func value(_ page: String, _ line: String) -> Double? {
    page.split(separator: "\n").first { $0.hasPrefix(line + " ") }.flatMap { Double($0.dropFirst(line.count + 1)) }
}

@Suite("Thread health against another user: a root collector with --allow-uid reads only what each ring's owner owns")
struct ThreadHealthOwnerTests {
    @Test(
        "rings of nobody naming root's pids (pid 1, the test's own, a set-user-ID program's) and tids of other processes: none of it is exported, all counted; nobody's honest bot is"
    )
    func nobodyNamesRootsProcesses() throws {
        guard try requiredRoot("a collector running as root, and rings of user nobody (setpriv)"),
            let setpriv = try requiredSystemTool("setpriv")
        else { return }
        try withRingDirectory { directory in
            // Nobody may make files here, as in a shared /dev/shm.
            #expect(chmod(directory.path, 0o1777) == 0)
            let honest = try NobodysBot(setpriv: setpriv, ring: "honest", in: directory)
            defer { honest.process.kill() }
            // A process nobody started that runs with root's rights: real uid nobody's, effective
            // and saved root's (as a set-user-ID root program nobody runs).
            let setuid = try ChildProcess(setpriv, ["--ruid=65534", "--rgid=65534", "--clear-groups", "sleep", "600"])
            defer { setuid.kill() }
            let own = try ownThreadIDs()
            let rootTIDs = ["burner": own[0], "napper": own[min(1, own.count - 1)], "leaver": own[min(2, own.count - 1)]]
            let posers = try [
                ("posing-root", getpid(), rootTIDs),
                ("posing-init", Int32(1), ["burner": 1, "napper": 1, "leaver": 1]),
                ("posing-setuid", setuid.pid, ["burner": setuid.pid, "napper": setuid.pid, "leaver": setuid.pid]),
            ].map { ring, pid, lanes in
                let bot = try NobodysBot(setpriv: setpriv, ring: ring, in: directory)
                bot.pose(as: pid, lanes: lanes)
                return bot
            }
            defer { for bot in posers { bot.process.kill() } }
            // Its own process, but its napper's lane names a thread of nobody's honest bot, and its
            // leaver's one of root's: neither is a thread of its process. Its burner is its own.
            let stray = try NobodysBot(setpriv: setpriv, ring: "stray", in: directory)
            defer { stray.process.kill() }
            stray.pose(as: nil, lanes: ["napper": honest.tids["napper"] ?? 0, "leaver": own[0]])
            #expect(fileOwner(stray.path) == 65_534, "nobody's file")

            let (collector, port) = try startCollector([
                "--dir", directory.path, "--allow-uid", "65534", "--poll", "20ms", "--thread-sample-interval", "100ms",
            ])
            defer { collector.kill() }
            let refusedLines = [
                "ringside_thread_health_refused_total{ring=\"posing-root\",uid=\"65534\",reason=\"other_owner\"}",
                "ringside_thread_health_refused_total{ring=\"posing-init\",uid=\"65534\",reason=\"other_owner\"}",
                "ringside_thread_health_refused_total{ring=\"posing-setuid\",uid=\"65534\",reason=\"other_owner\"}",
                "ringside_thread_health_refused_total{ring=\"stray\",uid=\"65534\",reason=\"not_its_thread\"}",
            ]
            let health = ["ringside_thread_", "ringside_bot_process_"].flatMap { prefix in
                [
                    "cpu_seconds_total", "runqueue_wait_seconds_total", "timeslices_total", "context_switches_total", "last_cpu",
                    "migrations_total", "resident_memory_bytes", "threads", "open_fds", "major_page_faults_total", "start_time_seconds",
                ]
                .map { prefix + $0 }
            }
            // The threads named, each once: root's (as many as differ), pid 1's, the program's, and stray's two.
            let refusedThreads = Set(rootTIDs.values).count + 1 + 1 + 2
            /// What `page` shows that it should not, or lacks.
            func problems(_ page: String) -> [String] {
                var problems: [String] = []
                for bot in posers {
                    let shown = health.flatMap { seriesLines(page, ring: bot.ring, $0) }
                    if !shown.isEmpty {
                        problems.append("\(bot.ring) shows \(shown.count) series of another user's process: \(shown.prefix(2))")
                    }
                }
                // Nobody's honest bot: its three threads and its process, read as before; stray's burner and process.
                for (ring, family, count) in [
                    ("honest", "ringside_thread_cpu_seconds_total", 3), ("honest", "ringside_bot_process_threads", 1),
                    ("stray", "ringside_thread_cpu_seconds_total", 1), ("stray", "ringside_bot_process_threads", 1),
                ] where seriesLines(page, ring: ring, family).count != count {
                    problems.append("\(ring): not \(count) \(family)")
                }
                // Each refused once: a ring's process and its three lanes; stray's two lanes not its threads.
                for (line, count) in zip(refusedLines, [4.0, 4, 4, 2]) where value(page, line) != count {
                    problems.append("\(line) is \(value(page, line).map { "\($0)" } ?? "missing"), not \(count)")
                }
                if value(page, "ringside_collector_thread_sampler_refused") != Double(refusedThreads) {
                    problems.append("ringside_collector_thread_sampler_refused is not \(refusedThreads)")
                }
                return problems
            }
            let settled = try eventually(seconds: 30) { () -> String? in
                let page = try httpGet(port: port, path: "/metrics").body
                return problems(page).isEmpty ? page : nil
            }
            let page = try settled ?? httpGet(port: port, path: "/metrics").body
            for bot in posers {
                print("\(bot.ring): \(health.flatMap { seriesLines(page, ring: bot.ring, $0) }.count) thread and process series")
            }
            #expect(problems(page).isEmpty, "\(problems(page))")

            let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
            let rings = try #require(latest["rings"] as? [[String: Any]])
            let posingRoot = try #require(rings.first { $0["name"] as? String == "posing-root" })
            #expect(posingRoot["producer_pid"] as? Int == Int(getpid()), "it names root's pid")
            #expect(posingRoot["process"] == nil && (posingRoot["lanes"] as? [[String: Any]])?.allSatisfy { $0["thread"] == nil } == true)
            #expect((posingRoot["thread_health_refused"] as? [String: Any])?["other_owner"] as? Int == 4)

            // Said once for each bot and reason, with whose process it is.
            collector.send(SIGTERM)
            let log = collector.waitForExit().standardError
            let said = log.split(separator: "\n").filter { $0.contains("thread sampling: ring ") }
            #expect(said.count == 4, "\(said)")
            #expect(
                said.contains {
                    $0.contains(
                        "ring posing-root names pid \(getpid()) as its producer, which runs as uid 0, not as the file's owner uid 65534")
                })
            #expect(
                said.contains {
                    $0.contains(
                        "ring posing-setuid names pid \(setuid.pid) as its producer, which runs as uids 65534,0,0,0 and gids 65534,0,0,0")
                })
            #expect(
                said.contains {
                    $0.contains(
                        "ring stray lane 1 names thread \(honest.tids["napper"] ?? 0) of pid \(stray.pid), which is not a thread of that process"
                    )
                }
                    || said.contains {
                        $0.contains("ring stray lane 2 names thread \(own[0]) of pid \(stray.pid), which is not a thread of that process")
                    })
        }
    }
}

/// The owner of the entry at `path`.
private func fileOwner(_ path: String) -> uid_t? {
    var info = stat()
    return lstat(path, &info) == 0 ? info.st_uid : nil
}
