//! fork(): the child writes nothing to its parent's bot and lets go of the file, so the parent's
//! lock is the parent's alone. Alone in its test binary (it forks the test process).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod common;

use common::{RingFile, ScratchDir};
use ringside::{Bot, Error, Options, Unit};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

extern "C" {
    fn fork() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn _exit(code: i32) -> !;
}

#[test]
fn a_forked_child_writes_nothing_to_its_parents_bot() {
    let dir = ScratchDir::new("fork");
    let options = || Options { directory: Some(dir.path.clone()), ..Options::default() };
    let bot = Bot::attach_with("rs-fork", options()).unwrap();
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let level = bot.gauge("level", Unit::None, &[]).unwrap();
    assert!(latency.record(1));
    orders.increment(1);
    assert!(level.set(1.0));
    let parent = std::process::id();
    let (mut to_child, mut to_parent) = UnixStream::pair().unwrap();

    // SAFETY: the child only uses this crate, std and _exit; glibc's fork leaves malloc usable.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        drop(to_child); // else the parent's end stays open here, and its death goes unseen
        let mut failures = Vec::new();
        let mut check = |ok: bool, what: &str| {
            if !ok {
                failures.push(what.to_string());
            }
        };
        check(!bot.is_enabled(), "the parent's bot is disabled in the child");
        for v in 0..100 {
            check(!latency.record(v), "a record writes nothing");
            orders.increment(1);
            check(!level.set(2.0), "a gauge writes nothing");
        }
        check(!latency.span().finish(), "a span writes nothing");
        check(matches!(bot.counter("more", &[]), Err(Error::Forked { .. })), "registration refused");
        // The parent's bot is still the parent's.
        let again = Bot::attach_with("rs-fork", options());
        check(matches!(again, Err(Error::ProducerAlive { pid, .. }) if pid == parent as i32), "parent holds its bot");
        // A bot of its own works.
        match Bot::attach_with("rs-fork-child", options()) {
            Ok(own) => check(own.histogram("child_latency", Unit::Nanoseconds, &[]).unwrap().record(7), "own bot"),
            Err(error) => check(false, &format!("own bot: {error}")),
        }
        let mut buffer = [0u8; 1];
        let _ = to_parent.write_all(if failures.is_empty() { b"k" } else { b"f" });
        for failure in &failures {
            let _ = writeln!(to_parent, "{failure}");
        }
        // Wait for the parent's checks.
        let _ = to_parent.read(&mut buffer);
        // SAFETY: _exit ends the child at once, without running the parent's exit handlers twice.
        unsafe { _exit(if failures.is_empty() { 0 } else { 1 }) };
    }
    drop(to_parent);
    let mut verdict = [0u8; 1];
    to_child.read_exact(&mut verdict).unwrap();
    if verdict[0] != b'k' {
        let mut reasons = String::new();
        to_child.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
        let _ = to_child.read_to_string(&mut reasons);
        panic!("the child found: {reasons}");
    }
    // The child is alive, and wrote nothing to the parent's file.
    let file = RingFile::read(&dir.file("rs-fork"));
    assert_eq!(file.lane(0).write_cursor, 2);
    assert_eq!(file.lane_cell(0, 1), 1, "the child's increments are not counted");
    assert_eq!(file.metric_cell(2).0, 1.0f64.to_bits());
    assert_eq!(RingFile::read(&dir.file("rs-fork-child")).lane(0).write_cursor, 1);
    // The parent goes on writing.
    assert!(latency.record(2));
    // The child let go of the file: once the parent drops its bot, the lock is free although
    // the child still lives.
    drop((bot, latency, orders, level));
    Bot::attach_with("rs-fork", options()).expect("the forked child kept the parent's lock");
    to_child.write_all(b"x").unwrap();
    let mut status = 0;
    // SAFETY: pid is our child, and status a valid int for waitpid to fill.
    assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid);
    assert_eq!(status, 0, "the child's exit status");
}

#[test]
fn the_worker_option_writes_a_second_file_beside_the_owner_of_the_name() {
    let dir = ScratchDir::new("worker-option");
    let options = |worker: bool| Options { directory: Some(dir.path.clone()), worker, ..Options::default() };
    let owner = Bot::attach_with("rs-pool", options(false)).unwrap();
    owner.counter("jobs", &[]).unwrap().increment(2);
    // The name is held: a second owner is refused, and told about workers.
    let refused = Bot::attach_with("rs-pool", options(false)).unwrap_err();
    assert!(matches!(refused, Error::ProducerAlive { .. }), "{refused:?}");
    assert!(refused.to_string().contains("several as its workers (attach with the worker option)"), "{refused}");

    let pid = std::process::id();
    let worker = Bot::attach_with("rs-pool", options(true)).unwrap();
    let worker_file = dir.path.join(format!("ringside.rs-pool@{pid}"));
    assert_eq!(worker.path(), Some(worker_file.as_path()));
    assert_eq!(worker.name(), "rs-pool");
    let level = worker.gauge("level", Unit::None, &[]).unwrap();
    let jobs = worker.counter("jobs", &[]).unwrap();
    assert_eq!((level.index(), jobs.index()), (0, 1), "a registry of its own");
    jobs.increment(3);
    assert!(level.set(4.0));
    // One worker file per process: this process holds it already.
    assert!(matches!(Bot::attach_with("rs-pool", options(true)), Err(Error::ProducerAlive { .. })));

    let mut names: Vec<String> =
        std::fs::read_dir(&dir.path).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["ringside.rs-pool".to_string(), format!("ringside.rs-pool@{pid}")]);
    let owners = RingFile::read(&dir.file("rs-pool"));
    assert_eq!((owners.metric_count(), owners.lane_cell(0, 0)), (1, 2));
    let workers = RingFile::read(&worker_file);
    assert_eq!((workers.metric_count(), workers.producer_pid()), (2, pid as i32));
    assert_eq!((workers.lane_cell(0, 1), workers.metric_cell(0).0), (3, 4.0f64.to_bits()));
    assert_eq!(workers.records(0).iter().map(|r| (r.metric, r.value)).collect::<Vec<_>>(), [(0, 4.0f64.to_bits())]);
}
