//! Names another user took: in a shared directory (/dev/shm is everyone's, sticky), user nobody
//! plants a FIFO, a device, a directory or a socket at a bot's name, at a forked worker's name, or
//! where the parent's file was. The bot never waits on it (an open for reading alone would wait on
//! a FIFO for a writer): attach fails at once naming the file, what it is and its owner; a worker
//! takes a fresh name or writes nothing, and says why. Each bot runs in a forked child that
//! SIGALRM ends after 10 s: a hang is "signal 14", and the test fails. As C's (PlantedFileTests)
//! and Python's (test_planted.py) tests do it: as root. A test process that is not root skips, or
//! fails under CI=true.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod common;

use common::fork::NOBODY;
use common::fork::{_exit, dup2, effective_uid, files_in, fork, root_or_skip, take_turn, wait_for};
use common::planted::{plant, shared_dir, still_planted, KINDS};
use common::{RingFile, ScratchDir};
use ringside::{Bot, Error, Options};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

extern "C" {
    fn alarm(seconds: u32) -> u32;
}

/// Forks a child that waits for the parent's word (a byte), then runs `work` under a 10 s alarm
/// (its stderr to the file `stderr`) and `_exit`s with the status it returns, after writing the
/// report it returns. The parent runs
/// `before` with the child's pid, gives its word, and gets the child's report and wait status.
/// The caller holds its turn (`take_turn`).
fn in_child(stderr: &Path, before: impl FnOnce(i32), work: impl FnOnce() -> (String, i32)) -> (String, i32) {
    let log = std::fs::File::create(stderr).unwrap();
    let (mut parent_end, mut child_end) = UnixStream::pair().unwrap();
    // SAFETY: the child only uses this crate and std (a socket) and _exits; glibc's fork leaves
    // malloc usable, and the tests take turns, so no other test's thread holds a lock of std's.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        drop(parent_end);
        // SAFETY: both descriptors are open; stderr now goes to the file. alarm only arms a
        // timer, whose default action ends a child that waits.
        unsafe {
            dup2(log.as_raw_fd(), 2);
            alarm(10);
        }
        let mut word = [0u8; 1];
        let _ = child_end.read(&mut word);
        let (report, code) = work();
        let _ = child_end.write_all(report.as_bytes());
        drop(child_end);
        // SAFETY: _exit ends the child at once, without running the parent's exit handlers again.
        unsafe { _exit(code) };
    }
    drop(child_end);
    before(pid);
    parent_end.write_all(b"!").unwrap();
    let mut report = String::new();
    parent_end.read_to_string(&mut report).unwrap();
    (report, wait_for(pid))
}

fn options(dir: &ScratchDir) -> Options {
    Options { directory: Some(dir.path.clone()), lane_capacity: Some(16), ..Options::default() }
}

#[test]
fn nobodys_fifo_device_directory_or_socket_at_the_bots_name_is_refused_at_attach_naming_it_and_its_owner() {
    if !root_or_skip("planting files as user nobody at a bot's name") {
        return;
    }
    let _turn = take_turn();
    let dir = shared_dir("planted-bot");
    for (kind, said) in KINDS {
        let bot = format!("taken-{kind}");
        let path = dir.file(&bot);
        plant(kind, &path);
        let (report, status) = in_child(
            &dir.path.join("stderr"),
            |_| {},
            || match Bot::attach_with(&bot, options(&dir)) {
                Err(error @ Error::NotRegularFile { owner: NOBODY, .. }) => (error.to_string(), 0),
                Err(error) => (format!("another error: {error:?}"), 1),
                Ok(_) => ("attached".into(), 1),
            },
        );
        assert_eq!(status, 0, "{kind}: {report} (signal 14: the attach waited)");
        let expected = format!(
            "bot {bot}: {} is {said} owned by uid {NOBODY}, not a regular file of uid {}; a bot opens only regular \
             files of its own user (have it removed, or attach another name)",
            path.display(),
            effective_uid()
        );
        assert_eq!(report, expected);
        assert!(still_planted(kind, &path), "{kind}");
    }
    let files = files_in(&dir.path);
    assert_eq!(
        files.iter().filter(|name| name.starts_with("ringside.")).count(),
        KINDS.len(),
        "only what was planted: {files:?}"
    );
}

#[test]
fn a_worker_of_a_bot_whose_name_holds_nobodys_fifo_registers_and_writes() {
    if !root_or_skip("planting a FIFO as user nobody at a bot's name") {
        return;
    }
    let _turn = take_turn();
    let dir = shared_dir("planted-worker");
    let fifo = dir.file("pooled");
    plant("fifo", &fifo);
    // Registering reads the bot's own file for the operator's switches (CONTROL in ringside.h).
    let (report, status) = in_child(
        &dir.path.join("stderr"),
        |_| {},
        || {
            let bot = match Bot::attach_with("pooled", Options { worker: true, ..options(&dir) }) {
                Ok(bot) => bot,
                Err(error) => return (error.to_string(), 1),
            };
            match bot.counter("worker_total", &[]) {
                Ok(total) => {
                    total.increment(5);
                    (bot.path().unwrap().display().to_string(), 0)
                }
                Err(error) => (error.to_string(), 1),
            }
        },
    );
    assert_eq!(status, 0, "{report} (signal 14: registering waited)");
    let file = RingFile::read(Path::new(&report));
    assert_eq!((0..file.lanes_allocated()).map(|lane| file.lane_cell(lane, 0)).sum::<u64>(), 5);
    assert!(still_planted("fifo", &fifo));
}

#[test]
fn nobodys_file_at_a_forked_workers_own_name_sends_it_to_a_fresh_name() {
    if !root_or_skip("planting files as user nobody at a worker's name") {
        return;
    }
    let _turn = take_turn();
    let dir = shared_dir("planted-own");
    for (kind, _) in KINDS {
        let name = format!("pb-{kind}");
        let bot = Bot::attach_with(&name, options(&dir)).unwrap();
        let increments = bot.counter("planted_increments", &[]).unwrap();
        increments.increment(1);
        let mut child = 0;
        let (report, status) = in_child(
            &dir.path.join("stderr"),
            |pid| {
                child = pid;
                plant(kind, &dir.file(&format!("{name}@{pid}")));
            },
            || {
                increments.increment(1); // the first call: the child becomes a worker of the bot now
                match bot.path() {
                    Some(path) if bot.is_enabled() => (path.display().to_string(), 0),
                    _ => ("not a worker".into(), 3),
                }
            },
        );
        assert_eq!(status, 0, "{kind}: {report} (signal 14: the child waited)");
        let worker = PathBuf::from(&report);
        let file_name = worker.file_name().unwrap().to_str().unwrap().to_string();
        let suffix =
            file_name.strip_prefix(&format!("ringside.{name}@{child}.")).unwrap_or_else(|| panic!("{file_name}"));
        assert!(suffix.parse::<u32>().is_ok_and(|n| n > 0), "{file_name}");
        let metadata = std::fs::symlink_metadata(&worker).unwrap();
        assert!(metadata.file_type().is_file() && metadata.uid() == effective_uid(), "{file_name}");
        let file = RingFile::read(&worker);
        assert_eq!((0..file.lanes_allocated()).map(|lane| file.lane_cell(lane, 0)).sum::<u64>(), 1, "{kind}");
        assert!(still_planted(kind, &dir.file(&format!("{name}@{child}"))), "{kind}");
    }
}

#[test]
fn nobodys_file_where_the_parents_file_was_leaves_the_child_writing_nothing_never_waiting() {
    if !root_or_skip("planting files as user nobody where a bot's file was") {
        return;
    }
    let _turn = take_turn();
    let dir = shared_dir("planted-parent");
    for (kind, said_kind) in KINDS {
        let name = format!("pb-{kind}");
        let bot = Bot::attach_with(&name, options(&dir)).unwrap();
        let increments = bot.counter("planted_increments", &[]).unwrap();
        increments.increment(1);
        let path = dir.file(&name);
        std::fs::remove_file(&path).unwrap();
        // The child's first call reads the registry of the file the parent attached, at its path.
        let stderr = dir.path.join("stderr");
        let (report, status) = in_child(
            &stderr,
            |_| plant(kind, &path),
            || {
                increments.increment(1);
                (String::new(), if bot.is_enabled() { 0 } else { 3 })
            },
        );
        assert_eq!(status, 3 << 8, "{kind}: {report} (3 << 8: it writes nothing; signal 14: it waited)");
        assert!(still_planted(kind, &path), "{kind}");
        let said = std::fs::read_to_string(&stderr).unwrap();
        let pid = said.split("(pid ").nth(1).and_then(|rest| rest.split(')').next()).unwrap_or("?").to_string();
        assert_eq!(
            said,
            format!(
                "ringside: bot {name}: this forked child (pid {pid}) writes nothing: {} is no longer the file the parent \
                 attached: its registry is gone (it is now {said_kind} owned by uid {NOBODY})\n",
                path.display()
            )
        );
        std::fs::remove_file(&stderr).unwrap();
        drop(bot);
    }
    let files = files_in(&dir.path);
    assert_eq!(
        files.iter().filter(|name| name.starts_with("ringside.")).count(),
        KINDS.len(),
        "only what was planted: {files:?}"
    );
}
