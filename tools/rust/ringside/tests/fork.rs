//! Workers and fork(): a forked child's first record, registration or claim through its parent's
//! bot makes it a worker of the bot, writing `<name>@<pid>` (the parent's registry at the same
//! indices, then its own calls) and never the parent's file; a child that never records makes
//! nothing; one that cannot make its worker file says why once on stderr and writes nothing. And
//! the worker option beside an owner of the name. The tests fork the test process: they take
//! turns (common::fork::take_turn), and a child never panics into the harness (it reports to its parent, then
//! `_exit`s).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod common;

use common::fork::{_exit, files_in, fork, fork_reporting, take_turn, wait_for};
use common::{clock_monotonic_ns, RingFile, ScratchDir};
use ringside::{Bot, Error, GaugeMerge, Options, SpanClock, Unit};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

const KIND_COUNTER: u8 = 1;
const KIND_GAUGE: u8 = 2;
const KIND_HISTOGRAM: u8 = 3;
const FLAG_SPAN: u8 = 1;

fn options(dir: &ScratchDir) -> Options {
    Options { directory: Some(dir.path.clone()), lane_capacity: Some(1024), ..Options::default() }
}

/// A forked child: it ran its checks, reported them, and waits for `finish` to exit.
struct Child {
    pid: i32,
    channel: UnixStream,
    stderr: PathBuf,
}

/// Forks. The child runs `checks` (its stderr sent to the file `stderr`), pushing a line for each
/// failed check, reports them to the parent, waits for its word and `_exit`s. The parent gets the
/// child once its checks passed (else the test fails with them).
fn fork_child(stderr: PathBuf, checks: impl FnOnce(&mut Vec<String>)) -> Child {
    let (pid, mut channel) = fork_reporting(&stderr, || {
        let mut failures = Vec::new();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| checks(&mut failures)));
        if outcome.is_err() {
            failures.push("the child's checks panicked (see its stderr)".to_string());
        }
        let mut report = if failures.is_empty() { b"k".to_vec() } else { b"f".to_vec() };
        for failure in &failures {
            let _ = writeln!(report, "{failure}");
        }
        (report, if failures.is_empty() { 0 } else { 1 })
    });
    let mut verdict = [0u8; 1];
    channel.read_exact(&mut verdict).unwrap();
    if verdict[0] != b'k' {
        let mut reasons = String::new();
        channel.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = channel.read_to_string(&mut reasons);
        let said = std::fs::read_to_string(&stderr).unwrap_or_default();
        let _ = channel.write_all(b"x");
        wait_for(pid);
        panic!("the child (pid {pid}) found:\n{reasons}its stderr:\n{said}");
    }
    Child { pid, channel, stderr }
}

impl Child {
    /// What the child said on stderr so far.
    fn said(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap()
    }

    /// Lets the child exit, and checks it exited with 0.
    fn finish(mut self) {
        self.channel.write_all(b"x").unwrap();
        assert_eq!(wait_for(self.pid), 0, "the child's exit status");
    }
}

fn check(failures: &mut Vec<String>, ok: bool, what: &str) {
    if !ok {
        failures.push(what.to_string());
    }
}

#[test]
fn a_forked_childs_first_record_makes_it_a_worker_of_the_bot() {
    let _turn = take_turn();
    let dir = ScratchDir::new("fork");
    let logs = ScratchDir::new("fork-stderr");
    let bot = Bot::attach_with("rs-fork", options(&dir)).unwrap();
    let latency = bot.histogram("latency", Unit::Microseconds, &[]).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let level = bot.gauge("level", Unit::None, &[]).unwrap();
    let fills = bot.counter("fills", &[("venue", "XNAS")]).unwrap();
    assert_eq!([latency.index(), orders.index(), level.index(), fills.index()], [0, 1, 2, 3]);
    assert!(latency.record(1));
    orders.increment(1);
    assert!(level.set(1.0));
    let parent = std::process::id();
    let parent_file = dir.file("rs-fork");

    let child = fork_child(logs.path.join("child"), |failures| {
        let pid = std::process::id();
        let worker_file = dir.path.join(format!("ringside.rs-fork@{pid}"));
        check(failures, bot.is_enabled(), "before its first record, the child's records will be kept");
        check(failures, bot.path() == Some(parent_file.clone()), "before its first record, the parent's path");
        check(failures, !worker_file.exists(), "no worker file before the first record");
        for v in 1..=100 {
            check(failures, latency.record(v), "a record is written");
            orders.increment(1);
            check(failures, level.set(2.0), "a gauge is written");
        }
        check(failures, latency.span().finish(), "a span is written");
        check(failures, bot.is_enabled(), "a worker writes");
        check(failures, bot.path() == Some(worker_file.clone()), "the worker's path");
        check(failures, worker_file.exists(), "the worker file");
        // Registration finds the inherited metrics at their indices, and adds after them.
        check(failures, bot.counter("orders", &[]).map(|c| c.index()).ok() == Some(1), "orders again");
        check(failures, bot.counter("more", &[]).map(|c| c.index()).ok() == Some(4), "a new metric after the parent's");
        // Another thread of the child: a lane of its own in the worker file.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                check(failures, latency.record(7), "another thread's record");
                fills.increment(5);
            });
        });
        // The parent's bot is still the parent's, and the worker file is this process's.
        let again = Bot::attach_with("rs-fork", options(&dir));
        check(failures, matches!(again, Err(Error::ProducerAlive { pid, .. }) if pid == parent as i32), "parent's");
        let worker = Bot::attach_with("rs-fork", Options { worker: true, ..options(&dir) });
        check(failures, matches!(worker, Err(Error::ProducerAlive { pid: p, .. }) if p == pid as i32), "child's");
    });

    assert_eq!(child.said(), "", "nothing said on stderr");
    let pid = child.pid;
    // The parent's file: the parent's calls only.
    let parents = RingFile::read(&parent_file);
    let registry = parents.entries();
    assert_eq!(
        registry,
        [
            ("latency".to_string(), String::new(), KIND_HISTOGRAM),
            ("orders".to_string(), String::new(), KIND_COUNTER),
            ("level".to_string(), String::new(), KIND_GAUGE),
            ("fills".to_string(), "venue=XNAS".to_string(), KIND_COUNTER),
        ]
    );
    assert_eq!(parents.lanes_allocated(), 1);
    assert_eq!(
        parents.records(0).iter().map(|r| (r.metric, r.value)).collect::<Vec<_>>(),
        [(0, 1), (2, 1.0f64.to_bits())]
    );
    assert_eq!(parents.lane_cell(0, 1), 1, "the child's increments are not the parent's");
    assert_eq!(parents.metric_cell(2).0, 1.0f64.to_bits());

    // The worker's file: the parent's registry at the same indices, then the child's metric, and
    // the child's calls.
    let workers = RingFile::read(&dir.path.join(format!("ringside.rs-fork@{pid}")));
    assert_eq!(workers.producer_pid(), pid);
    assert_eq!(workers.capacity(), 1024, "the parent's shape");
    assert_eq!(workers.entries()[..4], registry[..]);
    assert_eq!(workers.entry(4), ("more".to_string(), String::new(), KIND_COUNTER));
    assert_eq!(workers.lanes_allocated(), 2);
    let records = workers.records(0);
    let values: Vec<u64> = records.iter().filter(|r| r.metric == 0 && r.flags == 0).map(|r| r.value).collect();
    assert_eq!(values, (1..=100).collect::<Vec<u64>>());
    assert_eq!(records.iter().filter(|r| r.metric == 2 && r.value == 2.0f64.to_bits()).count(), 100);
    assert_eq!(records.iter().filter(|r| r.metric == 0 && r.flags == FLAG_SPAN).count(), 1);
    assert_eq!(records.len(), 201);
    assert_eq!(workers.lane_cell(0, 1), 100, "the child's increments");
    assert_eq!(workers.metric_cell(2).0, 2.0f64.to_bits(), "the child's gauge");
    assert_eq!(workers.records(1).iter().map(|r| (r.metric, r.value)).collect::<Vec<_>>(), [(0, 7)]);
    assert_eq!(workers.lane_cell(1, 3), 5);

    // The parent goes on writing its own file.
    assert!(latency.record(2));
    assert_eq!(RingFile::read(&parent_file).lane(0).write_cursor, 3);
    // The child let go of the parent's file: once the parent drops its bot, the lock is free
    // although the child still lives.
    drop((bot, latency, orders, level, fills));
    Bot::attach_with("rs-fork", options(&dir)).expect("the forked child kept the parent's lock");
    child.finish();
}

#[test]
fn a_forked_childs_worker_file_takes_the_parents_signed_and_scaled_metrics_as_format_4() {
    let _turn = take_turn();
    let dir = ScratchDir::new("fork-values");
    let logs = ScratchDir::new("fork-values-stderr");
    let bot = Bot::attach_with("rs-fork-values", options(&dir)).unwrap();
    let latency = bot.histogram("latency", Unit::Microseconds, &[]).unwrap();
    let slippage = bot.metric("slippage_bps").resolution(0.01).signed().histogram(Unit::None).unwrap();
    let commission = bot.metric("commission_usd").resolution(1e-6).counter().unwrap();
    let parent_file = dir.file("rs-fork-values");
    assert_eq!(RingFile::read(&parent_file).version(), 4);

    let child = fork_child(logs.path.join("child"), |failures| {
        check(failures, slippage.record_value(-3.5), "a signed value is written");
        check(failures, !slippage.record(3), "unsigned steps are refused still");
        check(failures, !slippage.record_value(f64::NAN), "a NaN is not written");
        commission.increment_value(0.37);
        check(failures, latency.record(9), "a plain value");
    });
    assert_eq!(child.said(), "", "nothing said on stderr");
    let parents = RingFile::read(&parent_file);
    let workers = RingFile::read(&dir.path.join(format!("ringside.rs-fork-values@{}", child.pid)));
    assert_eq!(workers.version(), 4, "made as format 3, made 4 by the parent's scaled entries");
    assert_eq!(workers.metric_count(), 3);
    for index in 0..3 {
        assert_eq!(
            workers.entry_bytes(index),
            parents.entry_bytes(index),
            "entry {index}: the parent's, form and scale too"
        );
    }
    assert_eq!((workers.values(1), workers.values(2)), ((1, -2), (0, -6)));
    let values: Vec<(u32, u64)> = workers.records(0).iter().map(|r| (r.metric, r.value)).collect();
    assert_eq!(values, [(1, (-350i64 as u64) ^ (1 << 63)), (0, 9)]);
    assert_eq!(workers.lane_cell(0, 2), 370_000);
    assert_eq!(workers.clamped(1), 1, "the NaN, counted in the worker's file");
    assert_eq!((parents.lanes_allocated(), parents.clamped(1)), (0, 0), "nothing in the parent's");
    child.finish();
}

#[test]
fn threads_of_a_forked_child_racing_to_record_make_one_worker_file() {
    let _turn = take_turn();
    let dir = ScratchDir::new("fork-race");
    let logs = ScratchDir::new("fork-race-stderr");
    let bot = Bot::attach_with("rs-race", options(&dir)).unwrap();
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let child = fork_child(logs.path.join("child"), |failures| {
        // All four make their first record at once; each holds its lane until all have one.
        let (start, claimed) = (std::sync::Barrier::new(4), std::sync::Barrier::new(4));
        let written = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let (start, claimed, written, latency, orders) = (&start, &claimed, &written, &latency, &orders);
                scope.spawn(move || {
                    start.wait();
                    for v in 0..500 {
                        if latency.record(thread * 1000 + v) {
                            written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        orders.increment(1);
                        if v == 0 {
                            claimed.wait();
                        }
                    }
                });
            }
        });
        let written = written.into_inner();
        check(failures, written == 2000, &format!("every record written ({written} of 2000)"));
    });
    assert_eq!(child.said(), "", "nothing said");
    let workers = RingFile::read(&dir.path.join(format!("ringside.rs-race@{}", child.pid)));
    assert_eq!(workers.entries(), RingFile::read(&dir.file("rs-race")).entries());
    assert_eq!(workers.producer_attaches(), 1, "one worker file, made once");
    assert_eq!(workers.lanes_allocated(), 4);
    let mut values: Vec<u64> = (0..4).flat_map(|lane| workers.records(lane)).map(|r| r.value).collect();
    values.sort_unstable();
    let expected: Vec<u64> = (0..4u64).flat_map(|t| (0..500).map(move |v| t * 1000 + v)).collect();
    assert_eq!(values, expected);
    assert_eq!((0..4).map(|lane| workers.lane_cell(lane, 1)).sum::<u64>(), 2000);
    assert_eq!(files_in(&dir.path), ["ringside.rs-race".to_string(), format!("ringside.rs-race@{}", child.pid)]);
    child.finish();
}

#[test]
fn a_forked_child_that_never_records_makes_nothing() {
    let _turn = take_turn();
    let dir = ScratchDir::new("fork-quiet");
    let logs = ScratchDir::new("fork-quiet-stderr");
    let bot = Bot::attach_with("rs-quiet", options(&dir)).unwrap();
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    assert!(latency.record(1));
    let child = fork_child(logs.path.join("child"), |failures| {
        check(failures, bot.lanes_allocated() == 0, "the parent's file let go of");
        check(failures, bot.is_enabled(), "its records would be kept, in a file its first one makes");
        // Its handles go without a record: nothing is made.
        drop(latency);
        drop(bot);
    });
    assert_eq!(child.said(), "", "nothing said");
    assert_eq!(files_in(&dir.path), ["ringside.rs-quiet"]);
    child.finish();
    assert_eq!(files_in(&dir.path), ["ringside.rs-quiet"]);
}

#[test]
fn a_forked_child_adopts_a_worker_file_a_dead_process_left() {
    let _turn = take_turn();
    let dir = ScratchDir::new("fork-adopt");
    let logs = ScratchDir::new("fork-adopt-stderr");
    let bot = Bot::attach_with("rs-adopt", options(&dir)).unwrap();
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let child = fork_child(logs.path.join("child"), |failures| {
        // An earlier process of this pid left the worker file, with the same first metric.
        match Bot::attach_with("rs-adopt", Options { worker: true, ..options(&dir) }) {
            Ok(earlier) => match earlier.histogram("latency", Unit::Nanoseconds, &[]) {
                Ok(histogram) => check(failures, histogram.record(5), "the earlier process's record"),
                Err(error) => check(failures, false, &format!("the earlier process's metric: {error}")),
            },
            Err(error) => check(failures, false, &format!("the earlier process: {error}")),
        }
        check(failures, latency.record(6), "the inherited handle writes to the adopted file");
        orders.increment(2);
    });
    assert_eq!(child.said(), "", "nothing said");
    let workers = RingFile::read(&dir.path.join(format!("ringside.rs-adopt@{}", child.pid)));
    assert_eq!(workers.entries(), RingFile::read(&dir.file("rs-adopt")).entries());
    let records: Vec<(u32, u64)> =
        (0..workers.lanes_allocated()).flat_map(|lane| workers.records(lane)).map(|r| (r.metric, r.value)).collect();
    assert_eq!(records, [(0, 5), (0, 6)]);
    assert_eq!(workers.producer_attaches(), 2);
    child.finish();
}

#[test]
fn a_forked_child_that_cannot_make_its_worker_file_says_why_once_and_writes_nothing() {
    let _turn = take_turn();
    let dir = ScratchDir::new("fork-conflict");
    let logs = ScratchDir::new("fork-conflict-stderr");
    let bot = Bot::attach_with("rs-conflict", options(&dir)).unwrap();
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let child = fork_child(logs.path.join("child"), |failures| {
        // An earlier process of this pid left a worker file holding another metric at index 0.
        let earlier = Bot::attach_with("rs-conflict", Options { worker: true, ..options(&dir) });
        let made = earlier.and_then(|earlier| earlier.gauge("other", Unit::None, &[]));
        check(failures, made.is_ok(), "the earlier process's metric");
        drop(made); // the earlier process is gone: the file's lock is free
        for v in 0..10 {
            check(failures, !latency.record(v), "a record writes nothing");
            orders.increment(1);
        }
        check(failures, !bot.is_enabled(), "the child writes nothing to the bot");
        let refused = bot.counter("more", &[]);
        let pid = std::process::id();
        check(
            failures,
            matches!(&refused, Err(Error::Forked { pid: p, reason, .. })
                if *p == pid && reason.contains("holds another metric at index 0")),
            &format!("registration refused: {refused:?}"),
        );
        // A thread of its own writes nothing either, and nothing more is said.
        std::thread::scope(|scope| {
            scope.spawn(|| check(failures, !latency.record(1), "another thread writes nothing"));
        });
    });
    let pid = child.pid;
    let worker_file = dir.path.join(format!("ringside.rs-conflict@{pid}"));
    let said = child.said();
    assert_eq!(
        said,
        format!(
            "ringside: bot rs-conflict: this forked child (pid {pid}) writes nothing: {} holds another metric at \
             index 0 than the parent's registry: other (a gauge in none, sampled 1 in 1) where the parent's is \
             latency (a histogram in ns, sampled 1 in 1)\n",
            worker_file.display()
        ),
        "said once, why"
    );
    // The worker file is the earlier process's, untouched; the parent's has the parent's calls only.
    let workers = RingFile::read(&worker_file);
    assert_eq!(workers.entries(), [("other".to_string(), String::new(), KIND_GAUGE)]);
    assert_eq!(workers.lanes_allocated(), 0);
    let parents = RingFile::read(&dir.file("rs-conflict"));
    assert_eq!((parents.lanes_allocated(), parents.metric_count()), (0, 2));
    child.finish();
}

#[test]
fn a_forked_childs_worker_file_carries_its_parents_gauge_merge_policies() {
    let _turn = take_turn();
    let dir = ScratchDir::new("fork-merge");
    let logs = ScratchDir::new("fork-merge-stderr");
    let bot = Bot::attach_with("rs-merge", options(&dir)).unwrap();
    let in_flight = bot.metric("in_flight").merge(GaugeMerge::Sum).gauge(Unit::None).unwrap();
    let busy = bot.metric("busy").label("desk", "a").merge(GaugeMerge::PerWorker).gauge(Unit::None).unwrap();
    let level = bot.gauge("level", Unit::None, &[]).unwrap();
    bot.counter("orders", &[]).unwrap();
    assert!(in_flight.set(1.0));
    let child = fork_child(logs.path.join("child"), |failures| {
        check(failures, in_flight.set(3.0), "an inherited gauge is written");
        check(failures, busy.set(1.0) && level.set(2.0), "the others too");
        let low = bot.metric("low").merge(GaugeMerge::Min).gauge(Unit::None);
        check(failures, low.is_ok_and(|low| low.index() == 4 && low.set(0.5)), "a gauge of the child's own");
        let again = bot.metric("in_flight").merge(GaugeMerge::Max).gauge(Unit::None);
        check(failures, matches!(again, Err(Error::Conflict { .. })), "the worker's entry has the parent's policy");
    });
    assert_eq!(child.said(), "", "nothing said");
    let parents = RingFile::read(&dir.file("rs-merge"));
    let workers = RingFile::read(&dir.path.join(format!("ringside.rs-merge@{}", child.pid)));
    // The parent's entries, whole (the policy with them), then the child's.
    for index in 0..4 {
        assert_eq!(workers.entry_bytes(index), parents.entry_bytes(index), "entry {index}");
    }
    let policies: Vec<u8> = (0..workers.metric_count()).map(|index| workers.gauge_merge(index).0).collect();
    assert_eq!(policies, [1, 4, 0, 0, 3]);
    assert_eq!(workers.metric_cell(0).0, 3.0f64.to_bits());
    child.finish();
}

#[test]
fn a_forked_child_refuses_a_left_worker_file_whose_gauge_merges_otherwise() {
    let _turn = take_turn();
    let dir = ScratchDir::new("fork-merge-left");
    let logs = ScratchDir::new("fork-merge-left-stderr");
    let bot = Bot::attach_with("rs-merge", options(&dir)).unwrap();
    let in_flight = bot.metric("in_flight").merge(GaugeMerge::Sum).gauge(Unit::None).unwrap();
    let child = fork_child(logs.path.join("child"), |failures| {
        // An earlier process of this pid left a worker file: the same gauge at index 0, merged by max.
        let earlier = Bot::attach_with("rs-merge", Options { worker: true, ..options(&dir) });
        let made = earlier.and_then(|earlier| earlier.metric("in_flight").merge(GaugeMerge::Max).gauge(Unit::None));
        check(failures, made.is_ok(), "the earlier process's gauge");
        drop(made);
        check(failures, !in_flight.set(1.0) && !in_flight.set(2.0), "the child writes nothing");
        check(failures, !bot.is_enabled(), "the child is no worker");
    });
    let worker_file = dir.path.join(format!("ringside.rs-merge@{}", child.pid));
    assert_eq!(
        child.said(),
        format!(
            "ringside: bot rs-merge: this forked child (pid {}) writes nothing: {} holds another metric at index 0 \
             than the parent's registry: in_flight (a gauge in none, sampled 1 in 1, merging its workers by max) \
             where the parent's is in_flight (a gauge in none, sampled 1 in 1, merging its workers by sum)\n",
            child.pid,
            worker_file.display()
        ),
        "said once, why"
    );
    let workers = RingFile::read(&worker_file);
    assert_eq!((workers.gauge_merge(0), workers.metric_cell(0).1), ((2, 0), 0), "left as it was");
    child.finish();
}

#[test]
fn a_forked_child_refuses_a_left_worker_file_whose_histogram_has_other_values() {
    let _turn = take_turn();
    let dir = ScratchDir::new("fork-values-left");
    let logs = ScratchDir::new("fork-values-left-stderr");
    let bot = Bot::attach_with("rs-values-left", options(&dir)).unwrap();
    let slippage = bot.metric("slippage_bps").resolution(0.01).signed().histogram(Unit::None).unwrap();
    let child = fork_child(logs.path.join("child"), |failures| {
        // An earlier process of this pid left a worker file: the same histogram at index 0, unsigned.
        let earlier = Bot::attach_with("rs-values-left", Options { worker: true, ..options(&dir) });
        let made = earlier.and_then(|earlier| earlier.metric("slippage_bps").resolution(0.01).histogram(Unit::None));
        check(failures, made.is_ok(), "the earlier process's histogram");
        drop(made);
        check(failures, !slippage.record_value(-1.0), "the child writes nothing");
        check(failures, !bot.is_enabled(), "the child is no worker");
    });
    let worker_file = dir.path.join(format!("ringside.rs-values-left@{}", child.pid));
    assert_eq!(
        child.said(),
        format!(
            "ringside: bot rs-values-left: this forked child (pid {}) writes nothing: {} holds another metric at \
             index 0 than the parent's registry: slippage_bps (a histogram in none, sampled 1 in 1, unsigned values \
             in steps of 1e-2) where the parent's is slippage_bps (a histogram in none, sampled 1 in 1, signed values \
             in steps of 1e-2)\n",
            child.pid,
            worker_file.display()
        ),
        "said once, why"
    );
    let workers = RingFile::read(&worker_file);
    assert_eq!((workers.values(0), workers.lanes_allocated()), ((0, -2), 0), "left as it was");
    child.finish();
}

#[test]
fn a_fork_of_a_worker_becomes_a_worker_with_the_workers_registry() {
    let _turn = take_turn();
    let dir = ScratchDir::new("fork-twice");
    let logs = ScratchDir::new("fork-twice-stderr");
    let bot = Bot::attach_with("rs-twice", options(&dir)).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let child = fork_child(logs.path.join("child"), |failures| {
        orders.increment(1); // the child is a worker now
        let extra = bot.counter("extra", &[]);
        check(failures, extra.as_ref().map(|c| c.index()).ok() == Some(1), "the child's own metric");
        // SAFETY: as in fork_child: the grandchild records and _exits at once.
        let pid = unsafe { fork() };
        if pid == 0 {
            orders.increment(10);
            if let Ok(extra) = &extra {
                extra.increment(20);
            }
            // SAFETY: ends the grandchild at once.
            unsafe { _exit(if bot.is_enabled() { 0 } else { 1 }) };
        }
        check(failures, pid > 0 && wait_for(pid) == 0, "the grandchild became a worker");
        orders.increment(100);
        // The grandchild's pid, for the parent.
        let _ = std::fs::write(logs.path.join("grandchild"), pid.to_string());
    });
    assert_eq!(child.said(), "", "nothing said");
    let grandchild: i32 = std::fs::read_to_string(logs.path.join("grandchild")).unwrap().parse().unwrap();
    let childs = RingFile::read(&dir.path.join(format!("ringside.rs-twice@{}", child.pid)));
    assert_eq!((childs.metric_count(), childs.lane_cell(0, 0), childs.lane_cell(0, 1)), (2, 101, 0));
    let grandchilds = RingFile::read(&dir.path.join(format!("ringside.rs-twice@{grandchild}")));
    assert_eq!(grandchilds.entries(), childs.entries(), "the child's registry, its own metric too");
    assert_eq!((grandchilds.lane_cell(0, 0), grandchilds.lane_cell(0, 1)), (10, 20));
    assert_eq!(RingFile::read(&dir.file("rs-twice")).lanes_allocated(), 0, "the parent recorded nothing");
    child.finish();
}

#[test]
fn the_worker_option_writes_a_second_file_beside_the_owner_of_the_name() {
    let _turn = take_turn();
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
    assert_eq!(worker.path(), Some(worker_file.clone()));
    assert_eq!(worker.name(), "rs-pool");
    let level = worker.gauge("level", Unit::None, &[]).unwrap();
    let jobs = worker.counter("jobs", &[]).unwrap();
    assert_eq!((level.index(), jobs.index()), (0, 1), "a registry of its own");
    jobs.increment(3);
    assert!(level.set(4.0));
    // One worker file per process: this process holds it already.
    assert!(matches!(Bot::attach_with("rs-pool", options(true)), Err(Error::ProducerAlive { .. })));

    assert_eq!(files_in(&dir.path), ["ringside.rs-pool".to_string(), format!("ringside.rs-pool@{pid}")]);
    let owners = RingFile::read(&dir.file("rs-pool"));
    assert_eq!((owners.metric_count(), owners.lane_cell(0, 0)), (1, 2));
    let workers = RingFile::read(&worker_file);
    assert_eq!((workers.metric_count(), workers.producer_pid()), (2, pid as i32));
    assert_eq!((workers.lane_cell(0, 1), workers.metric_cell(0).0), (3, 4.0f64.to_bits()));
    assert_eq!(workers.records(0).iter().map(|r| (r.metric, r.value)).collect::<Vec<_>>(), [(0, 4.0f64.to_bits())]);
}

#[test]
fn a_forked_child_times_spans_with_the_calibration_it_inherited() {
    // The TSC is the machine's, so a child's spans convert with the parent's calibration, and
    // the child anchors again as its spans end (its latch is whole: THE SPAN CLOCK in ringside.h).
    let _turn = take_turn();
    let dir = ScratchDir::new("fork-span");
    let logs = ScratchDir::new("fork-span-stderr");
    let bot = Bot::attach_with("rs-fork-span", options(&dir)).unwrap();
    let sleep = bot.histogram("sleep_span", Unit::Nanoseconds, &[]).unwrap();
    let started = sleep.span(); // begun before the fork, ended in the parent
    let child = fork_child(logs.path.join("child"), |failures| {
        let outer_start = clock_monotonic_ns();
        let span = sleep.span();
        std::thread::sleep(Duration::from_millis(20));
        check(failures, span.finish(), "the child's span is written");
        let outer_end = clock_monotonic_ns();
        let file = RingFile::read(&dir.path.join(format!("ringside.rs-fork-span@{}", std::process::id())));
        let records = file.records(0);
        let bound = SpanClock::BOUND_NS;
        let ok = records.len() == 1
            && records[0].value >= 19_960_000
            && records[0].value <= outer_end - outer_start + 20_000
            && records[0].timestamp_ns + bound >= outer_start + 20_000_000
            && records[0].timestamp_ns <= outer_end + bound;
        check(failures, ok, &format!("a 20 ms span in [{outer_start}, {outer_end}]: {records:?}"));
    });
    child.finish();
    assert!(started.finish());
    let records = RingFile::read(&dir.file("rs-fork-span")).records(0);
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(records[0].value >= 20_000_000, "{records:?}");
}

#[test]
fn a_forked_child_rings_the_doorbell_of_its_worker_file() {
    // The child registers for the consumer's barrier itself (DOORBELL in ringside.h: once per
    // process), says so in its worker file, and clears that file's doorbell when it writes.
    use std::os::unix::fs::FileExt;
    let _turn = take_turn();
    let dir = ScratchDir::new("fork-bell");
    let logs = ScratchDir::new("fork-bell-stderr");
    let bot = Bot::attach_with("rs-fork-bell", options(&dir)).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    orders.increment(1);
    let child = fork_child(logs.path.join("child"), |failures| {
        orders.increment(1); // the child is a worker now
        let worker = dir.path.join(format!("ringside.rs-fork-bell@{}", std::process::id()));
        let Ok(file) = std::fs::OpenOptions::new().read(true).write(true).open(&worker) else {
            return check(failures, false, "the worker file opens");
        };
        let word = |offset: u64| {
            let mut bytes = [0u8; 4];
            file.read_exact_at(&mut bytes, offset).map(|_| u32::from_le_bytes(bytes)).unwrap_or(u32::MAX)
        };
        check(failures, word(0x0B4) == 1, "the worker file says its process rings");
        check(failures, file.write_all_at(&1u32.to_le_bytes(), 0x140).is_ok(), "the doorbell set");
        orders.increment(1);
        check(failures, word(0x140) == 0, "an increment in the child clears its file's doorbell");
    });
    child.finish();
}
