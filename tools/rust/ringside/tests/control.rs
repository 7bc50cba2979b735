//! The operator's control (format 4: CONTROL in ringside.h): a metric turned off, or the bot
//! turned off, records and counts nothing until turned on again; a histogram sampled 1 in 2^n
//! writes exactly every 2^n-th call and gathers the others, so that its calls are its records and
//! its gathered calls exactly; a metric published while the bot is off starts off; and a worker
//! file's metrics take the words of the same metrics in the bot's own file. The tests write the
//! words into the file as the operator's tool does.

mod common;

use common::{declare_consumer, thread_id, RingFile, ScratchDir, SharedFile};
use ringside::{Bot, Exemplar, Options, Unit};
use std::path::Path;

const CONTROL_OFF: u32 = 0x8000_0000;
const CONTROL_BOT_OFF: u32 = 0x4000_0000;
const BOT_CONTROL: usize = 0x180; // rs_header.bot_control
const CELLS_OFFSET: usize = 0x28; // rs_header.cells_offset
const CONTROL: usize = 0x30; // rs_metric_cell.control

fn options(dir: &ScratchDir, capacity: u64) -> Options {
    Options {
        directory: Some(dir.path.clone()),
        lane_capacity: Some(capacity),
        max_metrics: Some(16),
        ..Options::default()
    }
}

/// Where metric `index`'s control word lies in a file.
fn control_at(file: &SharedFile, index: u32) -> usize {
    file.load(CELLS_OFFSET) as usize + index as usize * 64 + CONTROL
}

/// Stores metric `index`'s control word, as the operator's tool does (the word after it, reserved,
/// stays zero).
fn set_control(path: &Path, index: u32, word: u32) {
    let file = SharedFile::map(path);
    file.store(control_at(&file, index), word as u64);
}

/// Stores the header's `bot_control` (the reserved word after it stays zero).
fn set_bot_control(path: &Path, word: u32) {
    SharedFile::map(path).store(BOT_CONTROL, word as u64);
}

fn control(path: &Path, index: u32) -> u32 {
    let file = RingFile::read(path);
    file.u32(file.u64(CELLS_OFFSET) as usize + index as usize * 64 + CONTROL)
}

/// The records of the lane the calling thread holds.
fn records_of_this_thread(path: &Path) -> Vec<common::Record> {
    let lane = SharedFile::map(path).lane_of_thread(thread_id()).expect("the thread holds a lane");
    RingFile::read(path).records(lane)
}

/// What a histogram, a counter and a gauge (indices 0, 1 and 2) show in the file: the
/// histogram's records and its values' clamped count, the counter's total on the lane, its
/// clamped count, and the gauge's value.
fn shown(path: &Path) -> (usize, u64, u64, u64, f64) {
    let file = RingFile::read(path);
    let histograms = file.records(0).iter().filter(|r| r.metric == 0 && r.kind == 3).count();
    (histograms, file.clamped(0), file.lane_cell(0, 1), file.clamped(1), f64::from_bits(file.metric_cell(2).0))
}

/// A call of each kind, each of which writes or counts something when the metric is on.
fn one_of_each(bot: &Bot, value: u64) -> [bool; 6] {
    let histogram = bot.histogram("fills", Unit::Nanoseconds, &[]).unwrap();
    let counter = bot.counter("orders", &[]).unwrap();
    let gauge = bot.gauge("price", Unit::None, &[]).unwrap();
    let exemplar = Exemplar::new(&[("order_id", "A17")]).unwrap();
    counter.increment(value);
    counter.increment_value(-1.0); // clamped: counted in `clamped`
    [
        histogram.record(value),
        histogram.record_with_exemplar(value, &exemplar),
        histogram.span().finish(),
        histogram.record_value(-1.0), // clamped to 0, recorded, and counted in `clamped`
        gauge.set(value as f64),
        histogram.record_duration(std::time::Duration::from_nanos(value)),
    ]
}

#[test]
fn a_metric_turned_off_records_and_counts_nothing_until_turned_on() {
    let dir = ScratchDir::new("control-off");
    let bot = Bot::attach_with("rs-ctl-off", options(&dir, 1024)).unwrap();
    let path = dir.file("rs-ctl-off");
    assert_eq!(one_of_each(&bot, 5), [true; 6]);
    assert_eq!(shown(&path), (5, 1, 5, 1, 5.0));
    for index in 0..3 {
        assert_eq!(control(&path, index), 0, "a file is made with every metric as registered");
        set_control(&path, index, CONTROL_OFF);
    }
    assert_eq!(one_of_each(&bot, 7), [false; 6], "every call returns not written");
    assert_eq!(shown(&path), (5, 1, 5, 1, 5.0), "nothing recorded, nothing counted, the gauge not set");
    // One metric on again: only its calls write.
    set_control(&path, 1, 0);
    assert_eq!(one_of_each(&bot, 9), [false; 6]);
    assert_eq!(shown(&path), (5, 1, 14, 2, 5.0));
    for index in [0, 2] {
        set_control(&path, index, 0);
    }
    assert_eq!(one_of_each(&bot, 11), [true; 6]);
    assert_eq!(shown(&path), (10, 2, 25, 3, 11.0));
}

#[test]
fn the_bot_turned_off_records_nothing_and_a_metric_registered_meanwhile_starts_off() {
    let dir = ScratchDir::new("control-bot-off");
    let bot = Bot::attach_with("rs-ctl-bot", options(&dir, 1024)).unwrap();
    let path = dir.file("rs-ctl-bot");
    assert_eq!(one_of_each(&bot, 5), [true; 6]);
    // As the tool turns a bot off: bot_control first, then every published metric's word.
    set_bot_control(&path, CONTROL_BOT_OFF);
    for index in 0..3 {
        set_control(&path, index, CONTROL_BOT_OFF);
    }
    assert_eq!(one_of_each(&bot, 7), [false; 6]);
    assert_eq!(shown(&path), (5, 1, 5, 1, 5.0));
    // A metric published while the bot is off takes the bot's off; one found again keeps its word.
    let later = bot.counter("later", &[]).unwrap();
    assert_eq!(control(&path, 3), CONTROL_BOT_OFF);
    later.increment(1);
    assert_eq!(RingFile::read(&path).lane_cell(0, 3), 0);
    bot.counter("orders", &[]).unwrap();
    assert_eq!(control(&path, 1), CONTROL_BOT_OFF);
    // On again: bot_control, then every word.
    set_bot_control(&path, 0);
    for index in 0..4 {
        set_control(&path, index, 0);
    }
    assert_eq!(one_of_each(&bot, 11), [true; 6]);
    assert_eq!(shown(&path), (10, 2, 16, 2, 11.0));
    later.increment(3);
    assert_eq!(RingFile::read(&path).lane_cell(0, 3), 3);
    // A metric published while the bot is on starts as registered.
    bot.counter("after", &[]).unwrap();
    assert_eq!(control(&path, 4), 0);
}

#[test]
fn sampled_1_in_128_a_histogram_writes_every_128th_call_and_gathers_the_others_exactly() {
    let dir = ScratchDir::new("control-sample");
    let bot = Bot::attach_with("rs-ctl-sample", options(&dir, 4096)).unwrap();
    let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
    let path = dir.file("rs-ctl-sample");
    declare_consumer(&path, 4242, true, 0);
    set_control(&path, 0, 7);
    // 20 records of 2,560 calls: the lane stays far below `sample_above` (2,048 records), where
    // adaptive sampling never looks: what is seen is the operator's sampling alone.
    let calls = 128 * 20;
    let written: Vec<u64> = (0..calls).filter(|&value| fills.record(value)).collect();
    let expected: Vec<u64> = (1..=20).map(|j| j * 128 - 1).collect();
    assert_eq!(written, expected, "calls 128, 256, ... are written, and only they");
    let file = RingFile::read(&path);
    let records = file.records(0);
    assert_eq!(records.iter().map(|r| r.value).collect::<Vec<_>>(), expected);
    assert!(records.iter().all(|r| r.flags == 7 << 4), "each stands for the 127 calls gathered before it");
    let cell = file.gather_cell(0, 0);
    assert_eq!(records.len() as u64 + cell.calls, calls, "every call a record or gathered");
    assert_eq!(file.lane(0).gathered, cell.calls);
    assert_eq!(cell.sum, calls * (calls - 1) / 2 - expected.iter().sum::<u64>());
    assert_eq!((cell.latest, cell.max), (calls - 2, calls - 2));
    assert_eq!(file.lane(0).dropped_total, 0);

    // An exemplar's call sampled so is written without its exemplar, a span's with its flag.
    let exemplar = Exemplar::new(&[("order_id", "A17")]).unwrap();
    let mut written = 0;
    for value in 0..128 {
        written += u64::from(fills.record_with_exemplar(value, &exemplar));
    }
    let last = *records_of_this_thread(&path).last().unwrap();
    assert_eq!((written, last.value, last.flags, last.exemplar_length), (1, 127, 7 << 4, 0));
    for _ in 0..128 {
        written += u64::from(fills.span().finish());
    }
    let last = *records_of_this_thread(&path).last().unwrap();
    assert_eq!((written, last.flags), (2, 7 << 4 | 1), "a span's flag beside its weight");

    // Back to 0: every call written as it is, and the calls gathered since the last record stay
    // counted in the gather cell.
    set_control(&path, 0, 0);
    assert!((0..10).all(|value| fills.record(value)));
    let file = RingFile::read(&path);
    assert!(file.records(0)[22..].iter().all(|r| r.flags == 0));
    assert_eq!(file.records(0).len() as u64 + file.gather_cell(0, 0).calls, calls + 256 + 10);
}

#[test]
fn sampling_needs_a_consumer_that_reads_gather_cells_and_a_count_above_15_is_15() {
    let dir = ScratchDir::new("control-sample-reader");
    let bot = Bot::attach_with("rs-ctl-reader", options(&dir, 4096)).unwrap();
    let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
    let path = dir.file("rs-ctl-reader");
    declare_consumer(&path, 4242, false, 0);
    set_control(&path, 0, 3);
    assert!((0..100).all(|value| fills.record(value)), "a consumer that reads no gather cells: every call written");
    let file = RingFile::read(&path);
    assert!(file.records(0).iter().all(|r| r.flags == 0));
    assert_eq!(file.gather_cell(0, 0).calls, 0);
    // Reading them now: 1 in 2^15 at the most, whatever the word's 5 bits say (31).
    declare_consumer(&path, 4242, true, 0);
    set_control(&path, 0, 31);
    let written: Vec<u64> = (0..(1u64 << 16)).filter(|&value| fills.record(value)).collect();
    assert_eq!(written, [(1 << 15) - 1, (1 << 16) - 1]);
    let file = RingFile::read(&path);
    assert!(file.records(0)[100..].iter().all(|r| r.flags == 15 << 4));
}

#[test]
fn a_histogram_sampled_1_in_n_at_registration_is_sampled_so_first() {
    let dir = ScratchDir::new("control-sample-every");
    let bot = Bot::attach_with("rs-ctl-every", options(&dir, 4096)).unwrap();
    let fills = bot.metric("fills").sample_every(4).histogram(Unit::None).unwrap();
    let path = dir.file("rs-ctl-every");
    declare_consumer(&path, 4242, true, 0);
    set_control(&path, 0, 2);
    // Calls 0, 4, 8, ... pass the 1 in 4; of them, every 4th is written: calls 12, 28, 44, ...
    let written: Vec<u64> = (0..64).filter(|&value| fills.record(value)).collect();
    assert_eq!(written, [12, 28, 44, 60]);
    assert_eq!(RingFile::read(&path).gather_cell(0, 0).calls, 12, "the 1 in 4's others are not gathered");
}

#[test]
fn a_worker_files_metrics_take_the_words_of_the_same_metrics_in_the_bots_file() {
    let dir = ScratchDir::new("control-worker");
    let bot = Bot::attach_with("rs-ctl-worker", options(&dir, 1024)).unwrap();
    let bot_path = dir.file("rs-ctl-worker");
    bot.metric("fills").label("venue", "XNAS").histogram(Unit::None).unwrap(); // 0
    bot.metric("fills").label("venue", "ARCA").histogram(Unit::None).unwrap(); // 1
    bot.counter("orders", &[]).unwrap(); // 2
    set_control(&bot_path, 0, CONTROL_OFF | 5);
    set_control(&bot_path, 2, 3);

    let worker = Bot::attach_with("rs-ctl-worker", Options { worker: true, ..options(&dir, 1024) }).unwrap();
    let worker_path = worker.path().unwrap();
    assert_ne!(worker_path, bot_path);
    // Registered in another order: matched by name and labels, not by index.
    let orders = worker.counter("orders", &[]).unwrap(); // 0
    let arca = worker.metric("fills").label("venue", "ARCA").histogram(Unit::None).unwrap(); // 1
    let xnas = worker.metric("fills").label("venue", "XNAS").histogram(Unit::None).unwrap(); // 2
    let own = worker.counter("worker_only", &[]).unwrap(); // 3
    let words: Vec<u32> = (0..4).map(|index| control(&worker_path, index)).collect();
    assert_eq!(words, [3, 0, CONTROL_OFF | 5, 0]);
    assert!(!xnas.record(1), "off in the bot's file: off in the worker's");
    assert!(arca.record(1));
    orders.increment(2);
    own.increment(1);
    let file = RingFile::read(&worker_path);
    assert_eq!((file.records(0).len(), file.lane_cell(0, 0), file.lane_cell(0, 3)), (1, 2, 1));

    // The bot turned off: a metric the worker registers now takes the bot file's off.
    set_bot_control(&bot_path, CONTROL_BOT_OFF);
    let later = worker.counter("later", &[]).unwrap();
    assert_eq!(control(&worker_path, 4), CONTROL_BOT_OFF);
    later.increment(1);
    assert_eq!(RingFile::read(&worker_path).lane_cell(0, 4), 0);
}

#[test]
fn a_worker_without_a_usable_bot_file_starts_as_registered() {
    let dir = ScratchDir::new("control-worker-alone");
    let worker = Bot::attach_with("rs-ctl-alone", Options { worker: true, ..options(&dir, 1024) }).unwrap();
    let worker_path = worker.path().unwrap();
    worker.counter("orders", &[]).unwrap();
    assert_eq!(control(&worker_path, 0), 0, "no bot file: nothing to take");
    // A bot file that is not one (too short): skipped silently.
    std::fs::write(dir.file("rs-ctl-alone"), b"RINGSIDE").unwrap();
    let fills = worker.histogram("fills", Unit::None, &[]).unwrap();
    assert_eq!(control(&worker_path, 1), 0);
    assert!(fills.record(1));
}
