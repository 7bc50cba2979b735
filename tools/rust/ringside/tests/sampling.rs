//! Sampling and gathering (SAMPLING AND GATHERING in ringside.h, format 3): a lane that would
//! fill before its consumer's next drain writes a histogram's calls 1 in 2^L, each record carrying
//! k (2^k - 1 calls gathered before it), and *gathers* the others into the lane's gather cell of
//! their metric, in the file, as it goes: every call is written, gathered (counted, with its
//! value's sum and the largest) or dropped (counted, with its value's sum and the largest), and
//! the thread leaves nothing behind when it idles, lets go of its lane or is killed.
//!
//! The tests play the consumer by writing the consumer line and the read cursor into the file
//! themselves; in a lane of 256 records the reserve R is 16 records whatever the pace (1/64 and
//! 1/32 of the lane are both below the least, 16), so what they see is the same on every run.

mod common;

use common::{declare_consumer, thread_id, Record, RingFile, ScratchDir, SharedFile};
use ringside::{Bot, Histogram, Options, Unit};

fn options(dir: &ScratchDir, capacity: u64, percent: u32) -> Options {
    Options {
        directory: Some(dir.path.clone()),
        lane_capacity: Some(capacity),
        sample_above_percent: percent,
        ..Options::default()
    }
}

/// k: 2^k - 1 calls of its metric were gathered on its lane before the record.
fn k(record: &Record) -> u8 {
    record.flags >> 4
}

/// The burst's values: spread over 1 to 1,000,000 (as the Swift test producer's burst-idle).
fn burst_value(index: u64) -> u64 {
    1 + index.wrapping_mul(2_654_435_761) % 1_000_000
}

// MARK: - What the calls came to

/// A producer's calls as it saw them, call by call: kept (written, or gathered) or dropped, each
/// with their count, their values' sum and the largest value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    kept: u64,
    kept_sum: u64,
    kept_max: u64,
    dropped: u64,
    dropped_sum: u64,
    dropped_max: u64,
}

impl Tally {
    fn keep(&mut self, value: u64) {
        self.kept += 1;
        self.kept_sum = self.kept_sum.wrapping_add(value);
        self.kept_max = self.kept_max.max(value);
    }

    fn drop_value(&mut self, value: u64) {
        self.dropped += 1;
        self.dropped_sum = self.dropped_sum.wrapping_add(value);
        self.dropped_max = self.dropped_max.max(value);
    }

    fn calls(&self) -> u64 {
        self.kept + self.dropped
    }
}

/// The calling thread's lane of a bot, watched through the file as the collector maps it: its
/// drops, to tell a call dropped from one gathered (both return false).
struct LaneWatch {
    file: SharedFile,
    at: usize,
}

impl LaneWatch {
    /// The lane the calling thread holds in the bot file at `path` (it has recorded: it holds one).
    fn of_this_thread(path: &std::path::Path) -> LaneWatch {
        let file = SharedFile::map(path);
        let lane = file.lane_of_thread(thread_id()).expect("the thread holds a lane");
        let at = file.lane_at(lane);
        LaneWatch { file, at }
    }

    fn dropped_total(&self) -> u64 {
        self.file.load(self.at + 0x08)
    }

    /// Records `value` and counts it kept or dropped, as the lane saw it.
    fn record(&self, histogram: &Histogram, value: u64, tally: &mut Tally) {
        let dropped = self.dropped_total();
        if histogram.record(value) || self.dropped_total() == dropped {
            tally.keep(value); // written, or gathered
        } else {
            tally.drop_value(value);
        }
    }
}

// MARK: - One lane, its consumer played by the test

#[test]
fn a_lane_past_its_reserve_writes_1_call_in_2_to_the_l_and_gathers_the_others() {
    let dir = ScratchDir::new("sampling-fill");
    let bot = Bot::attach_with("rs-fill", options(&dir, 256, 0)).unwrap();
    let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
    let path = dir.file("rs-fill");
    assert_eq!(RingFile::read(&path).sample_above(), 128, "half the lane by default");
    declare_consumer(&path, 4242, true, 0);
    let calls = 500_000u64; // the value of call i is i
    for value in 0..calls {
        fills.record(value);
    }
    let file = RingFile::read(&path);
    let records = file.records(0);
    assert_eq!(records.len(), 256, "nothing drains: the lane is full");
    let ks: Vec<u8> = records.iter().map(k).collect();
    // R is 16 records in a lane of 256: sampling starts at 240, a level more at each record past it.
    assert!(ks[..240].iter().all(|&k| k == 0), "below capacity - R every call is written as it is: {ks:?}");
    let levels: Vec<u8> = (1..=14).chain([15, 15]).collect();
    assert_eq!(ks[240..], levels[..], "a level a record past capacity - R, at most 15");
    // Each record's k counts the calls gathered since the one before it: 2^k - 1 of them.
    let mut next = 0;
    for record in &records {
        assert_eq!(record.value, next + (1 << k(record)) - 1, "{record:?}");
        next = record.value + 1;
    }
    // Full, the lane drops the record due every 2^15 calls: one call each, its value kept aside.
    let last = records[255].value;
    let drops = (calls - 1 - last) >> 15;
    let dropped: Vec<u64> = (1..=drops).map(|j| last + (j << 15)).collect();
    let lane = file.lane(0);
    assert!(drops >= 10, "{drops} drops");
    assert_eq!((lane.dropped_total, file.lane_cell(0, 0)), (drops, drops));
    let cell = file.gather_cell(0, 0);
    assert_eq!((cell.dropped_sum, cell.dropped_max), (dropped.iter().sum(), *dropped.last().unwrap()));
    // Every other call gathered: counted, its value added, the latest and largest kept.
    let written: u64 = records.iter().map(|r| r.value).sum();
    assert_eq!(cell.calls, calls - 256 - drops);
    assert_eq!(lane.gathered, cell.calls, "the lane's gathered counts its cells' calls");
    assert_eq!(cell.sum, calls * (calls - 1) / 2 - written - cell.dropped_sum);
    assert_eq!((cell.latest, cell.max), (calls - 1, calls - 1));
    // The thread lets go: nothing is left to write, and nothing is written.
    bot.release_thread_lane();
    let released = RingFile::read(&path);
    assert_eq!(released.lane(0).write_cursor, 256);
    assert_eq!((released.gather_cell(0, 0), released.lane(0).state), (cell, 2));
}

#[test]
fn sampling_starts_where_the_lane_would_fill_before_the_drain_in_its_top_1_32_never_at_half() {
    let dir = ScratchDir::new("sampling-reserve");
    // Lanes of 4,096: R is at least 1/64 (64 records) and at most 1/32 (128). A consumer that
    // drains every nanosecond leaves R at 64: the lane gains less than that over an interval. One
    // that drains once an hour has it grow with what the lane gained since the first look past
    // `sample_above` (half the lane): to 128, the most.
    for (name, interval, start) in [("rs-reserve-1ns", 1, 4096 - 64), ("rs-reserve-1h", 3_600_000_000_000, 4096 - 128)]
    {
        let bot = Bot::attach_with(name, options(&dir, 4096, 0)).unwrap();
        let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
        let path = dir.file(name);
        declare_consumer(&path, 4242, true, interval);
        for value in 0..5_000 {
            fills.record(value);
        }
        let records = RingFile::read(&path).records(0);
        let first = records.iter().position(|r| k(r) > 0).expect("a lane that fills samples");
        assert_eq!(first, start, "{name}: the first record that stands for a gathered call");
        assert!(records[..first].iter().enumerate().all(|(i, r)| r.value == i as u64), "{name}: each call a record");
        assert_eq!((k(&records[first]), records[first].value), (1, first as u64 + 1), "{name}: one call gathered");
    }
}

#[test]
fn a_record_due_that_does_not_fit_is_dropped_as_one_call_its_value_kept_aside() {
    let dir = ScratchDir::new("sampling-drop");
    let bot = Bot::attach_with("rs-drop", options(&dir, 16, 0)).unwrap();
    let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
    let path = dir.file("rs-drop");
    declare_consumer(&path, 4242, true, 0);
    assert!(fills.record(burst_value(0)));
    let watch = LaneWatch::of_this_thread(&path);
    let mut tally = Tally::default();
    tally.keep(burst_value(0));
    // 16 slots, 8 past `sample_above` and R (the room above it) 8: past 8 records the level rises a
    // record at a time, to 9 at full, where a record due every 512 calls is dropped.
    let calls = 3_000_000u64;
    for index in 1..calls {
        watch.record(&fills, burst_value(index), &mut tally);
    }
    let file = RingFile::read(&path);
    let (records, cell) = (file.records(0), file.gather_cell(0, 0));
    assert_eq!(records.len(), 16);
    assert!(tally.dropped > 5_000, "{tally:?}");
    assert_eq!((file.lane(0).dropped_total, file.lane_cell(0, 0)), (tally.dropped, tally.dropped), "one call a drop");
    assert_eq!((cell.dropped_sum, cell.dropped_max), (tally.dropped_sum, tally.dropped_max));
    assert_eq!(records.len() as u64 + cell.calls, tally.kept, "every call kept is a record or gathered");
    assert_eq!(records.iter().map(|r| r.value).sum::<u64>() + cell.sum, tally.kept_sum);
    assert_eq!(records.iter().map(|r| r.value).max().unwrap().max(cell.max), tally.kept_max);
    assert_eq!(tally.calls(), calls);
}

#[test]
fn without_a_consumer_that_reads_gather_cells_a_full_lane_drops_as_before() {
    let dir = ScratchDir::new("sampling-none");
    for (name, percent, weighs) in [("rs-old-reader", 0, false), ("rs-off", 100, true)] {
        let bot = Bot::attach_with(name, options(&dir, 64, percent)).unwrap();
        let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
        let path = dir.file(name);
        declare_consumer(&path, 4242, weighs, 0);
        for value in 0..1_000 {
            fills.record(value);
        }
        let file = RingFile::read(&path);
        let records = file.records(0);
        assert_eq!(records.len(), 64, "{name}");
        assert!(
            records.iter().enumerate().all(|(i, r)| r.flags == 0 && r.value == i as u64),
            "{name}: the first 64 kept"
        );
        assert_eq!(file.lane_cell(0, 0), 1_000 - 64, "{name}");
        let cell = file.gather_cell(0, 0);
        assert_eq!((cell.calls, cell.sum, cell.max, file.lane(0).gathered), (0, 0, 0, 0), "{name}: none gathered");
        assert_eq!((cell.dropped_sum, cell.dropped_max), ((64..1_000).sum(), 999), "{name}: the values dropped");
        assert_eq!(file.sample_above(), if percent == 100 { 0 } else { 32 }, "{name}");
    }
    let refused = Bot::attach_with("rs-bad", options(&dir, 64, 101)).unwrap_err();
    assert!(refused.to_string().contains("sample_above_percent 101"), "{refused}");
}

#[test]
fn a_drained_lane_stops_sampling_at_the_next_call_with_nothing_left_to_write() {
    let dir = ScratchDir::new("sampling-drain");
    let bot = Bot::attach_with("rs-drain", options(&dir, 256, 0)).unwrap();
    let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
    let path = dir.file("rs-drain");
    declare_consumer(&path, 4242, true, 0);
    let calls = 10_000u64;
    for value in 0..calls {
        fills.record(value);
    }
    let sampled = RingFile::read(&path);
    let (written, cell) = (sampled.lane(0).write_cursor, sampled.gather_cell(0, 0));
    assert!(written < 256 && cell.calls > 0, "sampling, not full: {written} records");
    assert_eq!(written + cell.calls, calls);
    // Drained, as a consumer would (the read cursor at the write cursor): the next call is written
    // as it is, and the calls gathered since the last record stay in the cell, counted already.
    let shared = SharedFile::map(&path);
    shared.store(shared.lane_at(0) + 0x80, written);
    assert!(fills.record(42), "the lane is empty: the call is written");
    let drained = RingFile::read(&path);
    let after = drained.records(0);
    assert_eq!(after.len(), 1);
    assert_eq!((after[0].value, k(&after[0])), (42, 0), "one call, no weight");
    assert_eq!(drained.gather_cell(0, 0), cell);
}
