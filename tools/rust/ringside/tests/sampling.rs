//! Adaptive sampling (SAMPLING in ringside.h): a lane filling past its threshold writes records
//! weighted 2^k, k in bits 4 to 7 of their flags, only while the consumer says it reads weights;
//! once the thread lets go of its lane every call is in a record's weight or in a drop. The test
//! plays the consumer by writing the consumer line and the read cursor into the file itself; one
//! test has the real collector drain a burst.

mod common;

use common::{Collector, RingFile, ScratchDir};
use ringside::{Bot, Options, Unit};
use std::os::unix::fs::FileExt;
use std::path::Path;

const CONSUMER_PID: usize = 0x100;
const WEIGHTS_READER_PID: usize = 0x104;
const SAMPLE_ABOVE: usize = 0x0B0;

/// Says, as a consumer would, that the file's consumer (pid `pid`) reads weights (0: it does not).
fn declare_consumer(path: &Path, pid: i32, reads_weights: bool) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(&pid.to_le_bytes(), CONSUMER_PID as u64).unwrap();
    let weights = if reads_weights { pid } else { 0 };
    file.write_all_at(&weights.to_le_bytes(), WEIGHTS_READER_PID as u64).unwrap();
}

fn weight(record: &common::Record) -> u64 {
    1 << (record.flags >> 4)
}

fn options(dir: &ScratchDir, capacity: u64, percent: u32) -> Options {
    Options {
        directory: Some(dir.path.clone()),
        lane_capacity: Some(capacity),
        sample_above_percent: percent,
        ..Options::default()
    }
}

#[test]
fn a_filling_lane_writes_weighted_records_and_every_call_is_kept_or_dropped() {
    let dir = ScratchDir::new("sampling-fill");
    let bot = Bot::attach_with("rs-fill", options(&dir, 256, 0)).unwrap();
    let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
    let path = dir.file("rs-fill");
    assert_eq!(RingFile::read(&path).u32(SAMPLE_ABOVE), 128, "half the lane by default");
    declare_consumer(&path, 4242, true);
    let calls = 500_000u64; // to level 15 (past 240 records), short of full
    for value in 0..calls {
        fills.record(value);
    }
    let records = RingFile::read(&path).records(0);
    let ks: Vec<u8> = records.iter().map(|r| r.flags >> 4).collect();
    assert!(ks[..128].iter().all(|&k| k == 0), "below half full every call is written as it is");
    assert!(ks.windows(2).all(|pair| pair[0] <= pair[1]), "k never falls while the lane only fills: {ks:?}");
    assert_eq!(ks.last(), Some(&15), "a lane near full writes 1 call in 32,768");
    // Each record is the last call of its group: the calls since the previous one.
    let mut before = 0;
    for record in &records {
        assert_eq!(record.value, before + weight(record) - 1);
        before += weight(record);
    }
    // Drained, as a consumer would (the read cursor at the write cursor), then the thread lets go:
    // its open group is written, the latest value once per bit of its calls.
    drain(&path);
    bot.release_thread_lane();
    let file = RingFile::read(&path);
    let closing = file.records(0);
    let open = calls - records.iter().map(weight).sum::<u64>();
    assert!(closing.iter().all(|r| r.value == calls - 1), "a group is written as its latest value");
    assert_eq!(closing.len() as u32, open.count_ones(), "a record per bit of its calls");
    assert_eq!(closing.iter().map(weight).sum::<u64>(), open);
    assert_eq!((file.lane_cell(0, 0), file.lane(0).dropped_total), (0, 0));
}

/// Frees every record of lane 0, as a consumer would: its read cursor moved to its write cursor.
fn drain(path: &Path) {
    let file = RingFile::read(path);
    let read_cursor = file.u64(0x30) + 0x80; // lanes_offset, then lane 0's read_cursor
    let handle = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    handle.write_all_at(&file.lane(0).write_cursor.to_le_bytes(), read_cursor).unwrap();
}

#[test]
fn a_weighted_record_that_does_not_fit_is_dropped_by_its_weight() {
    let dir = ScratchDir::new("sampling-drop");
    let bot = Bot::attach_with("rs-drop", options(&dir, 16, 0)).unwrap();
    let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
    let path = dir.file("rs-drop");
    declare_consumer(&path, 4242, true);
    // 16 slots: past 8 the weight doubles at every record, to 2^15 at most; 3 million calls fill it.
    let calls = 3_000_000u64;
    for value in 0..calls {
        fills.record(value);
    }
    bot.release_thread_lane();
    let file = RingFile::read(&path);
    let weighed: u64 = file.records(0).iter().map(weight).sum();
    assert!(file.lane_cell(0, 0) >= 1 << 15, "a record of weight 2^15 was dropped: {}", file.lane_cell(0, 0));
    assert_eq!(weighed + file.lane_cell(0, 0), calls);
    assert_eq!(file.lane(0).dropped_total, file.lane_cell(0, 0), "the lane counts drops by weight, as the metric does");
}

#[test]
fn without_a_consumer_that_reads_weights_a_full_lane_drops_as_before() {
    let dir = ScratchDir::new("sampling-none");
    for (name, percent, weighs) in [("rs-old-reader", 0, false), ("rs-off", 100, true)] {
        let bot = Bot::attach_with(name, options(&dir, 64, percent)).unwrap();
        let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
        let path = dir.file(name);
        declare_consumer(&path, 4242, weighs);
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
        assert_eq!(file.u32(SAMPLE_ABOVE), if percent == 100 { 0 } else { 32 }, "{name}");
    }
    let refused = Bot::attach_with("rs-bad", options(&dir, 64, 101)).unwrap_err();
    assert!(refused.to_string().contains("sample_above_percent 101"), "{refused}");
}

#[test]
fn a_drained_lane_closes_its_groups_at_the_next_call() {
    let dir = ScratchDir::new("sampling-drain");
    let bot = Bot::attach_with("rs-drain", options(&dir, 256, 0)).unwrap();
    let fills = bot.histogram("fills", Unit::None, &[]).unwrap();
    let path = dir.file("rs-drain");
    declare_consumer(&path, 4242, true);
    for value in 0..10_000 {
        fills.record(value);
    }
    let first: u64 = RingFile::read(&path).records(0).iter().map(weight).sum();
    drain(&path);
    assert!(fills.record(42), "the lane is empty: this call is written as it is, after the open group");
    let after = RingFile::read(&path).records(0);
    let (closing, last) = after.split_at(after.len() - 1);
    assert_eq!((last[0].value, weight(&last[0])), (42, 1));
    assert!(closing.iter().all(|r| r.value == 9_999), "a group is written as its latest value");
    assert_eq!(closing.len() as u32, (10_000 - first).count_ones(), "a record per bit of its calls");
    assert_eq!(first + closing.iter().map(weight).sum::<u64>(), 10_000);
}

#[test]
fn the_collector_counts_a_sampled_burst_exactly() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("sampling-collector");
    let bot = Bot::attach_with("rs-burst", options(&dir, 1024, 0)).unwrap();
    let fills = bot.histogram("fills", Unit::Nanoseconds, &[]).unwrap();
    let collector = Collector::start(&binary, &dir);
    collector.wait_for("the collector attached", |latest| latest.ring("rs-burst").map(|_| ()));
    let calls = 2_000_000u64;
    for value in 0..calls {
        fills.record(1_000 + value % 1_000);
    }
    bot.release_thread_lane(); // the open groups are written: every call is in a weight or a drop
    collector.wait_for("every call counted", |latest| {
        let series = latest.series("rs-burst", "fills")?;
        let (count, dropped) = (series.num("total_count")?, series.num("dropped_records")?);
        if count + dropped != calls as f64 {
            return Err(format!("count {count} + dropped {dropped} is not {calls}"));
        }
        // Each record drained stands for itself and the calls sampled out with it.
        let ring = latest.ring("rs-burst")?;
        let (drained, sampled) = (ring.num("drained_total")?, ring.num("sampled_total")?);
        if drained + sampled != count || series.num("sampled_records")? != sampled {
            return Err(format!("drained {drained} + sampled {sampled} is not the count {count}"));
        }
        Ok(())
    });
}
