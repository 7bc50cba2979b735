import Foundation
import PackagePlugin

/// Writes `BuildRevision.swift` into the target it is applied to (RingsideCommandLine): the git
/// commit the package's sources are checked out at (`git rev-parse --short HEAD`), or "unknown"
/// when that cannot be known: no git, or no repository whose top is the package directory (a
/// tarball unpacked inside another project's repository must not take that project's commit).
///
/// A build command whose inputs are the files git changes whenever HEAD moves (`HEAD`, the
/// branch it names, `logs/HEAD`): it runs on the first build and again after a commit, a
/// checkout or a reset, and costs nothing otherwise. (A prebuild command would not do: SwiftPM
/// skips them on incremental builds, swiftlang/swift-package-manager#5476, so a commit would
/// leave the old revision in place.) The file is rewritten only when its text changes.
@main
struct RingsideRevision: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let package = context.package.directoryURL
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("BuildRevision.swift")
        // The build's PATH, so the git the developer has is the one used; the usual places as a fallback.
        let path = (ProcessInfo.processInfo.environment["PATH"].map { $0 + ":" } ?? "") + "/usr/local/bin:/usr/bin:/bin"
        return [
            .buildCommand(
                displayName: "Recording the git revision for \(target.name)",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", Self.script, "ringside-revision", package.path, output.path],
                environment: ["PATH": path, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"],
                inputFiles: Self.headFiles(of: package),
                outputFiles: [output])
        ]
    }

    /// The files that change when the repository's HEAD moves, those that exist: none when the
    /// package directory is not the top of a repository (then the command runs once, for "unknown").
    static func headFiles(of package: URL) -> [URL] {
        let dotGit = package.appendingPathComponent(".git")
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dotGit.path, isDirectory: &isDirectory) else { return [] }
        var gitDirectory = dotGit
        if !isDirectory.boolValue {
            // A worktree or a submodule: `.git` is a file saying `gitdir: PATH`.
            guard let text = try? String(contentsOf: dotGit, encoding: .utf8), text.hasPrefix("gitdir:") else { return [] }
            let named = text.dropFirst("gitdir:".count).trimmingCharacters(in: .whitespacesAndNewlines)
            gitDirectory = named.hasPrefix("/") ? URL(fileURLWithPath: named) : package.appendingPathComponent(named)
        }
        let head = gitDirectory.appendingPathComponent("HEAD")
        var files = [head, gitDirectory.appendingPathComponent("logs/HEAD")]
        // HEAD names a branch (`ref: refs/heads/main`); its file is in the common directory of a worktree.
        if let text = try? String(contentsOf: head, encoding: .utf8), text.hasPrefix("ref:") {
            let ref = text.dropFirst("ref:".count).trimmingCharacters(in: .whitespacesAndNewlines)
            var common = gitDirectory
            if let shared = try? String(contentsOf: gitDirectory.appendingPathComponent("commondir"), encoding: .utf8) {
                let named = shared.trimmingCharacters(in: .whitespacesAndNewlines)
                common = named.hasPrefix("/") ? URL(fileURLWithPath: named) : gitDirectory.appendingPathComponent(named)
            }
            files.append(common.appendingPathComponent(ref))
            files.append(common.appendingPathComponent("packed-refs"))
        }
        return files.filter { FileManager.default.fileExists(atPath: $0.path) }
    }

    /// `$1` the package directory, `$2` the file to write. Never fails the build: anything
    /// unexpected gives "unknown".
    static let script = #"""
        package="$1"; file="$2"
        mkdir -p "$(dirname "$file")" || exit 1
        revision=unknown
        if command -v git >/dev/null 2>&1; then
            top=$(git -C "$package" rev-parse --show-toplevel 2>/dev/null) || top=
            if [ -n "$top" ] && [ "$(cd "$top" 2>/dev/null && pwd -P)" = "$(cd "$package" && pwd -P)" ]; then
                revision=$(git -C "$package" rev-parse --short HEAD 2>/dev/null) || revision=unknown
            fi
        fi
        case "$revision" in ''|*[!0-9a-f]*) revision=unknown ;; esac
        text="// Generated at build time by the RingsideRevision plugin (Sources/RingsideRevision): do not edit.
        let buildRevision = \"$revision\""
        if [ ! -f "$file" ] || [ "$(cat "$file")" != "$text" ]; then
            printf '%s\n' "$text" > "$file.tmp" && mv -f "$file.tmp" "$file"
        fi
        exit 0
        """#
}
