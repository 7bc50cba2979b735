//! The bound on a bot's worker files (`Options::max_workers`, WORKERS in ringside.h), as C's and
//! Python's tests check it: past the bound a new worker continues the file of a worker that is
//! gone, and when every one is held by a live worker it writes nothing, says why (a forked child
//! once on stderr, a worker by option with `Error::TooManyWorkers`) and is counted in the bot's
//! file's `workers_refused`. And a worker whose own name is unusable (held by another live
//! process, a link, a directory, a corrupt file) takes `<name>@<pid>.<n>`, `n` random; only when
//! that name and 8 random ones are all unusable (a read-only directory, as a user it binds) does it
//! continue a gone worker's file, by that file's name, or is refused. The tests fork the test
//! process: they take turns (common::fork::take_turn), each child reports one byte to its parent,
//! then waits for its word to `_exit` (or for the parent's end of the channel to close, if the
//! parent's test fails first); the parent reaps every child.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod common;

use common::fork::{as_nobody, effective_uid, files_in, fork_reporting, take_turn, wait_for, waitpid, NOBODY};
use common::{Collector, RingFile, ScratchDir};
use ringside::{Bot, Counter, Error, Options};
use std::fs::Permissions;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Increments each forked worker makes.
const N: u64 = 1000;

fn options(dir: &ScratchDir, max_workers: u32) -> Options {
    Options { directory: Some(dir.path.clone()), lane_capacity: Some(1024), max_workers, ..Options::default() }
}

/// A counter's total in a file: its cells over every lane, plus its metric cell's `unlaned`.
fn counter_total(file: &RingFile, metric: u32) -> u64 {
    (0..file.lanes_allocated()).map(|lane| file.lane_cell(lane, metric)).sum::<u64>() + file.metric_cell(metric).2
}

/// `workers_refused` (0x0A8) of a bot file.
fn workers_refused(path: &Path) -> u64 {
    RingFile::read(path).u64(0xA8)
}

/// A forked child, alive until `finish` (or until it is dropped: reaped then too).
struct Child {
    pid: i32,
    channel: UnixStream,
    stderr: PathBuf,
    /// The byte the child's work returned, once read.
    reported: Option<u8>,
    reaped: bool,
}

/// Forks. The child runs `work` (its stderr sent to the file `stderr`), sends the byte it
/// returned (a panic sends 0xFF), waits for the parent's word and `_exit`s. The parent gets the
/// child at once; `report` waits for its byte.
fn spawn_child(stderr: PathBuf, work: impl FnOnce() -> u8) -> Child {
    let (pid, channel) = fork_reporting(&stderr, || {
        (vec![std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or(0xFF)], 0)
    });
    Child { pid, channel, stderr, reported: None, reaped: false }
}

/// Forks a child running `work`, and waits for its report (see `spawn_child`).
fn fork_child(stderr: PathBuf, work: impl FnOnce() -> u8) -> Child {
    let mut child = spawn_child(stderr, work);
    child.report();
    child
}

impl Child {
    /// The byte the child's work returned (waiting for it).
    fn report(&mut self) -> u8 {
        if self.reported.is_none() {
            let mut byte = [0u8; 1];
            self.channel.read_exact(&mut byte).unwrap();
            assert_ne!(byte[0], 0xFF, "the child (pid {}) panicked: {}", self.pid, self.said());
            self.reported = Some(byte[0]);
        }
        self.reported.unwrap()
    }

    /// What the child said on stderr so far.
    fn said(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap()
    }

    /// Lets the child exit and reaps it: its pid names no process afterwards.
    fn finish(mut self) {
        self.reap();
    }

    fn reap(&mut self) {
        if std::mem::replace(&mut self.reaped, true) {
            return;
        }
        let _ = self.channel.write_all(b"x");
        let _ = self.channel.shutdown(std::net::Shutdown::Both);
        assert_eq!(wait_for(self.pid), 0, "the child's exit");
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.reap();
        } else if !self.reaped {
            self.reaped = true;
            let _ = self.channel.write_all(b"x");
            let mut status = 0;
            // SAFETY: as in reap.
            unsafe { waitpid(self.pid, &mut status, 0) };
        }
    }
}

/// The line a forked child refused says on stderr.
fn refused_line(bot: &str, pid: i32, workers: u32) -> String {
    format!(
        "ringside: bot {bot}: this forked child (pid {pid}) writes nothing: the bot has {workers} worker files \
         (max_workers), each held by a live worker; counted in the bot's file (workers_refused)\n"
    )
}

/// The scenario of C's, Python's and Swift's tests, with `max_workers` 2: the bot's own process
/// registers a counter; two forked workers make their files, a third is refused, the first exits
/// and a fourth continues its file. Returns the children (the second, third and fourth alive).
struct Bound {
    bot: Bot,
    first: i32,
    second: Child,
    third: Child,
    fourth: Child,
}

fn run_the_bound(name: &str, dir: &ScratchDir, logs: &ScratchDir) -> Bound {
    let bot = Bot::attach_with(name, options(dir, 2)).unwrap();
    let increments = bot.counter("bound_increments", &[]).unwrap();
    let start = |index: usize| {
        fork_child(logs.path.join(format!("child{index}")), || {
            for _ in 0..N {
                increments.increment(1); // the first makes this child a worker (or is refused)
            }
            // Refused: registration says so too, and nothing more is said.
            let registers = bot.counter("more", &[]).is_ok();
            u8::from(bot.is_enabled()) | u8::from(registers) << 1
        })
    };
    let first = start(0);
    let second = start(1);
    let third = start(2); // finds two worker files, both held by live workers
    let first_pid = first.pid;
    assert_eq!(
        (first.reported, second.reported, third.reported),
        (Some(3), Some(3), Some(0)),
        "workers, workers, refused"
    );
    first.finish();
    let fourth = start(3); // continues the first's file
    assert_eq!(fourth.reported, Some(3), "the fourth is a worker");
    Bound { bot, first: first_pid, second, third, fourth }
}

#[test]
fn past_max_workers_a_worker_continues_a_gone_ones_file_or_is_refused_and_counted() {
    let _turn = take_turn();
    let dir = ScratchDir::new("bound");
    let logs = ScratchDir::new("bound-stderr");
    let Bound { bot, first, second, third, fourth } = run_the_bound("rs-bound", &dir, &logs);
    let own_file = dir.file("rs-bound");

    // Children 1 and 2 made their files; 3 was refused, and said so once; 4 continues 1's.
    // Sorted as files_in sorts: "@1000" comes before "@999" when the pids cross a digit.
    let mut expected = vec![
        "ringside.rs-bound".to_string(),
        format!("ringside.rs-bound@{first}"),
        format!("ringside.rs-bound@{}", second.pid),
    ];
    expected.sort();
    assert_eq!(files_in(&dir.path), expected);
    assert_eq!(third.said(), refused_line("rs-bound", third.pid, 2), "said once, why");
    assert_eq!((second.said(), fourth.said()), (String::new(), String::new()), "the workers say nothing");
    assert_eq!(workers_refused(&own_file), 1);
    let continued = RingFile::read(&dir.path.join(format!("ringside.rs-bound@{first}")));
    assert_eq!(continued.producer_pid(), fourth.pid, "the fourth holds the first's file");
    assert_eq!(continued.producer_attaches(), 2);
    assert_eq!(counter_total(&continued, 0), 2 * N, "the first worker's increments and the fourth's");
    assert_eq!(counter_total(&RingFile::read(&dir.path.join(format!("ringside.rs-bound@{}", second.pid))), 0), N);

    // A process attaching as a worker by option while every worker file is held: refused too.
    let refused = Bot::attach_with("rs-bound", Options { worker: true, ..options(&dir, 2) }).unwrap_err();
    assert!(
        matches!(refused, Error::TooManyWorkers { workers: 2, own_file_unusable: None, counted: true, .. }),
        "{refused:?}"
    );
    assert_eq!(
        refused.to_string(),
        "bot rs-bound: the bot has 2 worker files (max_workers), each held by a live worker; counted in the bot's \
         file (workers_refused)"
    );
    assert_eq!(refused.bot(), "rs-bound");
    assert_eq!(workers_refused(&own_file), 2);
    let pid = std::process::id();
    assert!(!dir.path.join(format!("ringside.rs-bound@{pid}")).exists(), "the refused worker made no file");
    // With a bound that leaves room, the same process makes its own file.
    let worker = Bot::attach_with("rs-bound", Options { worker: true, ..options(&dir, 3) }).unwrap();
    assert_eq!(worker.path(), Some(dir.path.join(format!("ringside.rs-bound@{pid}"))));
    // One worker file per process: a second attach as a worker is refused as any second attach
    // of a live bot is, not continued elsewhere nor counted.
    let again = Bot::attach_with("rs-bound", Options { worker: true, ..options(&dir, 3) }).unwrap_err();
    assert!(matches!(again, Error::ProducerAlive { pid: p, .. } if p == pid as i32), "{again:?}");
    assert_eq!(workers_refused(&own_file), 2);
    drop(worker);

    for child in [second, third, fourth] {
        child.finish();
    }
    // Once the workers are gone, a worker by option continues a gone one's file: besides this
    // process's own, the directory holds two worker files (the first's and the second's), a bound
    // of 2.
    let worker = Bot::attach_with("rs-bound", Options { worker: true, ..options(&dir, 2) }).unwrap();
    let path = worker.path().unwrap();
    assert_ne!(path, dir.path.join(format!("ringside.rs-bound@{pid}")));
    let total = counter_total(&RingFile::read(&path), 0);
    worker.counter("bound_increments", &[]).unwrap().increment(1);
    assert_eq!(counter_total(&RingFile::read(&path), 0), total + 1, "it continues that file's total");
    assert_eq!(RingFile::read(&path).producer_pid(), pid as i32);
    assert_eq!(workers_refused(&own_file), 2);
    assert_eq!(counter_total(&RingFile::read(&own_file), 0), 0, "the bot's own process never incremented");
    drop(bot);
}

#[test]
fn the_collectors_total_is_the_workers_increments_and_it_exports_the_refusal() {
    let binary = collector_or_skip!();
    let _turn = take_turn();
    let dir = ScratchDir::new("bound-collector");
    let logs = ScratchDir::new("bound-collector-stderr");
    let Bound { bot, second, third, fourth, .. } = run_the_bound("rs-bound-c", &dir, &logs);
    for child in [second, third, fourth] {
        child.finish();
    }
    // Started once every worker is gone: it reads their files (the first's holding the fourth's
    // increments too) and keeps their totals.
    let collector = Collector::start(&binary, &dir);
    collector.wait_for("the three workers' increments", |latest| {
        let total = latest.series("rs-bound-c", "bound_increments")?.num("total")?;
        if total == (3 * N) as f64 {
            Ok(())
        } else {
            Err(format!("total {total}, expecting {}", 3 * N))
        }
    });
    let metrics = collector.get("/metrics").unwrap();
    assert!(metrics.contains("ringside_ring_workers_refused_total{ring=\"rs-bound-c\"} 1\n"), "/metrics:\n{metrics}");
    let latest = collector.latest().unwrap();
    assert_eq!(latest.ring("rs-bound-c").unwrap().num("workers_refused_total").unwrap(), 1.0);
    drop(bot);
}

#[test]
fn a_live_processs_worker_file_is_never_continued_even_unlocked() {
    let _turn = take_turn();
    let dir = ScratchDir::new("bound-live");
    let logs = ScratchDir::new("bound-live-stderr");
    // A worker that lets go of its file and lives on (as one between making its file and locking it).
    let holder = fork_child(logs.path.join("holder"), || {
        let Ok(worker) = Bot::attach_with("rs-live", Options { worker: true, ..options(&dir, 0) }) else { return 0 };
        let Ok(increments) = worker.counter("live_increments", &[]) else { return 0 };
        increments.increment(5);
        1
    });
    assert_eq!(holder.reported, Some(1));
    let bot = Bot::attach_with("rs-live", options(&dir, 1)).unwrap();
    let increments = bot.counter("live_increments", &[]).unwrap();
    let child = fork_child(logs.path.join("child"), || {
        increments.increment(7); // past the bound; the one file there is a live process's: not continued
        u8::from(bot.is_enabled())
    });
    assert_eq!(child.reported, Some(0), "refused");
    assert_eq!(child.said(), refused_line("rs-live", child.pid, 1));
    assert_eq!(files_in(&dir.path), ["ringside.rs-live".to_string(), format!("ringside.rs-live@{}", holder.pid)]);
    assert_eq!(counter_total(&RingFile::read(&dir.path.join(format!("ringside.rs-live@{}", holder.pid))), 0), 5);
    assert_eq!(workers_refused(&dir.file("rs-live")), 1);
    child.finish();
    holder.finish();
}

/// A forked child of `bot`'s process whose own worker name another live process holds: the
/// child says it is there and waits for the word; meanwhile this process puts a file it holds at
/// the child's worker name (`<bot>@<childpid>`: the lock goes with the open file), as a continued
/// file whose first worker had the child's pid would be, and calls `before_word`. Then the child
/// increments `increments` by 3 (its first record: it becomes a worker, or is refused) and reports
/// whether it writes. Returns the child (reported), the holder and the child's own name.
fn child_whose_name_is_held(
    bot: &Bot,
    increments: &Counter,
    dir: &ScratchDir,
    stderr: PathBuf,
    before_word: impl FnOnce(),
) -> (Child, Bot, PathBuf) {
    let (mut go, child_go) = UnixStream::pair().unwrap();
    let mut child = spawn_child(stderr, || {
        let mut child_go = child_go;
        // Only if the parent fails before its word: the child still ends.
        let _ = child_go.set_read_timeout(Some(std::time::Duration::from_secs(60)));
        let mut word = [0u8; 1];
        if child_go.write_all(b"r").is_err() || child_go.read_exact(&mut word).is_err() {
            return 2;
        }
        increments.increment(3);
        u8::from(bot.is_enabled())
    });
    let mut word = [0u8; 1];
    go.read_exact(&mut word).unwrap();
    let holder = Bot::attach_with("rs-holder", options(dir, 0)).unwrap();
    holder.counter("name_increments", &[]).unwrap();
    let own = dir.path.join(format!("ringside.{}@{}", bot.name(), child.pid));
    std::fs::rename(dir.file("rs-holder"), &own).unwrap();
    before_word();
    go.write_all(b"g").unwrap();
    child.report();
    (child, holder, own)
}

/// The worker files of bot `name` in `dir` named `<name>@<pid>.<n>`: (file name, n).
fn random_names(dir: &ScratchDir, name: &str, pid: i32) -> Vec<(String, u32)> {
    let prefix = format!("ringside.{name}@{pid}.");
    let names = files_in(&dir.path).into_iter().filter(|file| file.starts_with(&prefix));
    names.map(|file| (file.clone(), file[prefix.len()..].parse().unwrap_or_else(|e| panic!("{file}: {e}")))).collect()
}

#[test]
fn a_worker_whose_own_name_another_live_process_holds_takes_a_random_name_in_its_place() {
    let _turn = take_turn();
    let dir = ScratchDir::new("bound-name");
    let logs = ScratchDir::new("bound-name-stderr");
    let bot = Bot::attach_with("rs-name", options(&dir, 0)).unwrap();
    let increments = bot.counter("name_increments", &[]).unwrap();
    let (child, holder, own) = child_whose_name_is_held(&bot, &increments, &dir, logs.path.join("child"), || {});
    assert_eq!(child.reported, Some(1), "a worker");
    assert_eq!(child.said(), "", "nothing to say");
    let taken = random_names(&dir, "rs-name", child.pid);
    assert!(matches!(taken[..], [(_, n)] if n >= 1), "one name <name>@<pid>.<n>, n from 1: {taken:?}");
    assert_eq!(files_in(&dir.path).len(), 3, "the bot's, the holder's at the child's name, the child's");
    let file = RingFile::read(&dir.path.join(&taken[0].0));
    assert_eq!((file.producer_pid(), counter_total(&file, 0)), (child.pid, 3), "the child's file and increments");
    assert_eq!(file.entries(), RingFile::read(&dir.file("rs-name")).entries(), "the parent's registry");
    assert_eq!(counter_total(&RingFile::read(&own), 0), 0, "the holder's file untouched");
    assert_eq!(workers_refused(&dir.file("rs-name")), 0);
    child.finish();
    drop(holder);
}

/// A directory that `read_only` makes unwritable (0555: no file can be made in it, unless by
/// root) and `writable` writable again (0755), as the guard's drop does, even on a failure.
struct Writable<'a>(&'a Path);

impl Writable<'_> {
    fn read_only(&self) {
        std::fs::set_permissions(self.0, Permissions::from_mode(0o555)).unwrap();
    }
    fn writable(&self) {
        std::fs::set_permissions(self.0, Permissions::from_mode(0o755)).unwrap();
    }
}

impl Drop for Writable<'_> {
    fn drop(&mut self) {
        let _ = std::fs::set_permissions(self.0, Permissions::from_mode(0o755));
    }
}

/// Runs `scenario` as a user whom a directory's mode binds: as nobody in a forked child, in
/// directories made nobody's, when the test process is root (root may make files anywhere);
/// else as the test process.
fn unprivileged(dirs: &[&ScratchDir], scenario: impl FnOnce()) {
    if effective_uid() != 0 {
        return scenario();
    }
    for dir in dirs {
        std::os::unix::fs::chown(&dir.path, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    as_nobody(scenario).unwrap();
}

#[test]
fn a_worker_whose_own_name_and_every_random_one_are_unusable_continues_a_gone_ones_file_or_is_refused() {
    let _turn = take_turn();
    let dir = ScratchDir::new("bound-unusable");
    let logs = ScratchDir::new("bound-unusable-stderr");
    unprivileged(&[&dir, &logs], || {
        let bot = Bot::attach_with("rs-unusable", options(&dir, 0)).unwrap();
        let increments = bot.counter("name_increments", &[]).unwrap();
        let writable = Writable(&dir.path);

        // Its own name held, and no other name can be made (the directory is read-only): with no
        // gone worker's file to continue, refused, and counted.
        let (refused, holder, own) =
            child_whose_name_is_held(&bot, &increments, &dir, logs.path.join("refused"), || writable.read_only());
        writable.writable();
        assert_eq!(refused.reported, Some(0), "refused");
        assert_eq!(
            refused.said(),
            format!(
                "ringside: bot rs-unusable: this forked child (pid {}) writes nothing: its worker file {} and 8 \
                 other names were unusable, and no gone worker's file is free to continue; counted in the bot's \
                 file (workers_refused)\n",
                refused.pid,
                own.display()
            )
        );
        assert_eq!(workers_refused(&dir.file("rs-unusable")), 1);
        assert_eq!(
            files_in(&dir.path),
            ["ringside.rs-unusable".to_string(), format!("ringside.rs-unusable@{}", refused.pid)]
        );
        assert_eq!(counter_total(&RingFile::read(&own), 0), 0, "the holder's file untouched");
        refused.finish();
        drop(holder);
        std::fs::remove_file(&own).unwrap();

        // A worker that took a random name (its own held, the directory writable), and is gone.
        let (gone, holder, own) = child_whose_name_is_held(&bot, &increments, &dir, logs.path.join("gone"), || {});
        assert_eq!(gone.reported, Some(1), "a worker");
        let taken = random_names(&dir, "rs-unusable", gone.pid);
        assert_eq!(taken.len(), 1, "{taken:?}");
        gone.finish();
        drop(holder);
        std::fs::remove_file(&own).unwrap();

        // Every name unusable again: the gone worker's file is continued, by its own name.
        let (continuing, holder, _) =
            child_whose_name_is_held(&bot, &increments, &dir, logs.path.join("continuing"), || writable.read_only());
        writable.writable();
        assert_eq!(continuing.reported, Some(1), "a worker");
        assert_eq!(continuing.said(), "");
        let continued = RingFile::read(&dir.path.join(&taken[0].0));
        assert_eq!(continued.producer_pid(), continuing.pid);
        assert_eq!(counter_total(&continued, 0), 6, "the gone worker's increments and the continuing one's");
        assert_eq!(random_names(&dir, "rs-unusable", continuing.pid), [], "no name of its own");
        assert_eq!(workers_refused(&dir.file("rs-unusable")), 1);
        continuing.finish();
        drop(holder);
    });
}

#[test]
fn a_link_a_directory_or_a_corrupt_file_at_a_workers_own_name_sends_it_to_a_random_name() {
    let _turn = take_turn();
    let dir = ScratchDir::new("bound-odd-names");
    let pid = std::process::id() as i32;
    let target = dir.path.join("target");
    std::fs::write(&target, b"not a bot").unwrap();
    let corrupt = vec![0xAB; 8192];
    let own = |name: &str| dir.path.join(format!("ringside.{name}@{pid}"));
    std::os::unix::fs::symlink(&target, own("rs-link")).unwrap();
    std::fs::create_dir(own("rs-directory")).unwrap();
    std::fs::write(own("rs-corrupt"), &corrupt).unwrap();
    for name in ["rs-link", "rs-directory", "rs-corrupt"] {
        let worker = Bot::attach_with(name, Options { worker: true, ..options(&dir, 0) }).unwrap();
        let taken = random_names(&dir, name, pid);
        assert!(matches!(taken[..], [(_, n)] if n >= 1), "{name}: {taken:?}");
        let path = dir.path.join(&taken[0].0);
        assert_eq!(worker.path(), Some(path.clone()), "{name}");
        worker.counter("odd_increments", &[]).unwrap().increment(2);
        assert_eq!(counter_total(&RingFile::read(&path), 0), 2, "{name}");
    }
    assert!(std::fs::symlink_metadata(own("rs-link")).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&target).unwrap(), b"not a bot", "the link's target untouched");
    assert!(std::fs::symlink_metadata(own("rs-directory")).unwrap().is_dir());
    assert_eq!(std::fs::read(own("rs-corrupt")).unwrap(), corrupt, "the corrupt file untouched");
}

#[test]
fn max_workers_out_of_range_is_refused() {
    let _turn = take_turn();
    let dir = ScratchDir::new("bound-range");
    for worker in [false, true] {
        let refused = Bot::attach_with("rs-range", Options { worker, ..options(&dir, 65_537) }).unwrap_err();
        assert!(matches!(refused, Error::InvalidOption { .. }), "{refused:?}");
        assert_eq!(refused.to_string(), "bot rs-range: max_workers 65537 must be from 1 to 65536");
    }
    assert_eq!(files_in(&dir.path), Vec::<String>::new(), "nothing made");
    // 0 (the default, 256), 1 and 65,536 are bounds.
    for max_workers in [0, 1, 65_536] {
        let worker = Bot::attach_with("rs-range", Options { worker: true, ..options(&dir, max_workers) }).unwrap();
        assert!(worker.is_enabled());
    }
}
