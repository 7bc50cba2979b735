import RingsideCommandLine
import Ringside
import RingsideJSON

/// `ringside-dump clean`: removes rings whose producer is dead and which are fully drained
/// (`--force`: every ring whose producer is dead).
///
/// The decision is taken holding the ring's producer lock (`RingDirectory.removeUnlessProducerAlive`),
/// so a producer cannot attach, or write, between the look and the unlink. `--dry-run` takes
/// no lock: it must not disturb a bot that attaches meanwhile.
enum CleanCommand {
    struct Decision {
        let remove: Bool
        let reason: String
    }

    static func run(dryRun: Bool, force: Bool, _ context: DumpContext) -> Int32 {
        let names: [String]
        do throws(RingError) { names = try context.ringNames() } catch { return context.fail(error) }
        var outcomes: [(name: String, action: String, reason: String)] = []
        var failed = false

        for name in names {
            if dryRun {
                let look: Result<RingStatus, RingError>
                do throws(RingError) { look = .success(try context.inspector(name).settledStatus()) } catch { look = .failure(error) }
                if case let .success(status) = look, status.producerAlive {
                    outcomes.append((name, "kept", "producer alive (pid \(status.producerPID))"))
                    continue
                }
                let decision = decide(look, force: force)
                var reason = decision.reason
                if decision.remove, case .failure = look { reason += "; unless a producer holds it" }
                outcomes.append((name, decision.remove ? "would_remove" : "kept", reason))
                continue
            }
            var decision: Decision?
            do throws(RingError) {
                let removed = try context.directory.removeUnlessProducerAlive(name, allowedOwners: context.allowedOwners) { look in
                    decision = decide(look, force: force)
                    return decision!.remove
                }
                outcomes.append((name, removed ? "removed" : "kept", decision?.reason ?? ""))
            } catch {
                switch error {
                case let .producerAlive(_, pid):
                    outcomes.append((name, "kept", "producer alive (pid \(pid))"))
                case .notFound:
                    continue  // removed by someone else meanwhile
                case .permissionDenied, .notARegularFile:
                    outcomes.append((name, "kept", "\(error)"))
                default:
                    outcomes.append((name, "failed", "\(error)"))
                    failed = true
                }
            }
        }

        let console = context.console
        let removedCount = outcomes.filter { $0.action == "removed" || $0.action == "would_remove" }.count
        if context.json {
            console.print(
                JSON.object([
                    ("directory", .string(context.directory.path)), ("dry_run", .bool(dryRun)), ("force", .bool(force)),
                    (dryRun ? "would_remove" : "removed", .uint(UInt64(removedCount))),
                    (
                        "rings",
                        .array(
                            outcomes.map {
                                .object([
                                    ("name", .string($0.name)), ("action", .string($0.action)),
                                    ("reason", .string($0.reason)),
                                ])
                            })
                    ),
                ]).text)
        } else {
            for outcome in outcomes {
                let verb = ["removed": "removed", "would_remove": "would remove", "kept": "kept", "failed": "could not remove"][
                    outcome.action]!
                console.print("\(verb) ring \(outcome.name): \(outcome.reason)")
            }
            console.print(
                (dryRun ? "would remove" : "removed") + " \(removedCount) of \(names.count) ring\(names.count == 1 ? "" : "s")"
                    + " in \(context.directory.path)")
        }
        return failed ? ExitStatus.failure : ExitStatus.success
    }

    /// Whether a ring whose producer is dead goes, and why, from its status or why it has none.
    static func decide(_ look: Result<RingStatus, RingError>, force: Bool) -> Decision {
        switch look {
        case let .success(status):
            let pid = status.producerPID > 0 ? "producer dead (was pid \(status.producerPID))" : "no producer"
            if status.backlog == 0 { return Decision(remove: true, reason: "\(pid), fully drained") }
            if force { return Decision(remove: true, reason: "\(pid), \(status.backlog) records not drained (--force)") }
            return Decision(remove: false, reason: "\(pid) but \(status.backlog) records not drained (--force removes it)")
        case .failure(.notReady):
            return Decision(remove: true, reason: "never finished being created (no records)")
        case let .failure(.corrupt(_, _, problem)):
            if force { return Decision(remove: true, reason: "corrupt: \(problem) (--force)") }
            return Decision(remove: false, reason: "corrupt: \(problem) (--force removes it)")
        case let .failure(error):
            return Decision(remove: false, reason: "\(error)")
        }
    }
}

// MARK: - Its command line

extension CleanCommand: DumpCommand {
    static let name = "clean"
    static var options: OptionSpec { OptionSpec(flags: ["--dry-run", "--force"]) }
    static let usage = """
        usage: ringside-dump clean [--dry-run] [--force] [--json]

        Removes rings whose producer is dead (its lock is free) and which are fully drained;
        --force removes every ring whose producer is dead, drained or not, corrupt or not.
        Never removes a ring whose producer is alive: the producer lock is held while deciding
        and removing, so no producer can attach meanwhile. --dry-run only says what it would do.
        """

    static func run(parsing arguments: DumpArguments, _ context: DumpContext) throws(UsageError) -> Int32 {
        if let ring = arguments.positionals.first { throw arguments.error("takes no ring name (got \(ring)); it looks at every ring") }
        return run(dryRun: arguments.has("--dry-run"), force: arguments.has("--force"), context)
    }
}
