//! Signed and fractional values (format 4: VALUES in ringside.h): what this crate writes for them
//! is what the C producer writes, byte for byte (registry entries, records, lane cells, gather and
//! drop cells of a sampling lane, the cells of a thread without a lane, `clamped`, the version);
//! values it cannot hold are clamped and counted, never wrapped; a registration that conflicts or
//! asks for a resolution that is no power of ten is refused naming the metric; and a million
//! increments of 0.01 add up to exactly a million steps.

mod common;

use common::{declare_consumer, repository, Collector, RingFile, ScratchDir, SplitMix64};
use ringside::{Bot, Error, Options, Unit};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const OFFSET: u64 = 1 << 63; // RS_OFFSET_BINARY_BIAS

fn options(dir: &ScratchDir) -> Options {
    Options {
        directory: Some(dir.path.clone()),
        lane_capacity: Some(1024),
        max_metrics: Some(16),
        ..Options::default()
    }
}

/// A signed value as stored: its offset binary.
fn offset(steps: i64) -> u64 {
    (steps as u64) ^ OFFSET
}

// MARK: - The same calls from C and from this crate

/// The C side of `signed_and_fractional_values_are_the_bytes_the_c_producer_writes`:
/// `values DIR BOT OPS register|record`. It registers the metrics `Metrics::register` registers,
/// in the same order (saying the file's version after the plain ones and after all), and with
/// `record` makes the calls listed in OPS: lines `THREAD OP METRIC HEX`, thread 0 on the main
/// thread, then thread 1 on a thread of its own; then tries two conflicting registrations.
const C_VALUES: &str = r#"
#include "ringside_producer.h"
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { int thread; char op; unsigned metric; uint64_t bits; } op_t;
static rs_bot *bot;
static rs_metric metrics[7];
static op_t *ops;
static size_t op_count;
static char *results;

static double as_double(uint64_t bits) { double d; memcpy(&d, &bits, sizeof d); return d; }

static void run(int thread) {
    for (size_t i = 0; i < op_count; i++) {
        if (ops[i].thread != thread) continue;
        rs_metric m = metrics[ops[i].metric];
        int r = -1;
        switch (ops[i].op) {
        case 'v': r = rs_bot_record_value(bot, m, as_double(ops[i].bits)); break;
        case 's': r = rs_bot_record_signed(bot, m, (int64_t)ops[i].bits); break;
        case 'r': r = rs_bot_record(bot, m, ops[i].bits); break;
        case 'c': rs_bot_count_value(bot, m, as_double(ops[i].bits)); break;
        case 'n': rs_bot_count(bot, m, ops[i].bits); break;
        }
        results[i] = r < 0 ? '-' : r ? '1' : '0';
    }
}

static void *second(void *unused) { (void)unused; run(1); return NULL; }

static int reg(int i, const char *name, rs_kind kind, rs_unit unit, uint8_t form, int8_t scale, const char *const *labels,
               const char *help, uint32_t every) {
    rs_error error;
    rs_values values = {form, scale};
    if (rs_bot_register_values(bot, &metrics[i], name, kind, unit, values, labels, help, every, &error) < 0) {
        fprintf(stderr, "%s\n", error.message);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    rs_bot_options options;
    memset(&options, 0, sizeof options);
    options.directory = argv[1];
    options.lane_capacity = 64;
    options.max_metrics = 8;
    options.max_lanes = 1;
    rs_error error;
    if (rs_bot_attach(&bot, argv[2], &options, &error) < 0) { fprintf(stderr, "%s\n", error.message); return 1; }
    const char *labels[] = {"symbol", "AAPL", NULL};
    if (reg(0, "latency", RS_KIND_HISTOGRAM, RS_UNIT_MICROSECONDS, 0, 0, NULL, "", 1)) return 1;
    if (reg(1, "ticks", RS_KIND_COUNTER, RS_UNIT_NONE, 0, 0, NULL, "", 1)) return 1;
    printf("plain %u\n", (unsigned)__atomic_load_n(&bot->header->version, __ATOMIC_ACQUIRE));
    if (reg(2, "slippage_bps", RS_KIND_HISTOGRAM, RS_UNIT_NONE, RS_FORM_SIGNED, -2, labels, "Slippage", 1)) return 1;
    if (reg(3, "fill_usd", RS_KIND_HISTOGRAM, RS_UNIT_NONE, 0, -6, NULL, "", 1)) return 1;
    if (reg(4, "commission_usd", RS_KIND_COUNTER, RS_UNIT_NONE, 0, -6, NULL, "", 1)) return 1;
    if (reg(5, "volume", RS_KIND_COUNTER, RS_UNIT_NONE, 0, 2, NULL, "", 1)) return 1;
    if (reg(6, "pnl", RS_KIND_HISTOGRAM, RS_UNIT_NONE, RS_FORM_SIGNED, 0, NULL, "", 3)) return 1;
    printf("all %u\n", (unsigned)__atomic_load_n(&bot->header->version, __ATOMIC_ACQUIRE));
    if (strcmp(argv[4], "record") == 0) {
        FILE *f = fopen(argv[3], "r");
        if (f == NULL) return 1;
        ops = calloc(100000, sizeof *ops);
        char op;
        int thread;
        unsigned metric;
        uint64_t bits;
        while (fscanf(f, "%d %c %u %" SCNx64, &thread, &op, &metric, &bits) == 4) {
            ops[op_count++] = (op_t){thread, op, metric, bits};
        }
        fclose(f);
        results = calloc(op_count + 1, 1);
        run(0);
        pthread_t t;
        pthread_create(&t, NULL, second, NULL);
        pthread_join(t, NULL);
        printf("results %s\n", results);
        rs_metric again;
        rs_values unsigned_values = {0, -2}, finer = {RS_FORM_SIGNED, -4};
        rs_bot_register_values(bot, &again, "slippage_bps", RS_KIND_HISTOGRAM, RS_UNIT_NONE, unsigned_values, labels,
                               "", 1, &error);
        printf("conflict %s\n", error.message);
        rs_bot_register_values(bot, &again, "slippage_bps", RS_KIND_HISTOGRAM, RS_UNIT_NONE, finer, labels, "", 1, &error);
        printf("conflict %s\n", error.message);
    }
    rs_bot_detach(bot);
    return 0;
}
"#;

/// One call: on thread 0 (which holds the file's one lane) or 1 (none left: it records without a
/// lane), `op` on metric `metric` of `bits` (a double's bits, or an integer's).
#[derive(Clone, Copy)]
struct Op {
    thread: u8,
    op: u8,
    metric: u32,
    bits: u64,
}

/// The metrics of the comparison, registered as the C program registers them.
struct Metrics {
    latency: ringside::Histogram,
    ticks: ringside::Counter,
    slippage: ringside::Histogram,
    fill: ringside::Histogram,
    commission: ringside::Counter,
    volume: ringside::Counter,
    pnl: ringside::Histogram,
}

impl Metrics {
    /// Registers them; returns them and the file's version after the plain two, then after all.
    fn register(bot: &Bot, path: &Path) -> (Metrics, u32, u32) {
        let latency = bot.histogram("latency", Unit::Microseconds, &[]).unwrap();
        let ticks = bot.counter("ticks", &[]).unwrap();
        let plain = RingFile::read(path).version();
        let slippage = bot
            .metric("slippage_bps")
            .label("symbol", "AAPL")
            .help("Slippage")
            .resolution(0.01)
            .signed()
            .histogram(Unit::None)
            .unwrap();
        let fill = bot.metric("fill_usd").resolution(1e-6).histogram(Unit::None).unwrap();
        let commission = bot.metric("commission_usd").resolution(1e-6).counter().unwrap();
        let volume = bot.metric("volume").resolution(100.0).counter().unwrap();
        let pnl = bot.metric("pnl").signed().sample_every(3).histogram(Unit::None).unwrap();
        let all = RingFile::read(path).version();
        (Metrics { latency, ticks, slippage, fill, commission, volume, pnl }, plain, all)
    }

    /// Makes the calls of `thread`, noting each one's result at its place in `results`.
    fn run(&self, ops: &[Op], thread: u8, results: &mut [u8]) {
        for (i, op) in ops.iter().enumerate().filter(|(_, op)| op.thread == thread) {
            let histogram = match op.metric {
                0 => Some(&self.latency),
                2 => Some(&self.slippage),
                3 => Some(&self.fill),
                6 => Some(&self.pnl),
                _ => None,
            };
            let counter = match op.metric {
                1 => Some(&self.ticks),
                4 => Some(&self.commission),
                5 => Some(&self.volume),
                _ => None,
            };
            let written = match op.op {
                b'v' => Some(histogram.unwrap().record_value(f64::from_bits(op.bits))),
                b's' => Some(histogram.unwrap().record_signed(op.bits as i64)),
                b'r' => Some(histogram.unwrap().record(op.bits)),
                b'c' => {
                    counter.unwrap().increment_value(f64::from_bits(op.bits));
                    None
                }
                b'n' => {
                    counter.unwrap().increment(op.bits);
                    None
                }
                other => panic!("op {other}"),
            };
            results[i] = match written {
                None => b'-',
                Some(true) => b'1',
                Some(false) => b'0',
            };
        }
    }
}

/// xorshift64*: the same calls in every run.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A double from `low` to `high` with at most `decimals` decimals (as people write them).
    fn decimal(&mut self, low: f64, high: f64, decimals: i32) -> f64 {
        let unit = 10f64.powi(decimals);
        let span = ((high - low) * unit) as u64;
        low + (self.next() % span) as f64 / unit
    }
}

/// The calls: ordinary values of each metric in turn, and every edge VALUES names (ties, NaN,
/// infinities, values past either end, i64::MIN, -0.0), on thread 0 then on thread 1 (which starts
/// with a NaN: a value counted before the thread has a writer).
fn calls() -> Vec<Op> {
    let mut random = Random(0x9E37_79B9_7F4A_7C15);
    let mut ops = Vec::new();
    let d = |x: f64| x.to_bits();
    let edges: [(u8, u32, u64); 44] = [
        (b'v', 2, d(0.125)),  // 12.5 steps: 12 (ties to even)
        (b'v', 2, d(-0.125)), // -12
        (b'v', 2, d(0.135)),  // 13.500000000000002: 14
        (b'v', 2, d(-0.0)),
        (b'v', 2, d(f64::NAN)),
        (b'v', 2, d(f64::INFINITY)),
        (b'v', 2, d(f64::NEG_INFINITY)),
        (b'v', 2, d(1e17)), // 1e19 steps: past 2^63 - 1
        (b'v', 2, d(-1e17)),
        (b'v', 2, d(9.2e16)), // 9.2e18 steps: within
        (b'v', 2, d(-9.2e16)),
        (b'v', 2, d(5e-324)),
        (b's', 2, i64::MIN as u64),
        (b's', 2, i64::MAX as u64),
        (b's', 2, (-i64::MAX) as u64),
        (b's', 2, 0),
        (b's', 2, -1i64 as u64),
        (b'r', 2, 5),        // refused: unsigned steps into a signed histogram
        (b's', 3, 5),        // refused: signed steps into an unsigned one
        (b'v', 3, d(-0.01)), // below 0: 0, counted
        (b'v', 3, d(-0.0)),  // 0, not counted
        (b'v', 3, d(f64::NAN)),
        (b'v', 3, d(f64::INFINITY)),
        (b'v', 3, d(2e13)), // 2e19 steps: past 2^64 - 1
        (b'v', 3, d(1e-7)), // 0.1 steps: 0
        (b'v', 3, d(5e-7)), // 0.5: 0
        (b'v', 3, d(1.5e-6)),
        (b'v', 3, d(2.5e-6)),
        (b'r', 3, u64::MAX),
        (b'c', 4, d(0.37)),
        (b'c', 4, d(-1.0)), // nothing, counted
        (b'c', 4, d(f64::NAN)),
        (b'c', 4, d(f64::INFINITY)), // 2^64 - 1 steps, counted
        (b'c', 4, d(1e14)),          // 1e20 steps: 2^64 - 1, counted
        (b'c', 4, d(-0.0)),
        (b'c', 5, d(150.0)), // 1.5 hundreds: 2
        (b'c', 5, d(250.0)), // 2.5: 2
        (b'c', 5, d(49.0)),
        (b'c', 1, d(1.5)),
        (b'c', 1, d(2.5)),
        (b'v', 0, d(2.5)),
        (b'v', 0, d(-3.0)),
        (b'v', 6, d(-7.5)),
        (b'v', 6, d(f64::NAN)),
    ];
    for thread in 0..2u8 {
        if thread == 1 {
            ops.push(Op { thread, op: b'v', metric: 2, bits: d(f64::NAN) });
        }
        for &(op, metric, bits) in &edges {
            ops.push(Op { thread, op, metric, bits });
        }
        let ordinary = if thread == 0 { 500 } else { 60 };
        for _ in 0..ordinary {
            let (op, metric, bits) = match random.next() % 10 {
                0 | 1 => (b'v', 2, d(random.decimal(-50.0, 50.0, 3))),
                2 => (b's', 2, (random.next() as i64 >> 20) as u64),
                3 => (b'v', 3, d(random.decimal(0.0, 1000.0, 7))),
                4 => (b'r', 3, random.next() >> 30),
                5 => (b'c', 4, d(random.decimal(0.0, 100.0, 7))),
                6 => (b'n', 4, random.next() % 1000),
                7 => (b'c', 5, d(random.decimal(0.0, 100_000.0, 1))),
                8 => (b'v', 6, d(random.decimal(-1e6, 1e6, 2))),
                _ => (b'v', 0, d(random.decimal(0.0, 1000.0, 2))),
            };
            ops.push(Op { thread, op, metric, bits });
        }
    }
    ops
}

fn compile(source: &str, build: &ScratchDir, name: &str) -> Option<PathBuf> {
    let sources = repository().join("Sources/CRingside");
    if !sources.join("ringside_producer.c").is_file() {
        return None;
    }
    let file = build.path.join(format!("{name}.c"));
    std::fs::write(&file, source).unwrap();
    let binary = build.path.join(name);
    let output = Command::new("cc")
        .args(["-std=gnu11", "-pthread", "-O1", "-Wall", "-Werror", "-I"])
        .arg(sources.join("include"))
        .arg(&file)
        .arg(sources.join("ringside_producer.c"))
        .arg(sources.join("ringside.c"))
        .arg("-o")
        .arg(&binary)
        .output()
        .ok()?;
    assert!(output.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&output.stderr));
    Some(binary)
}

/// The C program, or None when there is no cc or no C producer (fails under CI=true).
fn c_program(build: &ScratchDir) -> Option<PathBuf> {
    let has_cc = Command::new("cc").arg("--version").output().is_ok_and(|o| o.status.success());
    let binary = if has_cc { compile(C_VALUES, build, "values") } else { None };
    if binary.is_none() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true: cc and Sources/CRingside are needed");
        common::say("SKIPPED: the C producer's values (no cc, or no Sources/CRingside)");
    }
    binary
}

fn run_c(binary: &Path, dir: &ScratchDir, bot: &str, ops: &Path, mode: &str) -> String {
    let output = Command::new(binary).arg(&dir.path).arg(bot).arg(ops).arg(mode).output().unwrap();
    assert!(output.status.success(), "the C program ({mode}): {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// A drain interval longer than any test: a sampling lane's reserve then depends on its fill
/// alone (SAMPLING in ringside.h), so both producers sample the same calls.
const NEVER_DRAINED_NS: u64 = 1_000_000_000_000_000;

#[test]
fn signed_and_fractional_values_are_the_bytes_the_c_producer_writes() {
    let dir = ScratchDir::new("values-c");
    let build = ScratchDir::new("values-c-build");
    let Some(c) = c_program(&build) else { return };
    let ops = calls();
    let ops_file = build.path.join("ops");
    let listing: String =
        ops.iter().map(|op| format!("{} {} {} {:x}\n", op.thread, op.op as char, op.metric, op.bits)).collect();
    std::fs::write(&ops_file, listing).unwrap();
    // A consumer that reads gather cells (the full lane samples: records weighted, calls gathered),
    // then one that does not (it drops: the drop cells).
    for reads_gather_cells in [true, false] {
        let (c_bot, our_bot) =
            if reads_gather_cells { ("c-sampled", "rs-sampled") } else { ("c-dropped", "rs-dropped") };
        let c_said = same_calls_from_c(&c, &dir, c_bot, &ops_file, reads_gather_cells);
        same_calls_from_this_crate(&dir, our_bot, &ops, reads_gather_cells, &c_said);
        let (c_file, ours) = (RingFile::read(&dir.file(c_bot)), RingFile::read(&dir.file(our_bot)));
        compare_files(&c_file, &ours);
        let lane = ours.lane(0);
        if reads_gather_cells {
            assert!(lane.gathered > 0, "the lane sampled: {lane:?}");
        } else {
            assert!(lane.gathered == 0 && lane.dropped_total > 0, "the lane dropped: {lane:?}");
            assert!(ours.gather_cell(0, 2).dropped_max > 0, "slippage_bps's drops kept aside");
        }
    }
}

/// The C program on bot `bot`: made and registered, then a consumer that never drains declared,
/// then the calls. What it said.
fn same_calls_from_c(c: &Path, dir: &ScratchDir, bot: &str, ops: &Path, reads_gather_cells: bool) -> String {
    let said = run_c(c, dir, bot, ops, "register");
    assert_eq!(said, "plain 3\nall 4\n", "C's versions: 3 with plain metrics, 4 from the first signed or scaled one");
    declare_consumer(&dir.file(bot), std::process::id() as i32, reads_gather_cells, NEVER_DRAINED_NS);
    run_c(c, dir, bot, ops, "record")
}

/// This crate, as the C program: the same file, registrations and calls, each call's result and
/// each conflict's message the C program's (in `c_said`).
fn same_calls_from_this_crate(dir: &ScratchDir, bot: &str, ops: &[Op], reads_gather_cells: bool, c_said: &str) {
    let path = dir.file(bot);
    let options = Options { lane_capacity: Some(64), max_metrics: Some(8), max_lanes: Some(1), ..options(dir) };
    {
        let bot = Bot::attach_with(bot, options.clone()).unwrap();
        let (_, plain, all) = Metrics::register(&bot, &path);
        assert_eq!((plain, all), (3, 4), "this crate's versions");
    }
    declare_consumer(&path, std::process::id() as i32, reads_gather_cells, NEVER_DRAINED_NS);
    let bot = Bot::attach_with(bot, options).unwrap();
    let (metrics, plain, all) = Metrics::register(&bot, &path);
    assert_eq!((plain, all), (4, 4), "a file of format 4 stays 4");
    let mut results = vec![b' '; ops.len()];
    metrics.run(ops, 0, &mut results);
    // A second thread: the file's one lane is held, so it records without one.
    let second = std::thread::scope(|scope| {
        let thread = scope.spawn(|| {
            let mut theirs = vec![b' '; ops.len()];
            metrics.run(ops, 1, &mut theirs);
            theirs
        });
        thread.join().unwrap()
    });
    for (i, _) in ops.iter().enumerate().filter(|(_, op)| op.thread == 1) {
        results[i] = second[i];
    }
    let c_results = c_said.lines().find_map(|line| line.strip_prefix("results ")).expect("C's results");
    assert_eq!(String::from_utf8(results).unwrap(), c_results, "each call's result, C's and ours");
    let c_conflicts: Vec<&str> = c_said.lines().filter(|line| line.starts_with("conflict ")).collect();
    assert_eq!(c_conflicts.len(), 2, "{c_said}");
    let conflicts = [
        bot.metric("slippage_bps").label("symbol", "AAPL").resolution(0.01).histogram(Unit::None),
        bot.metric("slippage_bps").label("symbol", "AAPL").resolution(1e-4).signed().histogram(Unit::None),
    ];
    for (conflict, c_line) in conflicts.into_iter().zip(c_conflicts) {
        let error = conflict.unwrap_err();
        assert!(matches!(error, Error::Conflict { .. }), "{error:?}");
        let c_bot = c_line.split(' ').nth(2).unwrap_or("").trim_end_matches(':').to_string();
        assert_eq!(
            format!("conflict {error}").replace(bot.name(), "BOT"),
            c_line.replace(&c_bot, "BOT"),
            "the conflict's message is C's"
        );
    }
}

/// Every byte VALUES touches, C's file against this crate's (timestamps aside).
fn compare_files(c: &RingFile, ours: &RingFile) {
    assert_eq!(ours.version(), 4);
    assert_eq!(c.version(), ours.version(), "version");
    assert_eq!(c.metric_count(), 7);
    assert_eq!(ours.metric_count(), 7);
    for index in 0..7 {
        assert_eq!(c.entry_bytes(index), ours.entry_bytes(index), "registry entry {index}");
    }
    assert_eq!(c.lanes_allocated(), 1);
    assert_eq!(ours.lanes_allocated(), 1);
    assert_eq!(c.lanes_exhausted(), ours.lanes_exhausted(), "lanes_exhausted");
    let (cl, ol) = (c.lane(0), ours.lane(0));
    assert_eq!(
        (cl.write_cursor, cl.dropped_total, cl.gathered, cl.cell_writes),
        (ol.write_cursor, ol.dropped_total, ol.gathered, ol.cell_writes),
        "lane 0's cursor, drops, gathered calls and cell writes"
    );
    let strip = |records: Vec<common::Record>| -> Vec<(u64, u64, u32, u8, u8, u16)> {
        records.into_iter().map(|r| (r.value, r.sequence, r.metric, r.kind, r.flags, r.exemplar_length)).collect()
    };
    assert_eq!(strip(c.records(0)), strip(ours.records(0)), "lane 0's records");
    for metric in 0..7 {
        assert_eq!(c.lane_cell(0, metric), ours.lane_cell(0, metric), "lane cell of metric {metric}");
        assert_eq!(c.gather_cell(0, metric), ours.gather_cell(0, metric), "gather cell of metric {metric}");
        assert_eq!(c.metric_cell(metric), ours.metric_cell(metric), "metric cell of metric {metric}");
        assert_eq!(c.unlaned_values(metric), ours.unlaned_values(metric), "unlaned values of metric {metric}");
        assert_eq!(c.clamped(metric), ours.clamped(metric), "clamped of metric {metric}");
    }
    assert!(ours.clamped(2) > 0 && ours.clamped(3) > 0 && ours.clamped(4) > 0, "values were clamped");
    assert!(ours.metric_cell(2).2 > 0, "the thread without a lane lost records of slippage_bps");
}

// MARK: - This crate alone

#[test]
fn values_a_metric_cannot_hold_are_clamped_to_its_ends_and_counted_never_wrapped() {
    let dir = ScratchDir::new("values-clamped");
    let bot = Bot::attach_with("rs-clamped", options(&dir)).unwrap();
    let slippage = bot.metric("slippage_bps").resolution(0.01).signed().histogram(Unit::None).unwrap();
    let fill = bot.metric("fill_usd").resolution(1e-6).histogram(Unit::None).unwrap();
    let commission = bot.metric("commission_usd").resolution(1e-6).counter().unwrap();
    let path = dir.file("rs-clamped");

    // A signed histogram: rounded to the nearest hundredth, ties to even; the ends of +-(2^63 - 1).
    assert!(slippage.record_value(-3.5));
    assert!(slippage.record_value(0.125));
    assert!(slippage.record_value(-0.125));
    assert!(slippage.record_value(f64::INFINITY));
    assert!(slippage.record_value(-1e300));
    assert!(!slippage.record_value(f64::NAN), "a NaN is not recorded");
    assert!(slippage.record_signed(i64::MIN));
    assert!(slippage.record_signed(-7));
    assert!(!slippage.record(7), "unsigned steps into a signed histogram: refused, as in C");
    assert!(!slippage.record_duration(Duration::from_nanos(7)), "as record");
    assert!(!slippage.span().finish(), "a signed histogram records no span, as in C");
    let file = RingFile::read(&path);
    let values: Vec<u64> = file.records(0).iter().map(|r| r.value).collect();
    assert_eq!(
        values,
        [offset(-350), offset(12), offset(-12), offset(i64::MAX), offset(-i64::MAX), offset(-i64::MAX), offset(-7)]
    );
    assert_eq!(offset(-i64::MAX), 1, "never 0, which means none");
    assert_eq!(file.clamped(0), 4, "infinity, -1e300, NaN and i64::MIN");

    // An unsigned histogram: below 0 is 0, past 2^64 - 1 steps is 2^64 - 1.
    assert!(fill.record_value(1.5e-6));
    assert!(fill.record_value(-0.01));
    assert!(fill.record_value(-0.0), "-0.0 is 0, not clamped");
    assert!(fill.record_value(2e13));
    assert!(!fill.record_value(f64::NAN));
    assert!(!fill.record_signed(3), "signed steps into an unsigned histogram: refused");
    assert!(fill.record(3), "steps");
    let file = RingFile::read(&path);
    let values: Vec<u64> = file.records(0).iter().filter(|r| r.metric == 1).map(|r| r.value).collect();
    assert_eq!(values, [2, 0, 0, u64::MAX, 3]);
    assert_eq!(file.clamped(1), 3, "-0.01, 2e13 and NaN");

    // A counter: exact in steps; an increment below 0 or NaN adds nothing, one past the end 2^64 - 1.
    commission.increment_value(0.37);
    commission.increment_value(-1.0);
    commission.increment_value(f64::NAN);
    commission.increment(5);
    let file = RingFile::read(&path);
    assert_eq!(file.lane_cell(0, 2), 370_005);
    assert_eq!(file.clamped(2), 2);
    commission.increment_value(1e14);
    let file = RingFile::read(&path);
    assert_eq!(file.lane_cell(0, 2), 370_005u64.wrapping_add(u64::MAX), "2^64 - 1 steps added (modulo 2^64)");
    assert_eq!(file.clamped(2), 3);
    assert_eq!(file.metric_cell(2).2, 0, "nothing without a lane");
}

#[test]
fn a_thread_whose_first_value_is_a_nan_counts_it_without_claiming_a_lane() {
    let dir = ScratchDir::new("values-nan");
    let bot = Bot::attach_with("rs-nan", options(&dir)).unwrap();
    let slippage = bot.metric("slippage_bps").resolution(0.01).signed().histogram(Unit::None).unwrap();
    let commission = bot.metric("commission_usd").resolution(0.01).counter().unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            assert!(!slippage.record_value(f64::NAN));
            commission.increment_value(f64::NAN);
        });
    });
    let file = RingFile::read(&dir.file("rs-nan"));
    assert_eq!((file.clamped(0), file.clamped(1)), (1, 1));
    assert_eq!(file.lanes_allocated(), 0, "no lane claimed, as C claims none");
}

#[test]
fn a_file_becomes_format_4_just_before_its_first_signed_or_scaled_metric() {
    let dir = ScratchDir::new("values-version");
    let path = dir.file("rs-version");
    let bot = Bot::attach_with("rs-version", options(&dir)).unwrap();
    assert_eq!(RingFile::read(&path).version(), 3, "made as format 3, which readers of 0.4 read");
    bot.histogram("latency", Unit::Microseconds, &[]).unwrap();
    bot.metric("orders").resolution(1.0).counter().unwrap();
    bot.metric("level").resolution(1.0).gauge(Unit::None).unwrap();
    assert_eq!(RingFile::read(&path).version(), 3, "whole units, unsigned: format 3 says it");
    let commission = bot.metric("commission_usd").resolution(1e-6).counter().unwrap();
    let file = RingFile::read(&path);
    assert_eq!(file.version(), 4, "a scaled counter");
    assert_eq!(file.values(3), (0, -6));
    assert_eq!(commission.resolution(), 1e-6);
    let pnl = bot.metric("pnl").signed().histogram(Unit::None).unwrap();
    assert_eq!(RingFile::read(&path).values(4), (1, 0));
    assert!(pnl.is_signed() && pnl.resolution() == 1.0);
    drop((bot, commission, pnl));

    // Attached again: format 4 is read, its metrics found again with their values.
    let bot = Bot::attach_with("rs-version", options(&dir)).unwrap();
    assert_eq!(bot.metric("commission_usd").resolution(0.000001).counter().unwrap().index(), 3);
    assert_eq!(bot.metric("pnl").signed().histogram(Unit::None).unwrap().index(), 4);
    assert_eq!(RingFile::read(&path).version(), 4);

    // Only a signed or scaled metric makes a file format 4: a thousand of steps of 100 do too.
    let other = Bot::attach_with("rs-version-2", options(&dir)).unwrap();
    other.metric("volume").resolution(100.0).counter().unwrap();
    let file = RingFile::read(&dir.file("rs-version-2"));
    assert_eq!((file.version(), file.values(0)), (4, (0, 2)));
}

#[test]
fn resolutions_that_are_not_powers_of_ten_and_values_a_kind_cannot_take_are_refused_naming_the_metric() {
    let dir = ScratchDir::new("values-refused");
    let bot = Bot::attach_with("rs-refused", options(&dir)).unwrap();
    let refused = |result: Result<u32, Error>, reason: &str| {
        let error = result.unwrap_err();
        assert!(matches!(error, Error::InvalidOption { .. }), "{error:?}");
        assert_eq!(error.to_string(), format!("bot rs-refused: {reason}"));
    };
    let power = "is not a power of ten from 1e-18 to 1e18 (0.01, 1e-6, 1, 100, ...)";
    for (resolution, shown) in [
        (0.03, "0.03"),
        (0.0, "0.0"),
        (-0.01, "-0.01"),
        (0.1 * 0.1, "0.010000000000000002"),
        (1e-19, "1e-19"),
        (1e19, "1e19"),
        (f64::NAN, "NaN"),
        (f64::INFINITY, "inf"),
    ] {
        refused(
            bot.metric("slippage_bps").resolution(resolution).histogram(Unit::None).map(|h| h.index()),
            &format!("metric slippage_bps: resolution {shown} {power}"),
        );
        refused(
            bot.metric("commission_usd").resolution(resolution).counter().map(|c| c.index()),
            &format!("metric commission_usd: resolution {shown} {power}"),
        );
    }
    let signed = "only a histogram takes signed values (a counter never goes back; a gauge is a double)";
    refused(bot.metric("orders").signed().counter().map(|c| c.index()), &format!("metric orders: {signed}"));
    refused(bot.metric("level").signed().gauge(Unit::None).map(|g| g.index()), &format!("metric level: {signed}"));
    refused(
        bot.metric("level").resolution(0.01).gauge(Unit::None).map(|g| g.index()),
        "metric level: a gauge is a double: it takes no resolution",
    );
    assert_eq!(bot.metric_count(), 0, "nothing registered");
    assert_eq!(RingFile::read(&dir.file("rs-refused")).version(), 3);
}

#[test]
fn the_same_metric_with_other_values_is_a_conflict_naming_it() {
    let dir = ScratchDir::new("values-conflict");
    let bot = Bot::attach_with("rs-conflict", options(&dir)).unwrap();
    let slippage = bot.metric("slippage_bps").label("venue", "XNAS").resolution(0.01).signed().histogram(Unit::None);
    assert_eq!(slippage.unwrap().index(), 0);
    let again = bot.metric("slippage_bps").label("venue", "XNAS").resolution(1e-2).signed().histogram(Unit::None);
    assert_eq!(again.unwrap().index(), 0, "0.01 and 1e-2 are one resolution");
    let cases = [
        (false, 0.01, "unsigned values in steps of 1e-2"),
        (true, 1.0, "signed values in steps of 1e0"),
        (true, 0.001, "signed values in steps of 1e-3"),
    ];
    for (signed, resolution, asked) in cases {
        let builder = bot.metric("slippage_bps").label("venue", "XNAS").resolution(resolution);
        let builder = if signed { builder.signed() } else { builder };
        let error = builder.histogram(Unit::None).unwrap_err();
        assert!(matches!(&error, Error::Conflict { metric, .. } if metric == "slippage_bps"), "{error:?}");
        assert_eq!(
            error.to_string(),
            format!(
                "bot rs-conflict: metric slippage_bps{{venue=XNAS}} is already registered with signed values in \
                 steps of 1e-2; asked for {asked}"
            )
        );
    }
    // Another kind is the kind's conflict, as before.
    let error = bot.metric("slippage_bps").label("venue", "XNAS").counter().unwrap_err();
    assert!(error.to_string().contains("is already registered as a histogram"), "{error}");
    let orders = bot.metric("orders").resolution(0.01).counter().unwrap();
    let error = bot.metric("orders").counter().unwrap_err();
    assert!(error.to_string().ends_with("unsigned values in steps of 1e-2; asked for unsigned values in steps of 1e0"));
    assert_eq!(orders.index(), 1);
}

#[test]
fn a_million_increments_of_a_hundredth_are_exactly_a_million_steps() {
    let dir = ScratchDir::new("values-million");
    let bot = Bot::attach_with("rs-million", options(&dir)).unwrap();
    let commission = bot.metric("commission_usd").resolution(0.01).counter().unwrap();
    for _ in 0..1_000_000 {
        commission.increment_value(0.01);
    }
    let file = RingFile::read(&dir.file("rs-million"));
    assert_eq!(file.lane_cell(0, 0), 1_000_000, "10,000.00 exactly");
    assert_eq!(file.clamped(0), 0);
    // The sum of the doubles themselves is not: what the steps are for.
    let naive: f64 = (0..1_000_000).map(|_| 0.01).sum();
    assert_ne!(naive, 10_000.0);
}

#[test]
fn durations_and_spans_into_a_histogram_with_a_resolution_are_its_steps() {
    let dir = ScratchDir::new("values-durations");
    let bot = Bot::attach_with("rs-durations", options(&dir)).unwrap();
    let fine = bot.metric("fill_ms").resolution(0.001).histogram(Unit::Milliseconds).unwrap();
    let coarse = bot.metric("batch_s").resolution(10.0).histogram(Unit::Seconds).unwrap();
    assert!(fine.record_duration(Duration::from_micros(1500)));
    assert!(fine.record_duration(Duration::from_nanos(2_999)), "truncated: 2 steps of a microsecond");
    assert!(fine.record_duration(Duration::MAX), "saturated");
    assert!(coarse.record_duration(Duration::from_secs(125)));
    assert!(fine.record_value(1.5), "1.5 ms: 1,500 steps");
    {
        let _span = fine.span();
        std::thread::sleep(Duration::from_millis(2));
    }
    let file = RingFile::read(&dir.file("rs-durations"));
    let records = file.records(0);
    let values: Vec<(u32, u64)> = records.iter().map(|r| (r.metric, r.value)).collect();
    assert_eq!(values[..5], [(0, 1500), (0, 2), (0, u64::MAX), (1, 12), (0, 1500)]);
    let (span, flags) = (records[5].value, records[5].flags);
    assert_eq!(flags, 1, "a span");
    assert!(span >= 2_000, "a 2 ms span in microseconds: {span}");
}

#[test]
fn a_disabled_bot_takes_values_and_writes_nothing() {
    let dir = ScratchDir::new("values-disabled");
    let bot = Bot::attach_with("rs-off", Options { disabled: true, ..options(&dir) }).unwrap();
    let slippage = bot.metric("slippage_bps").resolution(0.01).signed().histogram(Unit::None).unwrap();
    let commission = bot.metric("commission_usd").resolution(0.01).counter().unwrap();
    assert!(!slippage.record_value(-3.5));
    assert!(!slippage.record_value(f64::NAN));
    assert!(!slippage.record_signed(i64::MIN));
    commission.increment_value(f64::INFINITY);
    commission.increment_value(0.01);
    assert!(bot.metric("x").resolution(0.3).counter().is_err(), "registration still checks its arguments");
    assert!(!dir.file("rs-off").exists());
}

// MARK: - Through the real collector

/// The raw text of field `field` of series `metric` in a `/latest` body (its first after the
/// series' name): exact decimals compared as written, not as a parser rounds them to a double.
fn raw_field(body: &str, metric: &str, field: &str) -> Option<String> {
    let start = body.find(&format!("\"metric\":\"{metric}\""))?;
    let rest = &body[start..];
    let key = rest.find(&format!("\"{field}\":"))? + field.len() + 3;
    Some(rest[key..].chars().take_while(|c| "-0123456789.e+".contains(*c)).collect())
}

/// Steps of hundredths as a decimal, as /latest writes an exact value: -3.5, 12, 0.07.
fn decimal(steps: i64) -> String {
    let sign = if steps < 0 { "-" } else { "" };
    let (whole, hundredths) = (steps.unsigned_abs() / 100, steps.unsigned_abs() % 100);
    match hundredths {
        0 => format!("{sign}{whole}"),
        h if h % 10 == 0 => format!("{sign}{whole}.{}", h / 10),
        h => format!("{sign}{whole}.{h:02}"),
    }
}

/// A slippage in hundredths of a basis point from a signed lognormal mixture: magnitudes
/// exp(N(1, 1)) bps, 72.3 % of them negative, so the mean is about -2 bps, with tails both sides.
fn slippage_steps(random: &mut SplitMix64) -> i64 {
    let (u1, u2) = (random.unit().max(1e-300), random.unit());
    let normal = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    let magnitude = (1.0 + normal).exp();
    let negative = random.unit() < 0.723;
    ((if negative { -magnitude } else { magnitude }) * 100.0).round() as i64
}

#[test]
fn signed_values_reach_the_collector_exactly_with_their_quantiles_across_zero() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("values-collector");
    let collector = Collector::start_with(&binary, &dir, &["--quantiles", "0.01,0.5,0.99"]);
    // A lane larger than the burst: every value is written as a record.
    let bot = Bot::attach_with("rs-signed", Options { lane_capacity: Some(1 << 17), ..options(&dir) }).unwrap();
    let slippage = bot.metric("slippage_bps").resolution(0.01).signed().histogram(Unit::None).unwrap();
    let mut random = SplitMix64(41);
    let mut steps = Vec::with_capacity(100_000);
    for i in 0..100_000 {
        let value = slippage_steps(&mut random);
        steps.push(value);
        // Half in the unit (rounded to the same step), half in steps.
        let written =
            if i % 2 == 0 { slippage.record_value(value as f64 / 100.0) } else { slippage.record_signed(value) };
        assert!(written, "value {i} was not written");
    }
    let mut sorted = steps.clone();
    sorted.sort_unstable();
    let sum: i64 = steps.iter().sum();
    let mean = sum as f64 / steps.len() as f64 / 100.0;
    assert!((-3.0..-1.0).contains(&mean), "a mean near -2 bps: {mean}");
    assert!(sorted[0] < -1000 && sorted[sorted.len() - 1] > 1000, "tails on both sides");

    let body = common::eventually("the collector counts the 100,000 values", Duration::from_secs(30), || {
        let body = collector.get("/latest")?;
        match raw_field(&body, "slippage_bps", "total_count").as_deref() {
            Some("100000") => Ok(body),
            other => Err(format!("total_count {other:?}")),
        }
    })
    .unwrap_or_else(|why| panic!("{why}\ncollector log:\n{}", collector.log()));
    let field = |name: &str| raw_field(&body, "slippage_bps", name);
    assert_eq!(field("total_sum"), Some(decimal(sum)), "the exact sum, negative");
    assert_eq!(field("total_max"), Some(decimal(sorted[sorted.len() - 1])));
    assert_eq!(field("resolution").as_deref(), Some("0.01"));
    assert_eq!(field("min"), Some(decimal(sorted[0])), "the smallest, below zero");
    for (key, q) in [("p01", 0.01), ("p50", 0.5), ("p99", 0.99)] {
        let rank = (q * sorted.len() as f64).ceil() as usize;
        let exact = sorted[rank - 1] as f64 / 100.0;
        let reported: f64 = field(key).and_then(|text| text.parse().ok()).unwrap_or_else(|| panic!("no {key}"));
        assert!((reported - exact).abs() <= exact.abs() * 0.001, "{key}: {reported} against {exact}");
    }
    let metrics = collector.get("/metrics").unwrap();
    let at_zero = sorted.iter().filter(|&&s| s <= 0).count();
    let below_one_bp = sorted.iter().filter(|&&s| s <= -100).count();
    for line in [
        format!("slippage_bps_bucket{{ring=\"rs-signed\",le=\"0\"}} {at_zero}\n"),
        format!("slippage_bps_bucket{{ring=\"rs-signed\",le=\"-1\"}} {below_one_bp}\n"),
        format!("slippage_bps_sum{{ring=\"rs-signed\"}} {}\n", decimal(sum)),
        "slippage_bps_count{ring=\"rs-signed\"} 100000\n".to_string(),
    ] {
        assert!(metrics.contains(&line), "/metrics has no {line:?}");
    }
    if let Some(dump) = common::dump_binary(&binary) {
        let output = Command::new(&dump).arg("--dir").arg(&dir.path).args(["check", "rs-signed"]).output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success() && stdout.contains(" ok "), "ringside-dump check on format 4: {stdout}");
    }
}

#[test]
fn a_million_increments_of_a_hundredth_reach_the_collector_as_exactly_10000() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("values-cents");
    let collector = Collector::start(&binary, &dir);
    let bot = Bot::attach_with("rs-cents", Options { max_lanes: Some(2), ..options(&dir) }).unwrap();
    let commission = bot.metric("commission_total_usd").resolution(0.01).counter().unwrap();
    // Four threads on a bot of two lanes: a thread that finds none free adds to the shared metric
    // cell instead of a lane's; the total is exact either way.
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..250_000 {
                    commission.increment_value(0.01);
                }
            });
        }
    });
    let body = common::eventually("the collector reads 10000", Duration::from_secs(30), || {
        let body = collector.get("/latest")?;
        match raw_field(&body, "commission_total_usd", "total").as_deref() {
            Some("10000") => Ok(body),
            other => Err(format!("total {other:?}")),
        }
    })
    .unwrap_or_else(|why| panic!("{why}\ncollector log:\n{}", collector.log()));
    assert_eq!(raw_field(&body, "commission_total_usd", "resolution").as_deref(), Some("0.01"));
    let metrics = collector.get("/metrics").unwrap();
    assert!(metrics.contains("commission_total_usd_total{ring=\"rs-cents\"} 10000\n"), "/metrics:\n{metrics}");
}
