import Foundation
import CRingsideBench
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideJSON
import RingsideSystem

/// The machine a run happened on, as docs/benchmarks.md's tables name it.
package struct Machine: Sendable, Equatable {
    /// `/proc/cpuinfo`'s model name.
    package var cpu: String
    /// Online CPUs, and those this process may use.
    package var cores: Int
    package var allowedCores: Int
    /// The kernel's clock source (`tsc`, `kvm-clock`, `hpet`, ...): what CLOCK_MONOTONIC costs.
    package var clockSource: String
    /// `uname -sr -m`.
    package var kernel: String
    /// Whether the measuring threads were pinned to CPUs of their own.
    package var pinned: Bool
    /// The clock this process times spans with, and why (`Bot.spanClockDescription`).
    package var spanClock: String

    package init(
        cpu: String, cores: Int, allowedCores: Int, clockSource: String, kernel: String, pinned: Bool, spanClock: String = ""
    ) {
        self.cpu = cpu
        self.cores = cores
        self.allowedCores = allowedCores
        self.clockSource = clockSource
        self.kernel = kernel
        self.pinned = pinned
        self.spanClock = spanClock
    }

    /// The machine this process runs on.
    package static func current(pinned: Bool) -> Machine {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown"
        let source =
            (try? String(
                contentsOfFile: "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
        let names = System.uname()
        func field<T>(_ value: T) -> String {
            withUnsafeBytes(of: value) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        return Machine(
            cpu: model, cores: (try? System.sysconf(_SC_NPROCESSORS_ONLN)) ?? 0,
            allowedCores: Int(rsb_allowed_cpu_count()), clockSource: source,
            kernel: "\(field(names.sysname)) \(field(names.release)) \(field(names.machine))",
            pinned: pinned, spanClock: Bot.spanClockDescription)
    }

    package var json: JSON {
        .object([
            ("cpu", .string(cpu)), ("cores", .int(Int64(cores))),
            ("allowed_cores", .int(Int64(allowedCores))), ("clocksource", .string(clockSource)),
            ("kernel", .string(kernel)), ("pinned", .bool(pinned)), ("span_clock", .string(spanClock)),
        ])
    }

    /// One line for the table's heading.
    package var line: String {
        "\(cpu), \(cores) cores (\(allowedCores) usable), clocksource \(clockSource), \(kernel)"
            + (pinned ? ", threads pinned" : ", threads not pinned")
    }
}
