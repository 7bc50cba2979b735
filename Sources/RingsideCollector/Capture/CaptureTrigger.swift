/// What asked for a capture. Each trigger is rate-limited on its own (`key`): at most one capture
/// per `--capture-min-interval`, the rest counted as suppressed.
package enum CaptureTrigger: Sendable, Equatable {
    /// An SLO marked `capture` began to be violated (the rule's text).
    case slo(String)
    /// A histogram's value in the shortest window went above a `--capture-above` bound (its text).
    case threshold(String)
    /// A bot's producer died holding lanes (killed, crashed, or exited without detaching; its
    /// own file's: a worker's exit is how pools recycle them).
    case botDied(String)
    /// A bot's producer, or a worker's, was stopped (SIGSTOP, a debugger).
    case botStopped(String)
    /// `POST /api/capture` (and `ringside-dump capture`, which sends it).
    case request

    /// The trigger's kind: the `trigger` label of its counts, and its name in `/api/captures`.
    package var kind: String {
        switch self {
        case .slo: "slo"
        case .threshold: "threshold"
        case .botDied: "bot_died"
        case .botStopped: "bot_stopped"
        case .request: "request"
        }
    }

    /// What the rate limit keys on: each rule, bound and bot apart, requests together.
    var key: String {
        switch self {
        case let .slo(rule): "slo " + rule
        case let .threshold(bound): "threshold " + bound
        case let .botDied(bot): "bot_died " + bot
        case let .botStopped(bot): "bot_stopped " + bot
        case .request: "request"
        }
    }

    /// What it says of itself in `/api/captures` and the log.
    package var detail: String {
        switch self {
        case let .slo(rule): rule
        case let .threshold(bound): bound
        case let .botDied(bot), let .botStopped(bot): bot
        case .request: ""
        }
    }
}
