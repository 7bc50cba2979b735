//! Why a bot could not be attached or a metric registered: a sentence naming the bot, as the C
//! producer's `rs_error.message` ("bot bot-a: another producer is attached (pid 4242); a bot has
//! one process, or several as its workers (attach with the worker option)").

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Every way attaching a bot, registering a metric or making an exemplar can fail. `Display`
/// gives the sentence, which starts with "bot NAME: " ("invalid exemplar: " for an exemplar, made
/// apart from any bot); [`Error::bot`] gives the name alone.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A bot name that is not 1 to 200 of `[A-Za-z0-9._-]` (or is `.` or `..`).
    InvalidBotName { bot: String },
    /// A metric name that is not `[a-zA-Z_][a-zA-Z0-9_]*` of at most 104 bytes.
    InvalidMetricName { bot: String, metric: String },
    /// Labels the format cannot hold: a bad or reserved key, a key twice, a newline or NUL in a
    /// value, more than 256 bytes in all, a label named `pid` on a per-worker gauge.
    InvalidLabels { bot: String, metric: String, reason: String },
    /// Help text of more than 128 bytes, or holding a NUL.
    InvalidHelp { bot: String, metric: String },
    /// An option or a sampling rate out of its range, a merge policy on a metric that is not a
    /// gauge, a resolution that is no power of ten from 1e-18 to 1e18, signed values on a metric
    /// that is not a histogram, a resolution on a gauge, or a thread name holding a NUL (`reason`
    /// says which and why).
    InvalidOption { bot: String, reason: String },
    /// An exemplar the format cannot hold ([`Exemplar`](crate::Exemplar): EXEMPLARS in
    /// ringside.h): more than 64 bytes or none, a key that is not a name or is given twice, a
    /// newline or NUL in a value. `reason` says which, as C's `rs_exemplar_check` does. Nothing
    /// is written: an exemplar is never cut.
    InvalidExemplar { reason: String },
    /// The metric (same name and labels) is registered with another kind, unit, sampling, merge
    /// policy (a gauge's [`GaugeMerge`](crate::GaugeMerge)) or values (signed or not, resolution:
    /// VALUES in ringside.h); or a forked child's worker file, left
    /// by a dead process, holds another metric than the parent's at one of its indices.
    Conflict { bot: String, metric: String, reason: String },
    /// No room for another metric in the bot's registry (its `max_metrics`, chosen at creation).
    RegistryFull { bot: String, metric: String, capacity: u32 },
    /// Another process (or this one) holds the bot's file (its lock on byte 0); several processes
    /// write one bot as its workers, each its own file (`Options::worker`).
    ProducerAlive { bot: String, pid: i32 },
    /// The file is not a valid bot file.
    Corrupt { bot: String, path: PathBuf, reason: String },
    /// The file has another format version (`version`) or another layout than the one asked for.
    Incompatible { bot: String, path: PathBuf, version: Option<u32>, reason: String },
    /// The directory has no room for the bytes the file needs (ENOSPC or EDQUOT).
    NoSpace { bot: String, path: PathBuf, directory: PathBuf, bytes: u64 },
    /// The file could not be created: the directory has no free inodes (or a quota is reached).
    NoInodes { bot: String, path: PathBuf, directory: PathBuf },
    /// The file belongs to another user (`owner`), or the directory refuses us (EACCES).
    PermissionDenied { bot: String, path: PathBuf, owner: Option<u32>, reason: String },
    /// The path is a symbolic link, which Ringside never follows.
    SymbolicLink { bot: String, path: PathBuf },
    /// The path is not a regular file: `kind` says what it is ("a FIFO (named pipe)", "a
    /// character device", "a directory", "a socket"...), `owner` whose it is (another user may
    /// plant one at a bot's name in a shared directory such as /dev/shm). Opened without waiting
    /// (`O_NONBLOCK`): never a hang.
    NotRegularFile { bot: String, path: PathBuf, kind: &'static str, owner: u32 },
    /// The file kept being replaced while attaching.
    NotReady { bot: String, path: PathBuf },
    /// The process already holds 64 bots at once.
    TooManyBots { bot: String },
    /// The bound on worker files (`Options::max_workers`; WORKERS in ringside.h): the directory
    /// holds `workers` worker files of the bot of this user (this process's aside), at least
    /// `max_workers`, each held by a live worker, so there is no gone worker's file to continue;
    /// or this process's own worker file (`own_file_unusable`, `<name>@<pid>`) and the 8 random
    /// names it tried in its place (`<name>@<pid>.<n>`) were all unusable (another user's files,
    /// links, files held by other live processes) and no gone worker's file is free to continue.
    /// The process writes nothing to the bot (`RS_E_TOO_MANY_WORKERS`). `counted`: the refusal
    /// was added to `workers_refused` in the bot's own file (false when that file is missing).
    TooManyWorkers { bot: String, workers: u32, own_file_unusable: Option<PathBuf>, counted: bool },
    /// This process (`pid`), a fork of one that attached the bot, could not make its worker file
    /// of the bot (`reason`; said once on stderr): it writes nothing to the bot.
    Forked { bot: String, pid: u32, reason: String },
    /// Another system call failed.
    Io { bot: String, operation: String, path: PathBuf, source: io::Error },
}

impl Error {
    /// The bot the error is about ("" for [`Error::InvalidExemplar`]: an exemplar is made apart
    /// from any bot).
    pub fn bot(&self) -> &str {
        match self {
            Error::InvalidExemplar { .. } => "",
            Error::InvalidBotName { bot }
            | Error::InvalidMetricName { bot, .. }
            | Error::InvalidLabels { bot, .. }
            | Error::InvalidHelp { bot, .. }
            | Error::InvalidOption { bot, .. }
            | Error::Conflict { bot, .. }
            | Error::RegistryFull { bot, .. }
            | Error::ProducerAlive { bot, .. }
            | Error::Corrupt { bot, .. }
            | Error::Incompatible { bot, .. }
            | Error::NoSpace { bot, .. }
            | Error::NoInodes { bot, .. }
            | Error::PermissionDenied { bot, .. }
            | Error::SymbolicLink { bot, .. }
            | Error::NotRegularFile { bot, .. }
            | Error::NotReady { bot, .. }
            | Error::TooManyBots { bot }
            | Error::TooManyWorkers { bot, .. }
            | Error::Forked { bot, .. }
            | Error::Io { bot, .. } => bot,
        }
    }

    pub(crate) fn io(bot: &str, operation: &str, path: &std::path::Path, errno: i32) -> Error {
        Error::Io {
            bot: bot.to_string(),
            operation: operation.to_string(),
            path: path.to_path_buf(),
            source: io::Error::from_raw_os_error(errno),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !matches!(self, Error::InvalidExemplar { .. }) {
            write!(f, "bot {}: ", self.bot())?;
        }
        match self {
            Error::InvalidExemplar { reason } => write!(f, "invalid exemplar: {reason}"),
            Error::InvalidBotName { .. } => write!(f, "a bot name is 1 to 200 of [A-Za-z0-9._-], not . or .."),
            Error::InvalidMetricName { metric, .. } => write!(
                f,
                "metric name \"{metric}\" must match [a-zA-Z_][a-zA-Z0-9_]* and have at most {} bytes",
                crate::layout::NAME_MAX
            ),
            Error::InvalidLabels { metric, reason, .. } => write!(f, "metric {metric}: {reason}"),
            Error::InvalidHelp { metric, .. } => write!(
                f,
                "metric {metric}: the help text must be at most {} bytes, without NUL",
                crate::layout::HELP_MAX
            ),
            Error::InvalidOption { reason, .. } => write!(f, "{reason}"),
            Error::Conflict { reason, .. } => write!(f, "{reason}"),
            Error::RegistryFull { metric, capacity, .. } => write!(
                f,
                "metric {metric}: the registry is full ({capacity} metrics); a bot file made with a larger max_metrics holds more"
            ),
            Error::ProducerAlive { pid, .. } => {
                write!(
                    f,
                    "another producer is attached (pid {pid}); a bot has one process, or several as its workers \
                     (attach with the worker option)"
                )
            }
            Error::Corrupt { path, reason, .. } => write!(f, "{} is corrupt: {reason}", path.display()),
            Error::Incompatible { path, reason, .. } => write!(f, "{}: {reason}", path.display()),
            Error::NoSpace { path, directory, bytes, .. } => write!(
                f,
                "no space for {bytes} bytes at {} (is {} full?)",
                path.display(),
                directory.display()
            ),
            Error::NoInodes { path, directory, .. } => write!(
                f,
                "cannot create {}: {} has no free inodes (or a quota is reached; df -i says which)",
                path.display(),
                directory.display()
            ),
            Error::PermissionDenied { reason, .. } => write!(f, "{reason}"),
            Error::SymbolicLink { path, .. } => {
                write!(f, "{} is a symbolic link; Ringside never follows links", path.display())
            }
            Error::NotRegularFile { path, kind, owner, .. } => write!(
                f,
                "{} is {kind} owned by uid {owner}, not a regular file of uid {}; a bot opens only regular files of its \
                 own user (have it removed, or attach another name)",
                path.display(),
                crate::sys::effective_uid()
            ),
            Error::NotReady { path, .. } => {
                write!(f, "{} kept being replaced while attaching (8 attempts)", path.display())
            }
            Error::TooManyBots { .. } => write!(f, "the process already holds 64 bots; drop one first"),
            Error::TooManyWorkers { workers, own_file_unusable, counted, .. } => {
                match own_file_unusable {
                    Some(path) => write!(
                        f,
                        "its worker file {} and {} other names were unusable, and no gone worker's file is free \
                         to continue",
                        path.display(),
                        crate::layout::WORKER_NAME_ATTEMPTS
                    )?,
                    None => {
                        write!(f, "the bot has {workers} worker files (max_workers), each held by a live worker")?
                    }
                }
                if *counted {
                    write!(f, "; counted in the bot's file (workers_refused)")
                } else {
                    write!(f, "; not counted: the bot's own file is missing")
                }
            }
            Error::Forked { pid, reason, .. } => {
                write!(f, "this forked child (pid {pid}) could not make its worker file of the bot: {reason}")
            }
            Error::Io { operation, path, source, .. } => write!(
                f,
                "{operation} {}: {source}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
