//! Worker names another user planted (WORKERS in ringside.h). Worker files are named by pid
//! (`<bot>@<pid>`) and /dev/shm is everyone's, so another user can plant files under the names a
//! bot's next children will want, and hundreds under dead pids to fill the bound. The bound counts
//! only the bot's user's files, and a worker whose own name is unusable takes `<bot>@<pid>.<n>`,
//! `n` random: every forked worker of root's bot still writes. As C's (WorkerNameAttackTests) and
//! Python's (test_process.py) tests do it: as root, user nobody planting the files (a forked child
//! that becomes nobody). A test process that is not root skips, or fails under CI=true.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod common;

use common::fork::NOBODY;
use common::fork::{
    _exit, as_nobody, effective_uid, files_in, fork, process_exists, root_or_skip, take_turn, wait_for,
};
use common::{Collector, RingFile, ScratchDir};
use ringside::{Bot, Options};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{OpenOptions, Permissions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};

const BOT: &str = "rs-planted";
/// Children the bot's process forks, each incrementing the counter once.
const CHILDREN: usize = 20;
/// Upcoming pids planted.
const UPCOMING: i32 = 3_000;
/// Dead pids planted: the default bound (`max_workers`).
const DEAD: usize = 256;

fn read_number(path: &str) -> i32 {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.trim().parse().unwrap_or_else(|e| panic!("{path}: {text:?}: {e}"))
}

/// A counter's total in a file: its cells over every lane, plus its metric cell's `unlaned`.
fn counter_total(file: &RingFile, metric: u32) -> u64 {
    (0..file.lanes_allocated()).map(|lane| file.lane_cell(lane, metric)).sum::<u64>() + file.metric_cell(metric).2
}

#[test]
fn nobodys_files_at_the_next_pids_and_dead_ones_leave_every_forked_worker_of_roots_bot_writing() {
    if !root_or_skip("planting files as user nobody against root's bot") {
        return;
    }
    let _turn = take_turn();
    let dir = ScratchDir::new("planted");
    // Shared, as /dev/shm is: sticky, everyone may create.
    std::fs::set_permissions(&dir.path, Permissions::from_mode(0o1777)).unwrap();
    let last = read_number("/proc/sys/kernel/ns_last_pid");
    let pid_max = read_number("/proc/sys/kernel/pid_max"); // pids are below it
    let upcoming: BTreeSet<i32> = (last + 1..=(last + UPCOMING).min(pid_max - 1)).collect();
    // Pids no process has, from the top of the range down: as many worker files as the bound.
    let dead: Vec<i32> =
        (301..pid_max).rev().filter(|pid| !upcoming.contains(pid) && !process_exists(*pid)).take(DEAD).collect();
    assert_eq!(dead.len(), DEAD, "dead pids below {pid_max}");
    let planted: BTreeSet<i32> = upcoming.iter().chain(&dead).copied().collect();
    as_nobody(|| {
        for pid in &planted {
            let path = dir.path.join(format!("ringside.{BOT}@{pid}"));
            let made = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path);
            made.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    })
    .unwrap();

    // Root's bot: its own increment, then 20 children's, each its first record (which makes the
    // child a worker, under its own name or another), then _exit.
    let options = Options { directory: Some(dir.path.clone()), lane_capacity: Some(1024), ..Options::default() };
    let bot = Bot::attach_with(BOT, options).unwrap();
    let tasks = bot.counter("tasks", &[]).unwrap();
    tasks.increment(1);
    let mut children = Vec::new();
    for _ in 0..CHILDREN {
        // SAFETY: the child only increments through this crate and _exits; glibc's fork leaves
        // malloc usable, and the tests take turns, so no other test's thread holds a lock of std's.
        let pid = unsafe { fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            tasks.increment(1);
            let code = if bot.is_enabled() { 0 } else { 3 };
            // SAFETY: _exit ends the child at once, without running the parent's exit handlers.
            unsafe { _exit(code) };
        }
        children.push(pid);
    }
    let statuses: Vec<i32> = children.iter().map(|&pid| wait_for(pid)).collect();
    assert_eq!(statuses, vec![0; CHILDREN], "every child a worker (3 << 8: it writes nothing, said on stderr)");

    // Root's files hold every increment; nobody's are as planted.
    let (mut total, mut nobodys) = (0, 0);
    let mut workers: BTreeMap<i32, Option<u32>> = BTreeMap::new();
    for name in files_in(&dir.path) {
        let path = dir.path.join(&name);
        let metadata = std::fs::symlink_metadata(&path).unwrap();
        if metadata.uid() == NOBODY {
            assert_eq!(metadata.len(), 0, "{name}: nobody's file untouched");
            nobodys += 1;
            continue;
        }
        assert_eq!(metadata.uid(), effective_uid(), "{name}");
        let file = RingFile::read(&path);
        total += counter_total(&file, 0);
        if name == format!("ringside.{BOT}") {
            assert_eq!(file.u64(0xA8), 0, "no worker refused (workers_refused)");
            continue;
        }
        let worker = name.strip_prefix(&format!("ringside.{BOT}@")).unwrap_or_else(|| panic!("{name}"));
        let (pid, suffix) = match worker.split_once('.') {
            Some((pid, n)) => (pid.parse().unwrap(), Some(n.parse::<u32>().unwrap())),
            None => (worker.parse().unwrap(), None),
        };
        assert_eq!(file.producer_pid(), pid, "{name}: its worker's own file");
        assert!(workers.insert(pid, suffix).is_none(), "one file per child: {name}");
    }
    assert_eq!(nobodys, planted.len(), "nobody's planted files, all there");
    assert_eq!(total, 1 + CHILDREN as u64, "the parent's increment and every child's, in root's files");
    let mut forked = children.clone();
    forked.sort();
    assert_eq!(workers.keys().copied().collect::<Vec<_>>(), forked, "a file of each child");
    for (pid, suffix) in &workers {
        assert_eq!(suffix.is_some(), planted.contains(pid), "child {pid}: a random name only where nobody planted");
        assert_ne!(*suffix, Some(0), "child {pid}: n from 1");
    }
    assert!(
        children.iter().any(|pid| planted.contains(pid)),
        "no child's pid was among the planted ones: {children:?}"
    );

    // The collector reads `<bot>@<pid>.<n>` as a worker file of the bot.
    let Some(binary) = common::collector_binary() else { return };
    let collector = Collector::start(&binary, &dir);
    collector.wait_for("every increment", |latest| {
        let total = latest.series(BOT, "tasks")?.num("total")?;
        if total == (1 + CHILDREN) as f64 {
            Ok(())
        } else {
            Err(format!("total {total}, expecting {}", 1 + CHILDREN))
        }
    });
    drop(bot);
}
