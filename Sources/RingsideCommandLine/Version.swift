/// The version every Ringside executable reports (`--version`) and the collector exports
/// (`ringside_build_info`). Defined here only.
package enum RingsideVersion {
    /// The release.
    package static let version = "0.4.0"

    /// The git commit the binary was built from (`git rev-parse --short HEAD`, recorded at build
    /// time by the RingsideRevision plugin), or "unknown" when the sources were not a git checkout.
    package static let revision = buildRevision

    /// What `--version` prints: `ringside-collector 0.4.0 (revision abc1234)`.
    package static func line(program: String) -> String {
        "\(program) \(version) (revision \(revision))"
    }
}

/// What a command line asks for: a run with its options, the help text, or the version line.
package enum Invocation<Options> {
    case run(Options)
    case help
    case version
}

extension Invocation: Equatable where Options: Equatable {}
extension Invocation: Sendable where Options: Sendable {}
