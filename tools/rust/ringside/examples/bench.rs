//! `cargo run --release --example bench`: nanoseconds per call of the Rust crate's hot paths
//! beside the C header's (`rs_bot_record`, `rs_bot_record_span`, `rs_bot_set`, `rs_bot_count`,
//! `rs_bot_record_checked_exemplar`, and format 4's `rs_bot_record_value` and
//! `rs_bot_record_signed` on a signed histogram of hundredths and `rs_bot_count_value` on a
//! counter of micro-dollars), measured in the same process, interleaved in rounds. A span
//! runs on each side's span clock (the TSC where it serves: THE SPAN CLOCK in ringside.h), and
//! again on CLOCK_MONOTONIC (Rust's clock switched with `SpanClock::select` for the loop, C's
//! started with `rs_clock_precise_ns`), to set the two clocks side by side.
//!
//! Each round runs every row on both sides (C first in odd rounds, Rust first in even ones). A
//! side's run of a row is 64 timed loops of a lane's worth of records (65,536 calls, 4,194,304 in
//! all; 32,768 for a record with an exemplar, which takes two slots) into a lane of 65,536
//! records, the default; between loops, outside the timing, the bench drains the lane as the
//! collector would (read_cursor = write_cursor), so no record drops and the lane stays in cache.
//! A record with an exemplar is also set against a plain record of the same side and round: the
//! median of those per-round ratios is what an exemplar costs.
//! The sampled row records into another bot, whose lane of 1,024 records is kept full by a
//! consumer that reads gather cells and never drains (the bench declares it in the bot's file, as
//! the collector would): nearly every call takes the sampled path and is gathered (SAMPLING AND
//! GATHERING in ringside.h), one in 32,768 is due as a record and dropped; that lane is never drained.
//! The C loops are whole C functions (bench/c_loop.c, built by build.rs with the repository's C
//! producer at -O2), so the FFI is crossed once per loop, never per call. The table gives each
//! side's median ns/call over the rounds and the median of the per-round ratios Rust/C.
//!
//! Arguments: [ROUNDS] [LOOPS] (defaults 7 and 64).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

use ringside::{Bot, Counter, Exemplar, Gauge, Histogram, Options, SpanClock, Unit};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

const LANE: u64 = 1 << 16;

/// Drains a bot's file as the collector would: every lane's read_cursor = its write_cursor.
fn drain(path: &Path) {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path).expect("the bot's file");
    let mut header = [0u8; 0x88];
    file.read_exact_at(&mut header, 0).unwrap();
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let (lanes_offset, lane_size) = (u64_at(&header, 0x30), u64_at(&header, 0x48));
    let lanes = u32::from_le_bytes(header[0x80..0x84].try_into().unwrap()) as u64;
    for lane in 0..lanes {
        let at = lanes_offset + lane * lane_size;
        let mut cursor = [0u8; 8];
        file.read_exact_at(&mut cursor, at).unwrap();
        file.write_all_at(&cursor, at + 0x80).unwrap();
    }
}

/// Says in a bot's file, as the collector does at attach, that its consumer (this process, which
/// never drains it) reads gather cells: its lanes may then sample (SAMPLING in ringside.h).
fn declare_gathering_consumer(path: &Path) {
    let file = std::fs::OpenOptions::new().write(true).open(path).expect("the bot's file");
    let pid = (std::process::id() as i32).to_le_bytes();
    file.write_all_at(&pid, 0x100).unwrap(); // consumer_pid
    file.write_all_at(&pid, 0x104).unwrap(); // weights_reader_pid, the same: it reads gather cells
}

/// Records dropped in a bot's file (every lane's dropped_total).
fn dropped(path: &Path) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let lanes = u32::from_le_bytes(bytes[0x80..0x84].try_into().unwrap()) as usize;
    (0..lanes).map(|lane| u64_at(u64_at(0x30) as usize + lane * u64_at(0x48) as usize + 8)).sum()
}

// MARK: - The Rust loops (not inlined into the bench's driver, as the C ones are separate functions)

#[inline(never)]
fn rust_record_loop(histogram: &Histogram, n: u64) -> (u64, u64) {
    let mut written = 0u64;
    let start = Instant::now();
    for i in 0..n {
        written += histogram.record(i) as u64;
    }
    (start.elapsed().as_nanos() as u64, written)
}

#[inline(never)]
fn rust_exemplar_loop(histogram: &Histogram, exemplar: &Exemplar, n: u64) -> (u64, u64) {
    let mut written = 0u64;
    let start = Instant::now();
    for i in 0..n {
        written += histogram.record_with_exemplar(i, exemplar) as u64;
    }
    (start.elapsed().as_nanos() as u64, written)
}

#[inline(never)]
fn rust_span_loop(histogram: &Histogram, n: u64) -> (u64, u64) {
    let mut written = 0u64;
    let start = Instant::now();
    for _ in 0..n {
        written += histogram.span().finish() as u64;
    }
    (start.elapsed().as_nanos() as u64, written)
}

#[inline(never)]
fn rust_span_monotonic_loop(histogram: &Histogram, n: u64) -> (u64, u64) {
    let clock = SpanClock::current();
    SpanClock::select(SpanClock::Monotonic);
    let timed = rust_span_loop(histogram, n);
    SpanClock::select(clock);
    timed
}

#[inline(never)]
fn rust_value_loop(histogram: &Histogram, n: u64) -> (u64, u64) {
    let mut written = 0u64;
    let start = Instant::now();
    for i in 0..n {
        written += histogram.record_value(i as f64 * 0.25 - 1000.0) as u64;
    }
    (start.elapsed().as_nanos() as u64, written)
}

#[inline(never)]
fn rust_signed_loop(histogram: &Histogram, n: u64) -> (u64, u64) {
    let mut written = 0u64;
    let half = (n / 2) as i64;
    let start = Instant::now();
    for i in 0..n {
        written += histogram.record_signed(i as i64 - half) as u64;
    }
    (start.elapsed().as_nanos() as u64, written)
}

#[inline(never)]
fn rust_count_value_loop(counter: &Counter, n: u64) -> (u64, u64) {
    let start = Instant::now();
    for _ in 0..n {
        counter.increment_value(0.37);
    }
    (start.elapsed().as_nanos() as u64, n)
}

#[inline(never)]
fn rust_set_loop(gauge: &Gauge, n: u64) -> (u64, u64) {
    let mut written = 0u64;
    let start = Instant::now();
    for i in 0..n {
        written += gauge.set(i as f64) as u64;
    }
    (start.elapsed().as_nanos() as u64, written)
}

#[inline(never)]
fn rust_count_loop(counter: &Counter, n: u64) -> (u64, u64) {
    let start = Instant::now();
    for _ in 0..n {
        counter.increment(1);
    }
    (start.elapsed().as_nanos() as u64, n)
}

// MARK: - The C side

#[cfg(ringside_c_baseline)]
mod c {
    use std::ffi::{c_char, c_int, CStr, CString};
    use std::path::Path;

    extern "C" {
        fn rsbench_c_open(directory: *const c_char, name: *const c_char, lane_capacity: u64) -> c_int;
        fn rsbench_c_open_sampled(directory: *const c_char, name: *const c_char, lane_capacity: u64) -> c_int;
        fn rsbench_c_sampled_loop(n: u64, written: *mut u64) -> u64;
        fn rsbench_c_error() -> *const c_char;
        fn rsbench_c_close();
        fn rsbench_c_record_loop(n: u64, written: *mut u64) -> u64;
        fn rsbench_c_span_loop(n: u64, written: *mut u64) -> u64;
        fn rsbench_c_span_monotonic_loop(n: u64, written: *mut u64) -> u64;
        fn rsbench_c_span_clock() -> *const c_char;
        fn rsbench_c_set_loop(n: u64, written: *mut u64) -> u64;
        fn rsbench_c_count_loop(n: u64) -> u64;
        fn rsbench_c_exemplar_loop(n: u64, written: *mut u64) -> u64;
        fn rsbench_c_value_loop(n: u64, written: *mut u64) -> u64;
        fn rsbench_c_signed_loop(n: u64, written: *mut u64) -> u64;
        fn rsbench_c_count_value_loop(n: u64) -> u64;
    }

    /// The C bot of bench/c_loop.c (one per process).
    pub struct CBot;

    impl CBot {
        /// The C bot `name`, and the sampled row's `sampled`, with lanes of `sampled_capacity`.
        pub fn open(
            directory: &Path,
            name: &str,
            lane_capacity: u64,
            sampled: &str,
            sampled_capacity: u64,
        ) -> Result<CBot, String> {
            let directory = CString::new(directory.to_str().unwrap()).unwrap();
            let (name, sampled) = (CString::new(name).unwrap(), CString::new(sampled).unwrap());
            // SAFETY: valid C strings; the C side copies what it keeps.
            let opened = unsafe {
                rsbench_c_open(directory.as_ptr(), name.as_ptr(), lane_capacity) == 0
                    && rsbench_c_open_sampled(directory.as_ptr(), sampled.as_ptr(), sampled_capacity) == 0
            };
            if !opened {
                // SAFETY: a NUL-terminated static buffer.
                return Err(unsafe { CStr::from_ptr(rsbench_c_error()) }.to_string_lossy().into_owned());
            }
            Ok(CBot)
        }

        pub fn run(&self, row: usize, n: u64) -> (u64, u64) {
            let mut written = 0u64;
            // SAFETY: the bot is open; each loop runs on this thread.
            let nanoseconds = unsafe {
                match row {
                    0 => rsbench_c_record_loop(n, &mut written),
                    1 => rsbench_c_span_loop(n, &mut written),
                    2 => rsbench_c_set_loop(n, &mut written),
                    4 => rsbench_c_exemplar_loop(n, &mut written),
                    5 => rsbench_c_span_monotonic_loop(n, &mut written),
                    6 => rsbench_c_sampled_loop(n, &mut written),
                    7 => rsbench_c_value_loop(n, &mut written),
                    8 => rsbench_c_signed_loop(n, &mut written),
                    9 => {
                        written = n;
                        rsbench_c_count_value_loop(n)
                    }
                    _ => {
                        written = n;
                        rsbench_c_count_loop(n)
                    }
                }
            };
            (nanoseconds, written)
        }

        /// The C side's span clock and why (`rs_span_clock_describe`).
        pub fn span_clock(&self) -> String {
            // SAFETY: a NUL-terminated static buffer, written by this call.
            unsafe { CStr::from_ptr(rsbench_c_span_clock()) }.to_string_lossy().into_owned()
        }
    }

    impl Drop for CBot {
        fn drop(&mut self) {
            // SAFETY: opened by `open`.
            unsafe { rsbench_c_close() }
        }
    }
}

// MARK: - The driver

const ROWS: [&str; 10] = [
    "histogram record",
    "span (start + record)",
    "gauge set",
    "counter increment",
    "record with exemplar",
    "span on CLOCK_MONOTONIC",
    "record, sampled lane",
    "signed value (f64)",
    "signed steps (i64)",
    "fractional increment",
];
const C_CALLS: [&str; 10] = [
    "rs_bot_record",
    "rs_bot_record_span",
    "rs_bot_set",
    "rs_bot_count",
    "rs_bot_record_checked_exemplar",
    "rs_bot_record_span (monotonic)",
    "rs_bot_record (sampled lane)",
    "rs_bot_record_value (signed)",
    "rs_bot_record_signed",
    "rs_bot_count_value",
];
/// The row of a record with an exemplar ("order_id=A17", 12 bytes: the value and one exemplar
/// record, two slots a call), set against row 0's plain record.
const EXEMPLAR_ROW: usize = 4;
/// The row of a span on CLOCK_MONOTONIC, set against row 1's span on the span clock.
const MONOTONIC_SPAN_ROW: usize = 5;
/// The row of a record into a lane kept full by a consumer that reads gather cells: nearly every
/// call gathered (the sampled path), set against row 0's plain record.
const SAMPLED_ROW: usize = 6;
/// The rows of format 4's values (VALUES in ringside.h): `record_value` of an f64 on a signed
/// histogram of hundredths and `record_signed` of its steps, each set against row 0's plain
/// record, and `increment_value` of 0.37 on a counter of micro-dollars, against row 3's increment.
const VALUE_ROW: usize = 7;
const SIGNED_ROW: usize = 8;
const COUNT_VALUE_ROW: usize = 9;
/// The sampled row's lane: 1,024 records, full once warmed up, never drained.
const SAMPLED_LANE: u64 = 1024;
/// Lane slots a call of each row takes (a counter takes none; the sampled row's calls are
/// gathered, its lane full).
const SLOTS: [u64; 10] = [1, 1, 1, 0, 2, 1, 0, 1, 1, 0];
/// The order rows run in within a round: a record with an exemplar, and one into a sampled lane,
/// right after a plain one, and a span on CLOCK_MONOTONIC right after one on the span clock, so
/// that the ratio of the two in a round sees the machine at one speed; the values' rows likewise.
const RUN_ORDER: [usize; 10] =
    [0, VALUE_ROW, SIGNED_ROW, EXEMPLAR_ROW, SAMPLED_ROW, 1, MONOTONIC_SPAN_ROW, 2, 3, COUNT_VALUE_ROW];

/// The median of `values`, which it leaves in their order (the per-round lines print them).
fn median(values: &[f64]) -> f64 {
    let mut values = values.to_vec();
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn machine() -> String {
    let model = std::process::Command::new("lscpu")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|text| {
            text.lines().find(|l| l.starts_with("Model name:")).map(|l| l["Model name:".len()..].trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU (no lscpu)".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cpus} CPUs available, {}", std::env::consts::ARCH)
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn main() {
    let arguments: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let rounds = arguments.first().copied().unwrap_or(7).max(1) as usize;
    let loops = arguments.get(1).copied().unwrap_or(64).max(1);
    let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let scratch = Scratch(base.join(format!("ringside-rust-bench.{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).unwrap();
    let options = Options { directory: Some(scratch.0.clone()), lane_capacity: Some(LANE), ..Options::default() };
    let bot = Bot::attach_with("bench-rust", options.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert!(bot.is_enabled(), "telemetry is disabled (RINGSIDE_DISABLED is set): unset it to benchmark");
    let histogram = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let counter = bot.counter("orders", &[]).unwrap();
    let gauge = bot.gauge("level", Unit::None, &[]).unwrap();
    let exemplar = Exemplar::new(&[("order_id", "A17")]).unwrap();
    let slippage = bot.metric("slippage_bps").resolution(0.01).signed().histogram(Unit::None).unwrap();
    let commission = bot.metric("commission_usd").resolution(1e-6).counter().unwrap();
    let rust_path = bot.path().unwrap().to_path_buf();
    let rust_span_clock = SpanClock::describe(); // before the rows switch it
    let sampled_options = Options { lane_capacity: Some(SAMPLED_LANE), ..options.clone() };
    let sampled_bot = Bot::attach_with("bench-rust-sampled", sampled_options).unwrap_or_else(|e| panic!("{e}"));
    let sampled = sampled_bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let sampled_path = sampled_bot.path().unwrap().to_path_buf();
    declare_gathering_consumer(&sampled_path);
    let rust_run = |row: usize, n: u64| match row {
        0 => rust_record_loop(&histogram, n),
        1 => rust_span_loop(&histogram, n),
        2 => rust_set_loop(&gauge, n),
        EXEMPLAR_ROW => rust_exemplar_loop(&histogram, &exemplar, n),
        MONOTONIC_SPAN_ROW => rust_span_monotonic_loop(&histogram, n),
        SAMPLED_ROW => rust_record_loop(&sampled, n),
        VALUE_ROW => rust_value_loop(&slippage, n),
        SIGNED_ROW => rust_signed_loop(&slippage, n),
        COUNT_VALUE_ROW => rust_count_value_loop(&commission, n),
        _ => rust_count_loop(&counter, n),
    };

    #[cfg(ringside_c_baseline)]
    let c_bot = match c::CBot::open(&scratch.0, "bench-c", LANE, "bench-c-sampled", SAMPLED_LANE) {
        Ok(bot) => Some(bot),
        Err(why) => {
            eprintln!("the C baseline could not attach: {why}");
            None
        }
    };
    #[cfg(not(ringside_c_baseline))]
    let c_bot: Option<()> = None;
    let c_path = scratch.0.join("ringside.bench-c");
    let c_sampled_path = scratch.0.join("ringside.bench-c-sampled");
    if c_bot.is_some() {
        declare_gathering_consumer(&c_sampled_path);
    }

    // One side's run of a row: `loops` timed loops of a lane's worth of records, drained between.
    let side = |rust: bool, row: usize| -> f64 {
        let path = if rust { &rust_path } else { &c_path };
        let n = LANE / SLOTS[row].max(1);
        let (mut nanoseconds, mut calls) = (0u64, 0u64);
        for _ in 0..loops {
            if row != SAMPLED_ROW {
                drain(path);
            }
            let (ns, written) = if rust {
                rust_run(row, n)
            } else {
                #[cfg(ringside_c_baseline)]
                {
                    c_bot.as_ref().unwrap().run(row, n)
                }
                #[cfg(not(ringside_c_baseline))]
                unreachable!()
            };
            if row == SAMPLED_ROW {
                // Full from the warm-up's first loop on: a record due (1 call in 32,768) is dropped.
                assert!(written <= SAMPLED_LANE, "the sampled lane is never drained");
            } else {
                assert_eq!(written, n, "every call writes: the lane is drained before each loop");
            }
            nanoseconds += ns;
            calls += n;
        }
        nanoseconds as f64 / calls as f64
    };
    let with_c = c_bot.is_some();
    #[cfg(ringside_c_baseline)]
    let c_span_clock = c_bot.as_ref().map_or("-".to_string(), |bot| bot.span_clock());
    #[cfg(not(ringside_c_baseline))]
    let c_span_clock = "-".to_string();
    // Warm up: each thread claims its lane, pages and caches are touched.
    for row in RUN_ORDER {
        side(true, row);
        if with_c {
            side(false, row);
        }
    }
    let mut rust_ns = vec![Vec::new(); ROWS.len()];
    let mut c_ns = vec![Vec::new(); ROWS.len()];
    let mut ratios = vec![Vec::new(); ROWS.len()];
    for round in 0..rounds {
        for row in RUN_ORDER {
            let (r, c) = if !with_c {
                (side(true, row), f64::NAN)
            } else if round % 2 == 0 {
                let c = side(false, row);
                (side(true, row), c)
            } else {
                let r = side(true, row);
                (r, side(false, row))
            };
            rust_ns[row].push(r);
            c_ns[row].push(c);
            ratios[row].push(r / c);
        }
    }

    println!("Ringside producer bench: the Rust crate beside the C header, same process, interleaved");
    println!("machine   {}", machine());
    println!(
        "compilers {} (release profile); C: {}",
        option_env!("RINGSIDE_BENCH_RUSTC").unwrap_or("rustc"),
        option_env!("RINGSIDE_BENCH_CC").unwrap_or("unavailable")
    );
    println!(
        "method    {rounds} rounds; per round and side, each row runs {loops} timed loops of {LANE} calls ({} calls; half \
         as many with an exemplar, two slots a call) into a lane of {LANE} records, drained between loops (outside the \
         timing); medians over the rounds",
        loops * LANE
    );
    println!("span clock Rust: {rust_span_clock}; C: {c_span_clock}");
    if !with_c {
        println!(
            "C baseline unavailable: build.rs needs ../../../Sources/CRingside and a working `cc` (see the build's \
             warnings); Rust figures only"
        );
    }
    println!();
    println!("{:<24} {:<31} {:>10} {:>10} {:>8}", "call", "C call", "C ns", "Rust ns", "Rust/C");
    for row in 0..ROWS.len() {
        let r = median(&rust_ns[row]);
        if with_c {
            let c = median(&c_ns[row]);
            let ratio = median(&ratios[row]);
            println!("{:<24} {:<31} {:>10.2} {:>10.2} {:>8.2}", ROWS[row], C_CALLS[row], c, r, ratio);
        } else {
            println!("{:<24} {:<31} {:>10} {:>10.2} {:>8}", ROWS[row], C_CALLS[row], "-", r, "-");
        }
    }
    // What an exemplar costs: a record with one against a plain record, same side, same round.
    let per_round = |ns: &[Vec<f64>], row: usize, against: usize| -> Vec<f64> {
        ns[row].iter().zip(&ns[against]).map(|(this, that)| this / that).collect()
    };
    let (rust_exemplar, c_exemplar) = (per_round(&rust_ns, EXEMPLAR_ROW, 0), per_round(&c_ns, EXEMPLAR_ROW, 0));
    println!();
    let c_ratio = if with_c { format!("{:.2}", median(&c_exemplar)) } else { "-".into() };
    println!("record with exemplar / record (median per-round ratio): Rust {:.2}, C {c_ratio}", median(&rust_exemplar));
    // What the span clock saves: a span on it against one on CLOCK_MONOTONIC, same side, same round.
    let (rust_sampled, c_sampled) = (per_round(&rust_ns, SAMPLED_ROW, 0), per_round(&c_ns, SAMPLED_ROW, 0));
    let c_ratio = if with_c { format!("{:.2}", median(&c_sampled)) } else { "-".into() };
    println!(
        "record into a sampled lane / record (median per-round ratio): Rust {:.2}, C {c_ratio}",
        median(&rust_sampled)
    );
    for (row, against, what) in [
        (VALUE_ROW, 0, "signed value (f64) / record"),
        (SIGNED_ROW, 0, "signed steps (i64) / record"),
        (COUNT_VALUE_ROW, 3, "fractional increment / increment"),
    ] {
        let (rust, c) = (per_round(&rust_ns, row, against), per_round(&c_ns, row, against));
        let c_ratio = if with_c { format!("{:.2}", median(&c)) } else { "-".into() };
        println!("{what} (median per-round ratio): Rust {:.2}, C {c_ratio}", median(&rust));
    }
    let (rust_span, c_span) = (per_round(&rust_ns, 1, MONOTONIC_SPAN_ROW), per_round(&c_ns, 1, MONOTONIC_SPAN_ROW));
    let c_ratio = if with_c { format!("{:.2}", median(&c_span)) } else { "-".into() };
    println!(
        "span on the span clock / span on CLOCK_MONOTONIC (median per-round ratio): Rust {:.2}, C {c_ratio}",
        median(&rust_span)
    );
    println!();
    for (row, name) in
        [(0, "histogram record"), (EXEMPLAR_ROW, "record with exemplar"), (SAMPLED_ROW, "record, sampled lane")]
    {
        println!("per-round ns/call of {name}:");
        println!("  C    {}", c_ns[row].iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join("  "));
        println!("  Rust {}", rust_ns[row].iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join("  "));
    }
    // A thread's first record: it claims a lane, appending one to the file (the main thread holds
    // lane 0), then, for the next thread, reusing the one the first retired when it ended.
    let first_record = || {
        let histogram = histogram.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            histogram.record(1);
            start.elapsed()
        })
        .join()
        .unwrap()
    };
    let (added, reused) = (first_record(), first_record());
    println!(
        "a thread's first record: {:.0} us when it adds a lane of {LANE} records to the file, {:.0} us when it reuses one",
        added.as_secs_f64() * 1e6,
        reused.as_secs_f64() * 1e6
    );
    let c_dropped = if with_c { dropped(&c_path).to_string() } else { "-".into() };
    println!("records dropped: Rust {}, C {c_dropped}", dropped(&rust_path));
    let c_sampled_dropped = if with_c { dropped(&c_sampled_path).to_string() } else { "-".into() };
    println!(
        "the sampled lanes' calls dropped (1 in 32,768 once full, as a record due finds no room): Rust {}, C {c_sampled_dropped}",
        dropped(&sampled_path)
    );
    if with_c {
        let ratio = median(&ratios[0]);
        let verdict = if ratio <= 1.3 { "met" } else { "NOT met" };
        println!("target: histogram record Rust/C <= 1.30: {verdict} ({ratio:.2})");
    }
}
