//! Exemplars and lane thread names (EXEMPLARS and THREAD NAMES in ringside.h), written by this
//! crate and read by the real collector and `ringside-dump check`: the bytes in the lane, what
//! `/latest` and OpenMetrics show, drops of a value and its exemplar together, exemplars refused
//! when made, and the check against C's `rs_exemplar_check`. Each test has its own directory.

mod common;

use common::{clock_monotonic_ns, compile_with_c_producer, thread_id, Collector, Json, Record, RingFile, ScratchDir};
use ringside::{Bot, Error, Exemplar, Options, Unit};
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

fn options(dir: &ScratchDir) -> Options {
    Options { directory: Some(dir.path.clone()), ..Options::default() }
}

fn expect<T: PartialEq + std::fmt::Debug>(what: &str, value: T, expected: T) -> Result<(), String> {
    if value == expected {
        Ok(())
    } else {
        Err(format!("{what} is {value:?}, expecting {expected:?}"))
    }
}

const HISTOGRAM: u8 = 3;
const EXEMPLAR_RECORD: u8 = 4;
const FLAG_SPAN: u8 = 0x01;
const FLAG_EXEMPLAR: u8 = 0x02;

/// The exemplar whose value's record is `records[at]`: its bytes put back together from the
/// exemplar records after it (16 a record, timestamp then value), checked in place as a reader
/// checks them. Returns the bytes, zero padding included.
fn exemplar_bytes(records: &[Record], at: usize) -> Vec<u8> {
    let value = records[at];
    assert_eq!((value.kind, value.flags & FLAG_EXEMPLAR), (HISTOGRAM, FLAG_EXEMPLAR), "a value with an exemplar");
    let parts = (value.exemplar_length as usize).div_ceil(16);
    let mut bytes = Vec::new();
    for (k, part) in records[at + 1..at + 1 + parts].iter().enumerate() {
        assert_eq!(
            (part.kind, part.metric, part.flags, part.exemplar_length, part.sequence),
            (EXEMPLAR_RECORD, value.metric, 0, 0, value.sequence + 1 + k as u64),
            "exemplar record {k} of the value at {}",
            value.sequence
        );
        bytes.extend_from_slice(&part.timestamp_ns.to_le_bytes());
        bytes.extend_from_slice(&part.value.to_le_bytes());
    }
    bytes
}

/// `exemplar`'s bytes as the records carry them: its text, then zeros to a multiple of 16.
fn padded(exemplar: &str) -> Vec<u8> {
    let mut bytes = exemplar.as_bytes().to_vec();
    bytes.resize(exemplar.len().div_ceil(16) * 16, 0);
    bytes
}

/// The first exemplar of `exemplars` whose value is `value`.
fn exemplar_of(exemplars: &[Json], value: f64) -> Result<&Json, String> {
    exemplars
        .iter()
        .find(|e| e.num("value").ok() == Some(value))
        .ok_or_else(|| format!("no exemplar of value {value} in {exemplars:?}"))
}

#[test]
fn an_exemplar_reaches_latest_and_openmetrics_with_its_labels_pid_and_thread() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("exemplar-latest");
    let bot = Bot::attach_with("rs-exemplar", options(&dir)).unwrap();
    let fill = bot.histogram("fill", Unit::Microseconds, &[("symbol", "AAPL")]).unwrap();

    // A thread named by std (12 bytes: the kernel keeps them all), and one that names itself in
    // the bot past the kernel's 15 bytes. Both hold their lanes until the collector has seen them.
    let (done_sender, done) = mpsc::channel::<()>();
    let done = std::sync::Arc::new(std::sync::Mutex::new(done));
    let (tid_sender, tids) = mpsc::channel();
    let spawn = |name: Option<&str>, value: u64, exemplar: Exemplar| {
        let (fill, bot, tid_sender, done) = (fill.clone(), bot.clone(), tid_sender.clone(), done.clone());
        let builder = thread::Builder::new().name("rs-ex-router".into());
        let long_name = name.map(str::to_string);
        builder
            .spawn(move || {
                if let Some(name) = long_name {
                    bot.name_thread(&name).unwrap();
                }
                assert!(fill.record(3));
                assert!(fill.record_with_exemplar(value, &exemplar));
                tid_sender.send(thread_id()).unwrap();
                let _ = done.lock().unwrap().recv();
            })
            .unwrap()
    };
    let order = Exemplar::new(&[("order_id", "A17"), ("venue", "XNAS")]).unwrap(); // 25 bytes: 2 records
    let router = spawn(None, 250, order);
    let router_tid = tids.recv().unwrap();
    let trace = Exemplar::new(&[("trace_id", "0af7651916cd43dd8448eb211c80319c")]).unwrap(); // 41 bytes: 3
    let long_name = "order-router-venue-xnas-01"; // 26 bytes
    let named = spawn(Some(long_name), 900, trace);
    let named_tid = tids.recv().unwrap();

    // In the file: each value flagged with its exemplar's length, then its bytes.
    let file = RingFile::read(&dir.file("rs-exemplar"));
    assert_eq!(file.lanes_allocated(), 2);
    let (lane0, lane1) = (file.lane(0), file.lane(1));
    assert_eq!((lane0.owner_tid, lane0.thread_name.as_slice()), (router_tid, &b"rs-ex-router"[..]));
    assert_eq!((lane1.owner_tid, lane1.thread_name.as_slice()), (named_tid, long_name.as_bytes()));
    for (lane, value, text, parts) in
        [(0, 250, order.as_str(), 2), (1, 900, "trace_id=0af7651916cd43dd8448eb211c80319c", 3)]
    {
        let records = file.records(lane);
        assert_eq!(file.lane(lane).write_cursor, 2 + parts, "a plain record, the value and its exemplar records");
        assert_eq!((records[0].kind, records[0].flags, records[0].exemplar_length), (HISTOGRAM, 0, 0));
        assert_eq!((records[1].value, records[1].exemplar_length as usize), (value, text.len()));
        assert_eq!(exemplar_bytes(&records, 1), padded(text));
    }

    let collector = Collector::start(&binary, &dir);
    let pid = std::process::id() as f64;
    collector.wait_for("both exemplars, each with its pid and thread", |latest| {
        let series = latest.series("rs-exemplar", "fill")?;
        expect("count", series.num("total_count")?, 4.0)?;
        for place in ["windows.1m.exemplars", "bucket_exemplars"] {
            let exemplars = series.at(place).map(Json::array).unwrap_or_default();
            let order = exemplar_of(exemplars, 250.0)?;
            expect("order_id", order.at("labels.order_id").and_then(Json::str), Some("A17"))?;
            expect("venue", order.at("labels.venue").and_then(Json::str), Some("XNAS"))?;
            expect("pid", order.num("pid")?, pid)?;
            expect("thread_id", order.num("thread_id")?, router_tid as f64)?;
            expect("thread_name", order.at("thread_name").and_then(Json::str), Some("rs-ex-router"))?;
            let trace = exemplar_of(exemplars, 900.0)?;
            expect(
                "trace_id",
                trace.at("labels.trace_id").and_then(Json::str),
                Some("0af7651916cd43dd8448eb211c80319c"),
            )?;
            expect("its thread_id", trace.num("thread_id")?, named_tid as f64)?;
            expect("its thread_name", trace.at("thread_name").and_then(Json::str), Some(long_name))?;
        }
        expect("rejected", latest.ring("rs-exemplar")?.num("rejected_total")?, 0.0)
    });

    // OpenMetrics: each bucket's latest exemplar on its line, in seconds.
    let page =
        common::http_get_with(collector.port, "/metrics", "Accept: application/openmetrics-text; version=1.0.0\r\n")
            .unwrap();
    for labels in
        [r#"# {order_id="A17",venue="XNAS"} 0.00025"#, r#"# {trace_id="0af7651916cd43dd8448eb211c80319c"} 0.0009"#]
    {
        assert!(
            page.lines().any(|line| line.starts_with("fill_seconds_bucket{") && line.contains(labels)),
            "no bucket line with {labels}:\n{page}"
        );
    }
    drop(done_sender);
    router.join().unwrap();
    named.join().unwrap();
}

#[test]
fn a_lane_carries_its_threads_name() {
    let dir = ScratchDir::new("thread-names");
    let bot = Bot::attach_with("rs-thread-names", options(&dir)).unwrap();
    let fill = bot.histogram("fill", Unit::Nanoseconds, &[]).unwrap();
    let path = dir.file("rs-thread-names");
    let lane_name = |lane| String::from_utf8(RingFile::read(&path).lane(lane).thread_name).unwrap();
    let run = |name: Option<&str>, body: Box<dyn FnOnce() + Send>| {
        let builder = match name {
            Some(name) => thread::Builder::new().name(name.to_string()),
            None => thread::Builder::new(),
        };
        builder.spawn(body).unwrap().join().unwrap();
    };

    // std's name, which the kernel keeps to 15 bytes.
    let f = fill.clone();
    run(Some("rs-lane-name"), Box::new(move || assert!(f.record(1))));
    assert_eq!(lane_name(0), "rs-lane-name", "kept after the thread retired its lane");
    let f = fill.clone();
    run(Some("a-name-of-twenty-bytes"), Box::new(move || assert!(f.record(1))));
    assert_eq!(lane_name(0), "a-name-of-twent", "the kernel's 15 bytes, NUL-padded over the longer name before");
    let f = fill.clone();
    run(Some("ééééééééé"), Box::new(move || assert!(f.record(1))));
    assert_eq!(lane_name(0), "ééééééé", "the kernel's 15 bytes end in half an 'é': left out");

    // An unnamed thread: the kernel's name for it, the program's, as C writes it.
    let (f, comm) = (fill.clone(), std::sync::Arc::new(std::sync::Mutex::new(String::new())));
    let seen = comm.clone();
    run(
        None,
        Box::new(move || {
            assert!(f.record(1));
            *seen.lock().unwrap() = std::fs::read_to_string("/proc/thread-self/comm").unwrap().trim_end().to_string();
        }),
    );
    assert_eq!(lane_name(0), *comm.lock().unwrap());

    // Bot::name_thread: a name of its own, claiming a lane first if the thread has none; 32
    // bytes at most, cut before a character that would straddle the end.
    let (b, f) = (bot.clone(), fill.clone());
    run(
        Some("short"),
        Box::new(move || {
            b.name_thread("über-long-thread-name-for-a-lane").unwrap(); // 33 bytes: 'ü' takes 2
            assert_eq!(b.lanes_allocated(), 1, "claimed lane 0 to name it");
            assert!(f.record(1));
        }),
    );
    assert_eq!(lane_name(0), "über-long-thread-name-for-a-lan");
    let (b, f) = (bot.clone(), fill.clone());
    run(
        Some("short"),
        Box::new(move || {
            assert!(f.record(1));
            b.name_thread(&format!("{}é", "z".repeat(31))).unwrap(); // 'é' would end at byte 33
            assert_eq!(std::str::from_utf8(&name_now(&b)).unwrap(), "z".repeat(31));
            let error = b.name_thread("nul\0name").unwrap_err();
            assert!(matches!(error, Error::InvalidOption { .. }), "{error:?}");
            assert!(error.to_string().contains("a thread name holds no NUL"), "{error}");
            assert_eq!(std::str::from_utf8(&name_now(&b)).unwrap(), "z".repeat(31), "a refused name writes nothing");
        }),
    );
    assert_eq!(RingFile::read(&path).lanes_allocated(), 1, "every thread reused lane 0");

    // A disabled bot has no lane to name: nothing happens.
    let disabled = Bot::attach_with("rs-thread-names-off", Options { disabled: true, ..options(&dir) }).unwrap();
    disabled.name_thread("anything").unwrap();
}

/// The calling thread's lane name in `bot`'s file, read back (the thread holds lane 0).
fn name_now(bot: &Bot) -> Vec<u8> {
    RingFile::read(&bot.path().unwrap()).lane(0).thread_name
}

#[test]
fn exemplars_too_long_or_malformed_are_refused_when_made_and_nothing_is_written() {
    let dir = ScratchDir::new("exemplar-refused");
    let bot = Bot::attach_with("rs-exemplar-refused", options(&dir)).unwrap();
    let fill = bot.histogram("fill", Unit::Nanoseconds, &[]).unwrap();
    let trace = "f".repeat(56); // "trace_id=" and 56: 65 bytes, one past the most
    let refusals: [(Result<Exemplar, Error>, &str); 6] = [
        (Exemplar::new(&[("trace_id", &trace)]), "an exemplar has 1 to 64 bytes, not 65"),
        (Exemplar::new(&[]), "an exemplar has 1 to 64 bytes, not 0"),
        (Exemplar::new(&[("order id", "A17")]), "an exemplar's key is a name"),
        (Exemplar::new(&[("order_id", "A17\nvenue=XNAS")]), "holds a newline or a NUL"),
        (Exemplar::new(&[("a", "1"), ("a", "2")]), "an exemplar's key a is given twice"),
        (Exemplar::from_encoded("order_id=A17\n"), "an exemplar ends with a newline"),
    ];
    for (result, reason) in refusals {
        let error = result.unwrap_err();
        assert!(matches!(error, Error::InvalidExemplar { .. }), "{error:?}");
        let message = error.to_string();
        assert!(message.starts_with("invalid exemplar: ") && message.contains(reason), "{message}");
    }
    // Nothing reached the file: no lane claimed, nothing written or dropped. The histogram still works.
    let file = RingFile::read(&dir.file("rs-exemplar-refused"));
    assert_eq!((file.lanes_allocated(), file.metric_cell(0).2), (0, 0));
    assert!(fill.record_with_exemplar(7, &Exemplar::new(&[("trace_id", &trace[..55])]).unwrap()), "64 bytes fit");
    let file = RingFile::read(&dir.file("rs-exemplar-refused"));
    assert_eq!((file.lane(0).write_cursor, file.lane(0).dropped_total), (5, 0), "the value and 4 exemplar records");
}

#[test]
fn a_value_with_an_exemplar_is_stamped_with_the_precise_clock_never_before_its_call() {
    let dir = ScratchDir::new("exemplar-stamp");
    let bot = Bot::attach_with("rs-exemplar-stamp", Options { lane_capacity: Some(4096), ..options(&dir) }).unwrap();
    let fill = bot.histogram("fill", Unit::Nanoseconds, &[]).unwrap();
    let exemplar = Exemplar::new(&[("order_id", "A17")]).unwrap(); // a value and its exemplar: 2 slots
                                                                   // The coarse clock lags CLOCK_MONOTONIC by up to its resolution (a few ms): over a thousand
                                                                   // calls spread over milliseconds, a coarse stamp would fall before its call.
    let calls = 1_000u64;
    let mut before = Vec::with_capacity(calls as usize);
    for index in 0..calls {
        before.push(clock_monotonic_ns());
        assert!(fill.record_with_exemplar(index, &exemplar), "call {index} written");
        if index % 100 == 99 {
            thread::sleep(Duration::from_millis(1));
        }
    }
    let file = RingFile::read(&dir.file("rs-exemplar-stamp"));
    assert_eq!(file.lanes_allocated(), 1, "one thread, one lane");
    let values: Vec<Record> = file.records(0).into_iter().filter(|r| r.kind == HISTOGRAM).collect();
    assert_eq!(
        values.iter().map(|r| r.value).collect::<Vec<_>>(),
        (0..calls).collect::<Vec<_>>(),
        "every call, in order"
    );
    assert!(values.iter().all(|r| r.flags & FLAG_EXEMPLAR != 0), "each with its exemplar");
    let early: Vec<(u64, u64, u64)> = values
        .iter()
        .zip(&before)
        .filter(|(record, &read)| record.timestamp_ns < read)
        .map(|(record, &read)| (record.value, record.timestamp_ns, read))
        .collect();
    assert!(
        early.is_empty(),
        "{} of {calls} stamped before their call (value, stamp, the clock before the call), the first: {:?}",
        early.len(),
        &early[..early.len().min(5)]
    );
}

#[test]
fn a_full_lane_drops_a_value_and_its_exemplar_together_and_counts_it_once() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("exemplar-drops");
    // Never sampled (SAMPLING in ringside.h): the collector that comes and goes below says it reads
    // gather cells, and a lane about to fill would then sample its calls, not drop them.
    let options = Options { lane_capacity: Some(16), max_lanes: Some(1), sample_above_percent: 100, ..options(&dir) };
    let bot = Bot::attach_with("rs-exemplar-drops", options).unwrap();
    let fill = bot.histogram("fill", Unit::Nanoseconds, &[]).unwrap();
    let path = dir.file("rs-exemplar-drops");
    let small = Exemplar::new(&[("order_id", "A17")]).unwrap(); // 12 bytes: 2 slots with its value
    let large = Exemplar::new(&[("trace_id", &"e".repeat(55))]).unwrap(); // 64 bytes: 5 slots
    let medium = Exemplar::new(&[("trace_id", &"d".repeat(39))]).unwrap(); // 48 bytes: 4 slots

    // No collector yet: nothing drains. 14 records, then a value and its exemplar fill the last 2
    // slots exactly; the next finds no room and is dropped whole.
    for i in 0..14 {
        assert!(fill.record(i));
    }
    assert!(fill.record_with_exemplar(100, &small), "2 slots free, 2 needed");
    assert!(!fill.record_with_exemplar(101, &small), "the lane is full");
    let file = RingFile::read(&path);
    assert_eq!((file.lane(0).write_cursor, file.lane(0).dropped_total, file.lane_cell(0, 0)), (16, 1, 1));
    assert_eq!(exemplar_bytes(&file.records(0), 14), padded("order_id=A17"));
    let cell = file.gather_cell(0, 0);
    assert_eq!((cell.dropped_sum, cell.dropped_max), (101, 101), "the value dropped is kept aside");

    // A thread without a lane (max_lanes 1, held here): its value and exemplar are counted in the
    // metric's unlaned cell.
    let f = fill.clone();
    thread::spawn(move || assert!(!f.record_with_exemplar(102, &Exemplar::new(&[("k", "v")]).unwrap())))
        .join()
        .unwrap();
    assert_eq!(RingFile::read(&path).metric_cell(0).2, 1);
    assert_eq!(RingFile::read(&path).unlaned_values(0), (102, 102), "its value in the metric cell");

    let collector = Collector::start(&binary, &dir);
    collector.wait_for("15 values, the exemplar that fit, 2 drops", |latest| {
        let series = latest.series("rs-exemplar-drops", "fill")?;
        expect("count", series.num("total_count")?, 15.0)?;
        expect("dropped", series.num("dropped_records")?, 2.0)?;
        expect("dropped sum", series.num("dropped_sum")?, 203.0)?;
        expect("dropped max", series.num("dropped_max")?, 102.0)?;
        exemplar_of(series.at("windows.1m.exemplars").map(Json::array).unwrap_or_default(), 100.0)?;
        expect("backlog", latest.ring("rs-exemplar-drops")?.num("backlog")?, 0.0)
    });
    drop(collector); // nothing drains again: the lane is empty, 16 slots free

    // Room for some of an exemplar's slots, never all: nothing is written, one drop each.
    for i in 0..13 {
        assert!(fill.record(i)); // 3 slots left
    }
    assert!(!fill.record_with_exemplar(200, &large), "5 slots needed");
    assert!(!fill.record_with_exemplar(201, &medium), "4 slots needed");
    assert!(fill.record_with_exemplar(202, &small), "2 slots needed, 3 free");
    assert!(!fill.record_with_exemplar(203, &small), "2 slots needed, 1 free");
    assert!(fill.record(204), "the one slot left was not touched by the drops");
    let file = RingFile::read(&path);
    let lane = file.lane(0);
    assert_eq!((lane.write_cursor, lane.dropped_total, file.lane_cell(0, 0)), (32, 4, 4), "1 before, 3 now");
    let cell = file.gather_cell(0, 0);
    assert_eq!((cell.dropped_sum, cell.dropped_max), (101 + 200 + 201 + 203, 203));
    let kinds: Vec<(u8, u8)> = file.records(0).iter().map(|r| (r.kind, r.flags)).collect();
    let mut expected = vec![(HISTOGRAM, 0); 13];
    expected.extend([(HISTOGRAM, FLAG_EXEMPLAR), (EXEMPLAR_RECORD, 0), (HISTOGRAM, 0)]);
    assert_eq!(kinds, expected, "whole groups only");

    let collector = Collector::start(&binary, &dir);
    // A new collector counts the values it reads (these 15); the drops are the file's, all of them.
    collector.wait_for("15 more values, 5 drops", |latest| {
        let series = latest.series("rs-exemplar-drops", "fill")?;
        expect("count", series.num("total_count")?, 15.0)?;
        expect("dropped", series.num("dropped_records")?, 5.0)?;
        expect("dropped sum", series.num("dropped_sum")?, (101 + 102 + 200 + 201 + 203) as f64)?;
        exemplar_of(series.at("windows.1m.exemplars").map(Json::array).unwrap_or_default(), 202.0)?;
        expect("rejected", latest.ring("rs-exemplar-drops")?.num("rejected_total")?, 0.0)
    });
}

#[test]
fn exemplar_groups_of_every_length_pass_ringside_dump_check_and_the_collector() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("exemplar-check");
    let bot = Bot::attach_with("rs-exemplar-check", options(&dir)).unwrap();
    let fill = bot.histogram("fill", Unit::Microseconds, &[]).unwrap();
    let sampled = bot.metric("sampled").sample_every(2).histogram(Unit::Nanoseconds).unwrap();

    // Every length an exemplar can have, 2 ("k=") to 64 bytes: 1 to 4 exemplar records.
    let exemplars: Vec<Exemplar> = (0..=62).map(|n| Exemplar::new(&[("k", &"x".repeat(n))]).unwrap()).collect();
    for (i, exemplar) in exemplars.iter().enumerate() {
        assert!(fill.record_with_exemplar(i as u64 + 1, exemplar));
    }
    // A duration, and a span with an exemplar (flagged as a span too, stamped with its end).
    let order = Exemplar::new(&[("order_id", "A17")]).unwrap();
    assert!(fill.record_duration_with_exemplar(Duration::from_micros(5_000), &order));
    assert!(fill.span().finish_with_exemplar(&order));
    // Sampled 1 in 2: the first call of two writes, its exemplar with it.
    let written: Vec<bool> = (0..4).map(|i| sampled.record_with_exemplar(i, &order)).collect();
    assert_eq!(written, [true, false, true, false]);

    let file = RingFile::read(&dir.file("rs-exemplar-check"));
    let records = file.records(0);
    let mut at = 0;
    for exemplar in &exemplars {
        assert_eq!(exemplar_bytes(&records, at), padded(exemplar.as_str()));
        at += 1 + exemplar.len().div_ceil(16);
    }
    assert_eq!((records[at].value, records[at].flags), (5_000, FLAG_EXEMPLAR), "the duration, in us");
    assert_eq!(records[at + 2].flags, FLAG_SPAN | FLAG_EXEMPLAR, "the span");
    assert_eq!(exemplar_bytes(&records, at + 2), padded("order_id=A17"));
    assert_eq!(records.len(), at + 4 + 2 * 2, "then the sampled histogram's two values and their exemplars");

    if let Some(dump) = common::dump_binary(&binary) {
        let output = Command::new(&dump).arg("--dir").arg(&dir.path).args(["check", "rs-exemplar-check"]).output();
        let output = output.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success() && stdout.contains(" ok "), "ringside-dump check: {stdout}");
    } else {
        common::say("SKIPPED (part): ringside-dump check (no ringside-dump beside the collector)");
    }
    let collector = Collector::start(&binary, &dir);
    collector.wait_for("every value, every exemplar accepted", |latest| {
        expect("fill", latest.series("rs-exemplar-check", "fill")?.num("total_count")?, 65.0)?;
        expect("sampled (scaled by 2)", latest.series("rs-exemplar-check", "sampled")?.num("total_count")?, 4.0)?;
        let ring = latest.ring("rs-exemplar-check")?;
        expect("records", ring.num("consumed_total")?, records.len() as f64)?;
        expect("rejected", ring.num("rejected_total")?, 0.0)
    });
}

/// Prints, for each argument, "ok" or the reason `rs_exemplar_check` refuses it.
const C_CHECK: &str = r#"
#include "ringside_producer.h"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        rs_error error;
        memset(&error, 0, sizeof error);
        if (rs_exemplar_check(argv[i], strlen(argv[i]), &error) == 0) puts("ok");
        else puts(error.message);
    }
    return 0;
}
"#;

#[test]
fn exemplars_are_checked_as_c_checks_them() {
    let build = ScratchDir::new("exemplar-c-check");
    let (source, program) = (build.path.join("check.c"), build.path.join("check"));
    std::fs::write(&source, C_CHECK).unwrap();
    let compiled = compile_with_c_producer(&source, &program);
    if !compiled {
        common::say("SKIPPED: the check against C's rs_exemplar_check (no cc, or no Sources/CRingside)");
        return;
    }
    // A fixed sequence of cases (the same every run): strings of characters that make and break
    // exemplars, half of them drawn as pairs, so that many are exemplars and many are not.
    let alphabet = ['a', 'b', 'Z', '_', '9', '=', '\n', '-', 'é', ' '];
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move |below: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as usize % below
    };
    let mut cases: Vec<String> =
        ["order_id=A17", "a=1\nb=2", "a=1\na=2", "=", "a=\n", "_=", "9=1", "a=b=c", "a==", "k=é"]
            .map(String::from)
            .into();
    for case in 0..4000 {
        let mut text = String::new();
        if case % 2 == 0 {
            for _ in 0..next(71) {
                text.push(alphabet[next(alphabet.len())]);
            }
        } else {
            for pair in 0..1 + next(4) {
                if pair > 0 {
                    text.push('\n');
                }
                let key_length = next(5);
                for k in 0..key_length {
                    // Mostly letters, now and then a digit, a dash or a space.
                    let key_characters = ['a', 'b', 'Z', '_', 'a', 'b', '9', '-', ' '];
                    text.push(key_characters[if k == 0 { next(4) } else { next(key_characters.len()) }]);
                }
                text.push('=');
                let value_characters = ['a', 'b', 'Z', '_', '9', '=', '-', 'é', ' '];
                for _ in 0..next(12) {
                    text.push(value_characters[next(value_characters.len())]);
                }
                if next(8) == 0 {
                    text.push(['\n', '\n', '='][next(3)]); // now and then a newline that ends nothing
                }
            }
        }
        cases.push(text);
    }
    let output = Command::new(&program).args(&cases).output().unwrap();
    assert!(output.status.success());
    let verdicts: Vec<String> = String::from_utf8(output.stdout).unwrap().lines().map(String::from).collect();
    assert_eq!(verdicts.len(), cases.len());
    let mut accepted = 0;
    for (case, c_verdict) in cases.iter().zip(&verdicts) {
        match Exemplar::from_encoded(case) {
            Ok(exemplar) => {
                assert_eq!(c_verdict, "ok", "{case:?}: accepted here, refused by C");
                assert_eq!(exemplar.as_str(), case);
                accepted += 1;
            }
            Err(Error::InvalidExemplar { reason }) => {
                // Past 64 bytes (or none), the reason also quotes the exemplar.
                assert!(reason.starts_with(c_verdict.as_str()), "{case:?}: C says {c_verdict:?}, here {reason:?}");
            }
            Err(other) => panic!("{case:?}: {other}"),
        }
    }
    assert!(
        accepted > cases.len() / 10 && accepted < cases.len() * 9 / 10,
        "{accepted} accepted of {}: the cases test both verdicts",
        cases.len()
    );
}
