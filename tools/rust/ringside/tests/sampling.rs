//! Sampling and gathering (SAMPLING AND GATHERING in ringside.h, format 3): a lane that would
//! fill before its consumer's next drain writes a histogram's calls 1 in 2^L, each record carrying
//! k (2^k - 1 calls gathered before it), and *gathers* the others into the lane's gather cell of
//! their metric, in the file, as it goes: every call is written, gathered (counted, with its
//! value's sum and the largest) or dropped (counted, with its value's sum and the largest), and
//! the thread leaves nothing behind when it idles, lets go of its lane or is killed.
//!
//! Most tests play the consumer by writing the consumer line and the read cursor into the file
//! themselves; in a lane of 256 records the reserve R is 16 records whatever the pace (1/64 and
//! 1/32 of the lane are both below the least, 16), so what they see is the same on every run. The
//! others have the real collector count bursts exactly: from a process that then idles and is
//! SIGKILLed, from pool threads that then block for good, and from 8 threads into large lanes,
//! none of whose calls is gathered.

mod common;

use common::{
    declare_consumer, eventually, thread_id, Collector, Json, Record, RingFile, ScratchDir, SharedFile, SplitMix64,
};
use ringside::{Bot, Exemplar, Histogram, Options, Unit};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;

const HISTOGRAM: u8 = 3;

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

    fn add(&mut self, other: &Tally) {
        self.kept += other.kept;
        self.kept_sum = self.kept_sum.wrapping_add(other.kept_sum);
        self.kept_max = self.kept_max.max(other.kept_max);
        self.dropped += other.dropped;
        self.dropped_sum = self.dropped_sum.wrapping_add(other.dropped_sum);
        self.dropped_max = self.dropped_max.max(other.dropped_max);
    }

    fn calls(&self) -> u64 {
        self.kept + self.dropped
    }

    fn line(&self) -> String {
        let Tally { kept, kept_sum, kept_max, dropped, dropped_sum, dropped_max } = self;
        format!("{kept} {kept_sum} {kept_max} {dropped} {dropped_sum} {dropped_max}")
    }

    fn parse(line: &str) -> Tally {
        let n: Vec<u64> = line.split_whitespace().map(|word| word.parse().unwrap()).collect();
        Tally { kept: n[0], kept_sum: n[1], kept_max: n[2], dropped: n[3], dropped_sum: n[4], dropped_max: n[5] }
    }

    /// Whether a /latest histogram series shows exactly these calls: the count, sum and largest of
    /// those not dropped, and the count, sum and largest of those dropped.
    fn check(&self, series: &Json) -> Result<(), String> {
        let figures = [
            ("total_count", self.kept),
            ("total_sum", self.kept_sum),
            ("total_max", self.kept_max),
            ("dropped_records", self.dropped),
            ("dropped_sum", self.dropped_sum),
            ("dropped_max", self.dropped_max),
        ];
        for (field, expected) in figures {
            let value = series.num(field)?;
            if value != expected as f64 {
                return Err(format!("{field} is {value}, expecting {expected} (the calls: {self:?})"));
            }
        }
        Ok(())
    }
}

/// The calling thread's lane of a bot, watched through the file as the collector maps it: its
/// drops, to tell a call dropped from one gathered (both return false).
struct LaneWatch {
    file: SharedFile,
    lane: u32,
    at: usize,
}

impl LaneWatch {
    /// The lane the calling thread holds in the bot file at `path` (it has recorded: it holds one).
    fn of_this_thread(path: &std::path::Path) -> LaneWatch {
        let file = SharedFile::map(path);
        let lane = file.lane_of_thread(thread_id()).expect("the thread holds a lane");
        let at = file.lane_at(lane);
        LaneWatch { file, lane, at }
    }

    fn write_cursor(&self) -> u64 {
        self.file.load(self.at)
    }

    fn dropped_total(&self) -> u64 {
        self.file.load(self.at + 0x08)
    }

    fn gathered_calls(&self, metric: u32) -> u64 {
        self.file.load(self.file.gather_at(self.lane, metric))
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
    // R is 16 records in a lane of 256: sampling starts at 240, a level more at every two records
    // past it (an eighth of R).
    assert!(ks[..240].iter().all(|&k| k == 0), "below capacity - R every call is written as it is: {ks:?}");
    let levels: Vec<u8> = (1..=8).flat_map(|level| [level, level]).collect();
    assert_eq!(ks[240..], levels[..], "a level every two records past capacity - R");
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
    // record at a time (an eighth of R is one), to 8; full, it is 15, and a record due every 32,768
    // calls is dropped.
    let calls = 3_000_000u64;
    for index in 1..calls {
        watch.record(&fills, burst_value(index), &mut tally);
    }
    let file = RingFile::read(&path);
    let (records, cell) = (file.records(0), file.gather_cell(0, 0));
    assert_eq!(records.len(), 16);
    assert!(tally.dropped > 50, "{tally:?}");
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
    let calls = 1_000u64; // past 240 exact calls, 14 records of 2 to 128 calls: short of full
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

#[test]
fn a_random_mix_of_drains_sampling_and_drops_keeps_every_figure_exact() {
    let seed = std::env::var("RINGSIDE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(39u64);
    let mut random = SplitMix64(seed);
    let dir = ScratchDir::new("sampling-mix");
    let bot = Bot::attach_with("rs-mix", Options { max_lanes: Some(1), ..options(&dir, 256, 0) }).unwrap();
    let metrics = [bot.histogram("a", Unit::None, &[]).unwrap(), bot.histogram("b", Unit::None, &[]).unwrap()];
    let order = Exemplar::new(&[("order_id", "A17")]).unwrap(); // 12 bytes: two slots with its value
    let path = dir.file("rs-mix");
    declare_consumer(&path, 4242, true, 0);
    let mut tallies = [Tally::default(); 2];
    assert!(metrics[0].record(1));
    tallies[0].keep(1);
    let watch = LaneWatch::of_this_thread(&path);
    let mut consumer = Consumer { lane: &watch, read: 0, seen: Default::default() };

    let (mut calls, mut gathered_exemplars, mut written_exemplars) = (1u64, 0u64, 0u64);
    let mut round = 0;
    while calls < 1_200_000 {
        // A phase: a burst with no drain (the first one from empty, long enough to fill the lane
        // and drop), calls drained now and then (in and out of the sampling band), or a drain.
        let (length, drain_every, whole) = match if round == 0 { 0 } else { random.below(4) } {
            0 => (if round == 0 { 150_000 } else { random.below(200_000) }, 0, true),
            1 => (random.below(50_000), 1 + random.below(300), true),
            2 => (random.below(20_000), 1 + random.below(64), false),
            _ => (0, 1, true),
        };
        round += 1;
        for i in 0..length.max(1) {
            if drain_every > 0 && i % drain_every == 0 {
                let (write, read) = (watch.write_cursor(), consumer.read);
                consumer.drain(if whole { write } else { read + random.below(write - read + 1) });
            }
            if length == 0 {
                break;
            }
            let metric = (random.below(10) >= 7) as usize;
            let value = if random.below(1_000) == 0 { 1 + random.below(1 << 40) } else { 1 + random.below(1_000_000) };
            let with_exemplar = random.below(16) == 0;
            let before = (watch.write_cursor(), watch.dropped_total(), watch.gathered_calls(metric as u32));
            let wrote = if with_exemplar {
                metrics[metric].record_with_exemplar(value, &order)
            } else {
                metrics[metric].record(value)
            };
            let after = (watch.write_cursor(), watch.dropped_total(), watch.gathered_calls(metric as u32));
            let moved = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
            let slots = if with_exemplar { 2 } else { 1 };
            match (wrote, moved) {
                (true, (n, 0, 0)) if n == slots => tallies[metric].keep(value),
                (false, (0, 0, 1)) => tallies[metric].keep(value),
                (false, (0, 1, 0)) => tallies[metric].drop_value(value),
                other => panic!("call {calls} (seed {seed}): returned and moved {other:?}: one of write, gather, drop"),
            }
            if with_exemplar {
                if wrote {
                    written_exemplars += 1;
                } else if moved.2 == 1 {
                    gathered_exemplars += 1;
                }
            }
            calls += 1;
        }
    }
    consumer.drain(watch.write_cursor());

    let ring = RingFile::read(&path);
    let lane = ring.lane(0);
    let mut cells = Vec::new();
    for (metric, (tally, s)) in tallies.iter().zip(&consumer.seen).enumerate() {
        let cell = ring.gather_cell(0, metric as u32);
        let why = format!("metric {metric}, seed {seed}: {tally:?}, {s:?}, {cell:?}");
        assert_eq!(ring.lane_cell(0, metric as u32), tally.dropped, "{why}");
        assert_eq!((cell.dropped_sum, cell.dropped_max), (tally.dropped_sum, tally.dropped_max), "{why}");
        assert_eq!(s.records + cell.calls, tally.kept, "{why}");
        assert_eq!(s.sum.wrapping_add(cell.sum), tally.kept_sum, "{why}");
        assert_eq!(s.max.max(s.taken_max).max(cell.max), tally.kept_max, "{why}");
        assert!(s.weighed <= cell.calls, "records stand for calls gathered, no more: {why}");
        cells.push(cell);
    }
    let gathered = cells.iter().map(|c| c.calls).sum::<u64>();
    assert_eq!(lane.gathered, gathered);
    assert_eq!(lane.dropped_total, tallies.iter().map(|t| t.dropped).sum::<u64>());
    assert_eq!(tallies.iter().map(Tally::calls).sum::<u64>(), calls);
    // The mix had all of it: records that stand for gathered calls, calls gathered, drops, and
    // calls with an exemplar written and gathered (sampled as units).
    let weighed = consumer.seen.iter().map(|s| s.weighed).sum::<u64>();
    let summary = format!(
        "seed {seed}, {calls} calls: {gathered} gathered, {weighed} of them in records' weights, {} dropped; \
         exemplars {written_exemplars} written, {gathered_exemplars} gathered",
        lane.dropped_total
    );
    assert!(weighed > 0 && lane.dropped_total > 0 && gathered_exemplars > 0 && written_exemplars > 0, "{summary}");
    common::say(&format!("random mix: {summary}"));
}

/// What a consumer played by the test saw of a metric: the records it drained, and each cell's
/// largest as it took it at each drain (an exchange with 0, as the collector takes it).
#[derive(Default, Debug)]
struct Seen {
    records: u64,
    sum: u64,
    max: u64,
    weighed: u64, // the sum of 2^k - 1 over its records: the gathered calls they stand for
    taken_max: u64,
}

/// The consumer of a lane, played by the test: it reads what it drains, then moves the lane's
/// read cursor, then takes the gather cells' largest values.
struct Consumer<'a> {
    lane: &'a LaneWatch,
    read: u64,
    seen: [Seen; 2],
}

impl Consumer<'_> {
    fn drain(&mut self, to: u64) {
        let file = &self.lane.file;
        for cursor in self.read..to {
            let record = file.record(self.lane.lane, cursor);
            assert_eq!(record.sequence, cursor);
            if record.kind == HISTOGRAM {
                let s = &mut self.seen[record.metric as usize];
                s.records += 1;
                s.sum = s.sum.wrapping_add(record.value);
                s.max = s.max.max(record.value);
                s.weighed += (1 << k(&record)) - 1;
            }
        }
        self.read = to;
        file.store(self.lane.at + 0x80, to); // the read cursor, with release
        for (metric, s) in self.seen.iter_mut().enumerate() {
            s.taken_max = s.taken_max.max(file.take(file.gather_at(self.lane.lane, metric as u32) + 0x18));
        }
    }
}

#[test]
fn a_thread_without_a_lane_keeps_its_dropped_values_sum_and_largest() {
    let dir = ScratchDir::new("sampling-unlaned");
    let bot = Bot::attach_with("rs-unlaned", Options { max_lanes: Some(1), ..options(&dir, 64, 0) }).unwrap();
    let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
    assert!(fills.record(5), "this thread holds the only lane");
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let fills = fills.clone();
            thread::spawn(move || {
                let mut random = SplitMix64(t);
                let mut tally = Tally::default();
                for _ in 0..1_000 {
                    let value = 1 + random.below(1 << 40);
                    assert!(!fills.record(value), "no lane: nothing written");
                    tally.drop_value(value);
                }
                tally
            })
        })
        .collect();
    let mut tally = Tally::default();
    for thread in threads {
        tally.add(&thread.join().unwrap());
    }
    let file = RingFile::read(&dir.file("rs-unlaned"));
    assert_eq!(file.metric_cell(0).2, 4_000, "counted in unlaned");
    assert_eq!(file.unlaned_values(0), (tally.dropped_sum, tally.dropped_max), "added atomically, raised by CAS");
    assert_eq!((file.lane(0).write_cursor, file.lane(0).dropped_total), (1, 0));
}

// MARK: - The real collector

/// The bot of the child process below, in the directory the parent gives it.
const CHILD_DIR: &str = "RINGSIDE_TEST_SAMPLING_CHILD_DIR";
const CHILD_BOT: &str = "rs-idle";
const CHILD_CALLS: u64 = 3_000_000;

/// Not a test of its own: the producer process of the test below, which runs this test binary
/// again for it alone, with CHILD_DIR set (without it, it does nothing). It attaches, says so,
/// waits for "go", then bursts CHILD_CALLS calls into a lane of 4,096 records, telling each call
/// dropped from one kept by its lane's drops, says what they came to, and idles, holding its
/// lane, until it is killed (or its stdin closes).
#[test]
fn child_process_bursts_then_idles() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else { return };
    let options = Options { directory: Some(dir.into()), lane_capacity: Some(1 << 12), ..Options::default() };
    let bot = Bot::attach_with(CHILD_BOT, options).unwrap();
    let burst = bot.histogram("burst", Unit::Nanoseconds, &[]).unwrap();
    let path = bot.path().unwrap();
    println!("attached {}", std::process::id());
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "go");
    // The collector says at attach that it reads gather cells (the two pids, equal).
    let header = SharedFile::map(&path);
    eventually("the collector reads gather cells", Duration::from_secs(60), || {
        let pids = header.load(0x100);
        if pids as u32 != 0 && pids as u32 == (pids >> 32) as u32 {
            Ok(())
        } else {
            Err(format!("consumer_pid {}, weights_reader_pid {}", pids as u32, (pids >> 32) as u32))
        }
    })
    .unwrap();
    let mut tally = Tally::default();
    assert!(burst.record(burst_value(0)), "an empty lane writes");
    tally.keep(burst_value(0));
    let watch = LaneWatch::of_this_thread(&path);
    for index in 1..CHILD_CALLS {
        watch.record(&burst, burst_value(index), &mut tally);
    }
    println!("done {} {}", tally.line(), watch.gathered_calls(0));
    // Idle, the lane held: no release, no exit, until killed.
    while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {}
}

/// The child process above, killed (SIGKILL) when dropped.
struct ChildProducer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl ChildProducer {
    fn start(dir: &ScratchDir) -> ChildProducer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["child_process_bursts_then_idles", "--exact", "--nocapture", "--test-threads", "1"])
            .env(CHILD_DIR, &dir.path)
            .env_remove("RINGSIDE_DISABLED")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let (sender, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        ChildProducer { child, stdin, lines }
    }

    /// What follows `prefix` in the child's first line that holds it (libtest's own words aside:
    /// "test child_process_bursts_then_idles ... " comes before the test's first line).
    fn line(&self, prefix: &str) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(120)) {
                Ok(line) => {
                    if let Some(at) = line.find(prefix) {
                        return line[at + prefix.len()..].to_string();
                    }
                }
                Err(error) => panic!("the child never said \"{prefix}...\": {error}"),
            }
        }
    }

    fn say(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
    }

    fn kill(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

impl Drop for ChildProducer {
    fn drop(&mut self) {
        self.kill();
    }
}

#[test]
fn a_burst_past_the_drain_then_idle_then_sigkilled_is_counted_exactly_by_the_collector() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("sampling-idle");
    let collector = Collector::start(&binary, &dir);
    let mut child = ChildProducer::start(&dir);
    child.line("attached ");
    collector.wait_for("the collector attached the bot", |latest| latest.ring(CHILD_BOT).map(|_| ()));
    // 3 M calls at tens of millions a second into a lane of 4,096 records that the collector
    // drains at its poll (10 ms): far past 10 times what it drains.
    child.say("go");
    let done = child.line("done ");
    let (tally, gathered) = done.rsplit_once(' ').unwrap();
    let (tally, gathered) = (Tally::parse(tally), gathered.parse::<f64>().unwrap());
    assert_eq!(tally.calls(), CHILD_CALLS);
    common::say(&format!("burst then idle: {tally:?}, {gathered} calls gathered"));
    let exact = |latest: &Json| -> Result<(), String> {
        let series = latest.series(CHILD_BOT, "burst")?;
        tally.check(series)?;
        let sampled = series.num("sampled_records")?;
        if sampled != gathered {
            return Err(format!("sampled_records {sampled}, but the lane gathered {gathered}"));
        }
        Ok(())
    };
    collector.wait_for_within("every call counted exactly, the bot idle", Duration::from_secs(60), |latest| {
        let ring = latest.ring(CHILD_BOT)?;
        if ring.at("alive") != Some(&Json::Bool(true)) {
            return Err("the bot is not alive".into());
        }
        exact(latest)
    });
    child.kill();
    collector.wait_for_within("the bot dead, its calls still exact", Duration::from_secs(60), |latest| {
        let ring = latest.ring(CHILD_BOT)?;
        if ring.at("alive") != Some(&Json::Bool(false)) {
            return Err("the bot is not seen dead yet".into());
        }
        exact(latest)
    });
}

#[test]
fn pool_threads_that_burst_then_block_for_good_are_counted_exactly() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("sampling-pool");
    let bot = Bot::attach_with("rs-pool", options(&dir, 1 << 12, 0)).unwrap();
    let burst = bot.histogram("burst", Unit::Nanoseconds, &[]).unwrap();
    let collector = Collector::start(&binary, &dir);
    collector.wait_for("the collector attached the bot", |latest| latest.ring("rs-pool").map(|_| ()));
    let path = dir.file("rs-pool");
    const THREADS: u64 = 4;
    const CALLS: u64 = 750_000;
    let (tallies, counted) = mpsc::channel();
    let mut holds = Vec::new();
    let mut pool = Vec::new();
    for t in 0..THREADS {
        let (burst, path, tallies) = (burst.clone(), path.clone(), tallies.clone());
        let (hold, held) = mpsc::channel::<()>();
        holds.push(hold);
        pool.push(thread::spawn(move || {
            let mut tally = Tally::default();
            let first = burst_value(t * CALLS);
            assert!(burst.record(first), "an empty lane writes");
            tally.keep(first);
            let watch = LaneWatch::of_this_thread(&path);
            for index in 1..CALLS {
                watch.record(&burst, burst_value(t * CALLS + index), &mut tally);
            }
            tallies.send(tally).unwrap();
            // Waits for work that never comes, its lane held: no release, no exit.
            let _ = held.recv();
        }));
    }
    let mut tally = Tally::default();
    for _ in 0..THREADS {
        tally.add(&counted.recv_timeout(Duration::from_secs(120)).unwrap());
    }
    assert_eq!(tally.calls(), THREADS * CALLS);
    collector.wait_for_within("every call counted exactly, the threads blocked", Duration::from_secs(60), |latest| {
        let series = latest.series("rs-pool", "burst")?;
        tally.check(series)?;
        // Every call gathered on any lane is counted: the file's gather cells, all of them.
        let file = RingFile::read(&path);
        let gathered: u64 = (0..file.lanes_allocated()).map(|lane| file.gather_cell(lane, 0).calls).sum();
        let sampled = series.num("sampled_records")?;
        if sampled != gathered as f64 {
            return Err(format!("sampled_records {sampled}, the lanes gathered {gathered}"));
        }
        Ok(())
    });
    let file = RingFile::read(&path);
    assert!((0..file.lanes_allocated()).all(|lane| file.lane(lane).state == 1), "every lane still held");
    let gathered: u64 = (0..file.lanes_allocated()).map(|lane| file.gather_cell(lane, 0).calls).sum();
    common::say(&format!("pool: {tally:?}, {gathered} calls gathered"));
    drop(holds); // the pool is let go
    for thread in pool {
        thread.join().unwrap();
    }
}

#[test]
fn eight_threads_of_a_million_records_into_lanes_of_2_20_gather_no_call() {
    let dir = ScratchDir::new("sampling-large");
    const THREADS: u64 = 8;
    const CALLS: u64 = 1_000_000;
    let bot = Bot::attach_with("rs-large", options(&dir, 1 << 20, 0)).unwrap();
    let values = bot.histogram("values", Unit::None, &[]).unwrap();
    let path = dir.file("rs-large");
    // A consumer that reads gather cells and never drains: 1 M records stay below 2^20 - 2^20 / 32
    // (1,015,808), where sampling may start at the earliest, whatever the pace.
    declare_consumer(&path, 4242, true, 0);
    let claimed = Arc::new(Barrier::new(THREADS as usize));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (values, claimed) = (values.clone(), claimed.clone());
            thread::spawn(move || {
                assert!(values.record(t * CALLS + 1));
                claimed.wait(); // a lane a thread: each holds its lane before the others record
                (2..=CALLS).all(|i| values.record(t * CALLS + i))
            })
        })
        .collect();
    for thread in threads {
        assert!(thread.join().unwrap(), "every call written as it is");
    }
    let file = SharedFile::map(&path);
    let heads = RingFile::read_without_records(&path);
    assert_eq!(heads.lanes_allocated(), THREADS as u32);
    for lane in 0..THREADS as u32 {
        let l = heads.lane(lane);
        assert_eq!((l.write_cursor, l.dropped_total, l.gathered), (CALLS, 0, 0), "lane {lane}");
        assert_eq!(heads.gather_cell(lane, 0), Default::default(), "lane {lane}: no call gathered");
        assert!((0..CALLS).all(|cursor| file.record(lane, cursor).flags == 0), "lane {lane}: every record weight 1");
    }
    drop(file);
    // The real collector counts all of them, none gathered.
    let binary = collector_or_skip!();
    let collector = Collector::start(&binary, &dir);
    let total = THREADS * CALLS;
    collector.wait_for_within("8 M calls counted", Duration::from_secs(180), |latest| {
        let series = latest.series("rs-large", "values")?;
        let expected = Tally { kept: total, kept_sum: total * (total + 1) / 2, kept_max: total, ..Tally::default() };
        expected.check(series)?;
        match series.num("sampled_records")? {
            0.0 => Ok(()),
            sampled => Err(format!("sampled_records {sampled}")),
        }
    });
}
