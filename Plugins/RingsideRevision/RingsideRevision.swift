import Foundation
import PackagePlugin

/// Writes `BuildRevision.swift` into the target it is applied to (RingsideCommandLine): the git
/// commit the package's sources were checked out at (`git rev-parse --short HEAD`), or "unknown"
/// when that cannot be known (no git, no repository, or a package directory that is not the top of
/// its repository: a tarball unpacked inside another project's repository must not take that
/// project's commit).
///
/// A prebuild command, so it runs at every build (a few milliseconds: one `sh` and two `git`
/// calls) and sees a new commit without any input files to track. The file is replaced only when
/// its text changes, so a build at the same commit compiles nothing again.
@main
struct RingsideRevision: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("generated")
        // The build's PATH, so the git the developer has is the one used; the usual places as a fallback.
        let path = (ProcessInfo.processInfo.environment["PATH"].map { $0 + ":" } ?? "") + "/usr/local/bin:/usr/bin:/bin"
        return [
            .prebuildCommand(
                displayName: "Recording the git revision for \(target.name)",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", Self.script, "ringside-revision", context.package.directoryURL.path, output.path],
                environment: ["PATH": path, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"],
                outputFilesDirectory: output),
        ]
    }

    /// `$1` the package directory, `$2` the output directory. Never fails the build: anything
    /// unexpected gives "unknown".
    static let script = #"""
    package="$1"; out="$2"
    mkdir -p "$out" || exit 1
    revision=unknown
    if command -v git >/dev/null 2>&1; then
        top=$(git -C "$package" rev-parse --show-toplevel 2>/dev/null) || top=
        if [ -n "$top" ] && [ "$(cd "$top" 2>/dev/null && pwd -P)" = "$(cd "$package" && pwd -P)" ]; then
            revision=$(git -C "$package" rev-parse --short HEAD 2>/dev/null) || revision=unknown
        fi
    fi
    case "$revision" in ''|*[!0-9a-f]*) revision=unknown ;; esac
    text="// Generated at build time by the RingsideRevision plugin (Plugins/RingsideRevision): do not edit.
    let buildRevision = \"$revision\""
    file="$out/BuildRevision.swift"
    if [ ! -f "$file" ] || [ "$(cat "$file")" != "$text" ]; then
        printf '%s\n' "$text" > "$file.tmp" && mv -f "$file.tmp" "$file"
    fi
    exit 0
    """#
}
