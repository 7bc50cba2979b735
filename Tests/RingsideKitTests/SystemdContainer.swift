import Foundation
import RingsideTestSupport

/// A machine booted by systemd as its PID 1, in a container (`systemd-nspawn --boot`): this
/// host's `/usr` read-only under a root of its own in memory (`--volatile=yes`: a fresh `/etc`,
/// `/var` and `/dev/shm`), its own network (loopback only), the files `binds` names bound in
/// read-only. Units the host's presets would enable are not (a preset of the test's disables
/// them): only what a test starts runs. Commands run inside through `nsenter`.
final class SystemdContainer {
    private let nspawn: RunningProcess
    private let scratch: TemporaryDirectory
    /// The container's PID 1 (systemd), as this host sees it.
    private(set) var leader: Int32

    /// Boots the container and waits until systemd has started (`systemctl is-system-running`
    /// says `running` or `degraded`), at most `bootSeconds`.
    /// - Parameter binds: (a host path, where it appears inside).
    init(nspawn path: String, binds: [(host: String, inside: String)], bootSeconds: Double = 120) throws {
        scratch = try TemporaryDirectory("ringside-systemd")
        let preset = scratch.path + "/00-ringside-test.preset"
        try "disable *\n".write(toFile: preset, atomically: true, encoding: .utf8)
        let name = "ringside-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        // --keep-unit and --register=no: no systemd runs on this host to give it a scope or a machine.
        var arguments = [
            "--quiet", "--directory=/", "--volatile=yes", "--boot", "--register=no", "--keep-unit", "--machine=\(name)",
            "--console=passive", "--private-network", "--tmpfs=/usr/local",
            "--bind-ro=\(preset):/etc/systemd/system-preset/00-ringside-test.preset",
        ]
        arguments += binds.map { "--bind-ro=\($0.host):\($0.inside)" }
        // Its first boot asks nothing (systemd-firstboot would wait for a console no one reads).
        arguments.append("systemd.firstboot=off")
        nspawn = try RunningProcess(path, arguments, environment: [:])
        // Its PID 1 is the one child of systemd-nspawn.
        let started = Date()
        var found: Int32?
        while found == nil, Date().timeIntervalSince(started) < bootSeconds, nspawn.isRunning {
            found = Self.children(of: nspawn.pid).first
            if found == nil { usleep(50_000) }
        }
        guard let found else {
            let run = nspawn.finish(timeoutSeconds: 5)
            scratch.remove()
            throw TestSupportError("systemd-nspawn started no container: \(run.errors)")
        }
        leader = found
        var state = ""
        while Date().timeIntervalSince(started) < bootSeconds {
            // The first child seen may be systemd-nspawn's own helper, which starts the container's
            // PID 1 and exits (a CI run's nsenter then found its namespaces gone): look again then.
            if !Self.hasNamespaces(leader), let current = Self.children(of: nspawn.pid).first(where: Self.hasNamespaces) {
                leader = current
            }
            state = (try? run(["systemctl", "is-system-running"]).output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? ""
            if state == "running" || state == "degraded" { return }
            usleep(200_000)
        }
        stop()
        throw TestSupportError(
            "the container did not boot within \(Int(bootSeconds)) s (systemd says \(state.isEmpty ? "nothing" : state))")
    }

    /// `arguments` run inside, to completion.
    @discardableResult
    func run(_ arguments: [String], timeoutSeconds: Double = 60) throws -> ProcessRun {
        try runProcess("/usr/bin/nsenter", enter + arguments, mergingErrors: true, timeoutSeconds: timeoutSeconds)
    }

    /// `arguments` started inside, running until killed.
    func start(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess("/usr/bin/nsenter", enter + arguments)
    }

    /// A file inside, by its path inside.
    func path(_ inside: String) -> String { "/proc/\(leader)/root" + inside }

    /// Powers it off (systemd-nspawn asks its PID 1 to, at SIGTERM), and kills it if that takes
    /// over 30 s.
    func stop() {
        nspawn.send(SIGTERM)
        _ = nspawn.finish(timeoutSeconds: 30)
        scratch.remove()
    }

    /// Into every namespace of the container's PID 1 but the user's (it has none of its own).
    private var enter: [String] { ["--target", "\(leader)", "--mount", "--uts", "--ipc", "--net", "--pid", "--"] }

    /// Whether process `pid` is alive with namespaces to enter (an exited one, even unreaped, has none).
    private static func hasNamespaces(_ pid: Int32) -> Bool { FileManager.default.fileExists(atPath: "/proc/\(pid)/ns/ipc") }

    private static func children(of pid: Int32) -> [Int32] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.flatMap { task -> [Int32] in
            let list = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? ""
            return list.split(separator: " ").compactMap { Int32($0) }
        }
    }
}
