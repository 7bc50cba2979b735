//! The span clock (THE SPAN CLOCK in `ringside.h`, and `ringside.c`'s calibration, in Rust): a
//! span's start is a TSC reading where the CPU's TSC is invariant and the kernel keeps time with
//! it, else CLOCK_MONOTONIC; its end converts the TSC to nanoseconds with a multiply and a shift,
//! calibrated against CLOCK_MONOTONIC by anchors taken lazily as spans end, published through a
//! latch (two copies and a count) so that the end only reads. The same rules as C's, to the
//! constant: a process's Rust and C spans agree.

use crate::sys;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64};
use std::sync::{Once, OnceLock};

const UNSET: u32 = 0;
const MONOTONIC: u32 = 1;
const TSC: u32 = 2;

/// Set in a start read on the TSC (`RS_SPAN_TSC_BIT`): the end reads the clock the start did.
const TSC_BIT: u64 = 1 << 63;
/// The widest an anchor's bracket may be, in ns (`RS_SPAN_CLOCK_ANCHOR_MAX_NS`).
const ANCHOR_MAX_NS: u64 = 1000;
/// The longest interval between anchors while spans end (`RS_SPAN_CLOCK_REFRESH_NS`).
const REFRESH_NS: u64 = 1_000_000_000;

/// The clock spans are timed with (THE SPAN CLOCK in `ringside.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanClock {
    /// The TSC, calibrated against CLOCK_MONOTONIC: a span's end is converted to CLOCK_MONOTONIC
    /// nanoseconds within 5 us.
    Tsc,
    /// CLOCK_MONOTONIC: on a machine without a usable TSC, or with `RINGSIDE_SPAN_CLOCK=monotonic`.
    Monotonic,
}

impl SpanClock {
    /// How far a span's end (its record's timestamp) may be from CLOCK_MONOTONIC on the TSC, in
    /// ns (`RS_SPAN_CLOCK_BOUND_NS`; see THE BOUND in `ringside.h`).
    pub const BOUND_NS: u64 = 5000;

    /// The clock this process's spans start on now. The first attach chooses it (and calibrates
    /// the TSC, about a millisecond, once); asked before any, it is chosen now.
    pub fn current() -> SpanClock {
        init();
        if STATE.clock.load(Acquire) == TSC {
            SpanClock::Tsc
        } else {
            SpanClock::Monotonic
        }
    }

    /// The span clock and why it is the one, for an operator's log: "tsc: invariant TSC,
    /// clocksource tsc; 2.4454 GHz, 7 anchors, the last within 30 ns", or "monotonic: the
    /// kernel's clocksource is kvm-clock, not tsc" (C's `rs_span_clock_describe`).
    pub fn describe() -> String {
        let clock = SpanClock::current();
        let selected = SELECTED.load(Relaxed);
        let why = WHY.get().map(String::as_str).unwrap_or("");
        if clock == SpanClock::Monotonic {
            let why = if selected {
                "chosen by SpanClock::select"
            } else if ASKED_MONOTONIC.load(Relaxed) {
                "RINGSIDE_SPAN_CLOCK=monotonic"
            } else {
                why
            };
            return format!("monotonic: {why}");
        }
        let c = calibration();
        let ghz = if c.mult != 0 { 4_294_967_296.0 / c.mult as f64 } else { 0.0 };
        format!(
            "tsc: {why}{}; {ghz:.4} GHz, {} anchors, the last within {} ns",
            if selected { " (chosen by SpanClock::select)" } else { "" },
            c.anchors,
            c.width_ns / 2
        )
    }

    /// Makes spans started from now on read `clock` (spans under way end on the clock they
    /// started on): for tests, benchmarks, and a program that wants CLOCK_MONOTONIC whatever the
    /// environment says (C's `rs_span_clock_select`). False, changing nothing, when asked for the
    /// TSC on a machine whose TSC is not usable.
    pub fn select(clock: SpanClock) -> bool {
        init();
        if clock == SpanClock::Tsc {
            if !TSC_USABLE.load(Relaxed) {
                return false;
            }
            if calibration().mult == 0 {
                // RINGSIDE_SPAN_CLOCK=monotonic left it uncalibrated.
                while !try_busy() {
                    std::thread::yield_now();
                }
                let calibrated = calibration().mult != 0 || calibrate().is_ok();
                release_busy();
                if !calibrated {
                    return false;
                }
            }
        }
        SELECTED.store(true, Relaxed);
        // Release: a span that starts on the TSC finds the calibration published.
        STATE.clock.store(if clock == SpanClock::Tsc { TSC } else { MONOTONIC }, Release);
        true
    }
}

/// One calibration (`rs_tsc_calibration`): an anchor and the rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Calibration {
    /// The anchor: a TSC reading and CLOCK_MONOTONIC in ns at that instant.
    pub tsc: u64,
    pub ns: u64,
    /// ns per tick, times 2^32 (0: not calibrated).
    pub mult: u64,
    /// Ticks after `tsc` past which a span's end takes a new anchor (0: not calibrated).
    pub refresh: u64,
    /// Anchors taken in this process, this one included.
    pub anchors: u64,
    /// This anchor's bracket: its CLOCK_MONOTONIC is within half of it.
    pub width_ns: u64,
}

/// A copy in the latch: the fields of a `Calibration`, each atomic.
struct Slot {
    tsc: AtomicU64,
    ns: AtomicU64,
    mult: AtomicU64,
    refresh: AtomicU64,
    anchors: AtomicU64,
    width_ns: AtomicU64,
}

impl Slot {
    const fn zero() -> Slot {
        Slot {
            tsc: AtomicU64::new(0),
            ns: AtomicU64::new(0),
            mult: AtomicU64::new(0),
            refresh: AtomicU64::new(0),
            anchors: AtomicU64::new(0),
            width_ns: AtomicU64::new(0),
        }
    }

    fn load(&self) -> Calibration {
        Calibration {
            tsc: self.tsc.load(Relaxed),
            ns: self.ns.load(Relaxed),
            mult: self.mult.load(Relaxed),
            refresh: self.refresh.load(Relaxed),
            anchors: self.anchors.load(Relaxed),
            width_ns: self.width_ns.load(Relaxed),
        }
    }

    fn store(&self, c: &Calibration) {
        self.tsc.store(c.tsc, Relaxed);
        self.ns.store(c.ns, Relaxed);
        self.mult.store(c.mult, Relaxed);
        self.refresh.store(c.refresh, Relaxed);
        self.anchors.store(c.anchors, Relaxed);
        self.width_ns.store(c.width_ns, Relaxed);
    }
}

/// What every span reads (`rs_span_clock_state`), on lines of its own.
#[repr(C, align(128))]
struct State {
    /// UNSET, MONOTONIC or TSC: what a span's start reads.
    clock: AtomicU32,
    /// The latch's count: readers use `copy[sequence & 1]`.
    sequence: AtomicU32,
    copy: [Slot; 2],
}

impl State {
    const fn new() -> State {
        State { clock: AtomicU32::new(UNSET), sequence: AtomicU32::new(0), copy: [Slot::zero(), Slot::zero()] }
    }

    /// A consistent copy of the calibration (zeros before the first).
    fn calibration(&self) -> Calibration {
        loop {
            // Acquire, then an acquire fence before reading the count again: the latch's reader.
            let sequence = self.sequence.load(Acquire);
            let c = self.copy[(sequence & 1) as usize].load();
            fence(Acquire);
            if sequence == self.sequence.load(Relaxed) {
                return c;
            }
        }
    }

    /// Publishes `next` through the latch: readers move to the other copy before each copy
    /// changes. The caller is the one writer (it holds BUSY).
    fn publish(&self, next: &Calibration) {
        let mut sequence = self.sequence.load(Relaxed); // only the writer stores it
        for _ in 0..2 {
            sequence = sequence.wrapping_add(1);
            // Release: the last copy written is whole before readers are sent to it.
            self.sequence.store(sequence, Release);
            // Release fence: the count moves before this copy's stores.
            fence(Release);
            self.copy[(sequence.wrapping_add(1) & 1) as usize].store(next);
        }
    }
}

static STATE: State = State::new();

/// The writer's flag, apart from what spans read: true while a thread takes an anchor.
#[repr(align(128))]
struct Busy(AtomicBool);
static BUSY: Busy = Busy(AtomicBool::new(false));

static INIT: Once = Once::new();
static TSC_USABLE: AtomicBool = AtomicBool::new(false);
static ASKED_MONOTONIC: AtomicBool = AtomicBool::new(false);
static SELECTED: AtomicBool = AtomicBool::new(false);
/// Why the TSC is usable, or is not.
static WHY: OnceLock<String> = OnceLock::new();

/// TSC ticks in ns at `mult`: one 64 by 64 multiply and a shift.
#[inline(always)]
fn tsc_to_ns(ticks: u64, mult: u64) -> u64 {
    ((ticks as u128 * mult as u128) >> 32) as u64
}

fn ns_to_tsc(ns: u64, mult: u64) -> u64 {
    (((ns as u128) << 32) / mult as u128) as u64
}

/// A span's start (`rs_span_clock_start`): the TSC with TSC_BIT, or CLOCK_MONOTONIC in ns.
#[inline(always)]
pub(crate) fn start() -> u64 {
    // Relaxed: a start on the TSC needs no calibration, and its end finds it (the latch).
    let clock = STATE.clock.load(Relaxed);
    #[cfg(target_arch = "x86_64")]
    if clock == TSC {
        return sys::tsc() | TSC_BIT;
    }
    if clock == MONOTONIC {
        return sys::clock_precise_ns();
    }
    start_slow()
}

#[cold]
#[inline(never)]
fn start_slow() -> u64 {
    if SpanClock::current() == SpanClock::Tsc {
        sys::tsc() | TSC_BIT
    } else {
        sys::clock_precise_ns()
    }
}

/// The end of the span begun at `start` (`rs_span_clock_end`): its duration in ns and its end in
/// CLOCK_MONOTONIC ns, on the clock the start was read on. On the TSC it only reads.
#[inline(always)]
pub(crate) fn end(start: u64) -> (u64, u64) {
    #[cfg(target_arch = "x86_64")]
    if start & TSC_BIT != 0 {
        let now = sys::tsc();
        // Acquire: the copy the count names was whole when the count was stored.
        let sequence = STATE.sequence.load(Acquire);
        let copy = &STATE.copy[(sequence & 1) as usize];
        let (tsc, ns) = (copy.tsc.load(Relaxed), copy.ns.load(Relaxed));
        let (mult, refresh) = (copy.mult.load(Relaxed), copy.refresh.load(Relaxed));
        fence(Acquire); // the copy is read before the count is read again
        let since = now.wrapping_sub(tsc); // past `refresh` also when the anchor is later than `now`
        if since < refresh && sequence == STATE.sequence.load(Relaxed) {
            let begun = start & !TSC_BIT;
            let elapsed = if now > begun { tsc_to_ns(now - begun, mult) } else { 0 };
            return (elapsed, ns + tsc_to_ns(since, mult));
        }
        return end_slow(start, now);
    }
    let end = sys::clock_precise_ns();
    (end.saturating_sub(start), end)
}

/// The end when the calibration is due a new anchor, or the latch moved while it read.
#[cold]
#[inline(never)]
fn end_slow(start: u64, now: u64) -> (u64, u64) {
    let mut c = calibration();
    if c.mult == 0 {
        // A start on the TSC before any calibration: one made up by its caller.
        init();
        c = calibration();
        if c.mult == 0 {
            return (0, sys::clock_precise_ns());
        }
    }
    if now.wrapping_sub(c.tsc) as i64 >= c.refresh as i64 {
        refresh(now);
        c = calibration();
    }
    let begun = start & !TSC_BIT;
    let elapsed = if now > begun { tsc_to_ns(now - begun, c.mult) } else { 0 };
    let end = if now >= c.tsc { c.ns + tsc_to_ns(now - c.tsc, c.mult) } else { c.ns - tsc_to_ns(c.tsc - now, c.mult) };
    (elapsed, end)
}

/// A consistent copy of the process's calibration (zeros before the first).
pub(crate) fn calibration() -> Calibration {
    STATE.calibration()
}

fn try_busy() -> bool {
    // Acquire: the last writer's stores are visible to this one.
    !BUSY.0.load(Relaxed) && BUSY.0.compare_exchange(false, true, Acquire, Relaxed).is_ok()
}

fn release_busy() {
    // Release: this writer's stores are visible to the next.
    BUSY.0.store(false, Release);
}

/// An anchor: a TSC reading, CLOCK_MONOTONIC then, and the bracket's width.
#[derive(Clone, Copy)]
struct Anchor {
    tsc: u64,
    ns: u64,
    width: u64,
}

/// The narrowest of `tries` brackets, each a TSC read between two CLOCK_MONOTONIC reads.
fn anchor(tries: u32) -> Anchor {
    let mut best = Anchor { tsc: 0, ns: 0, width: u64::MAX };
    for _ in 0..tries {
        let before = sys::clock_precise_ns();
        let tsc = sys::tsc_ordered();
        let after = sys::clock_precise_ns();
        if after >= before && after - before < best.width {
            best = Anchor { tsc, ns: before + (after - before) / 2, width: after - before };
        }
    }
    best
}

/// An anchor within ANCHOR_MAX_NS, up to `rounds` rounds of `tries` brackets; None if none was.
fn narrow_anchor(rounds: u32, tries: u32) -> Option<Anchor> {
    (0..rounds).map(|_| anchor(tries)).find(|a| a.width <= ANCHOR_MAX_NS)
}

/// The calibration after `c` with the new anchor `a`: the rate over the interval between them
/// (unless more than 1 % from the last: the machine slept, or the TSC was reset), and a refresh 4
/// intervals on (at most REFRESH_NS).
fn next(c: &Calibration, a: Anchor) -> Calibration {
    let mut next = Calibration { tsc: a.tsc, ns: a.ns, width_ns: a.width, anchors: c.anchors + 1, ..*c };
    if a.tsc > c.tsc && a.ns > c.ns {
        let ticks = a.tsc - c.tsc;
        let mult = (((a.ns - c.ns) as u128) << 32) / ticks as u128;
        let drift = c.mult as u128 / 100;
        if mult != 0 && (c.mult == 0 || (mult + drift >= c.mult as u128 && mult <= c.mult as u128 + drift)) {
            next.mult = mult as u64;
        }
        let most = ns_to_tsc(REFRESH_NS, next.mult);
        next.refresh = if ticks < most / 4 { 4 * ticks } else { most };
    } else {
        // The TSC or the clock went back (a reset TSC): anchor again within a millisecond.
        next.refresh = if next.mult != 0 { ns_to_tsc(1_000_000, next.mult) } else { 0 };
    }
    next
}

/// The first calibration: two anchors a millisecond apart (or more). The caller holds BUSY.
fn calibrate() -> Result<(), String> {
    let Some(first) = narrow_anchor(64, 16) else {
        return Err(format!("no anchor of the TSC to CLOCK_MONOTONIC within {ANCHOR_MAX_NS} ns in 64 tries"));
    };
    while sys::clock_precise_ns() - first.ns < 1_000_000 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let second = narrow_anchor(64, 16);
    let zero =
        Calibration { tsc: first.tsc, ns: first.ns, anchors: 1, width_ns: first.width, ..Calibration::default() };
    // 0.1 to 100 GHz, else no TSC of this world: mult is ns per tick times 2^32.
    match second.map(|second| next(&zero, second)) {
        Some(calibrated) if ((1 << 32) / 100..=(1 << 32) * 10).contains(&calibrated.mult) => {
            STATE.publish(&calibrated);
            Ok(())
        }
        _ => Err("the TSC's rate against CLOCK_MONOTONIC could not be measured".into()),
    }
}

/// Ok if the TSC may time spans, else why not.
fn check_tsc() -> Result<(), String> {
    if !cfg!(target_arch = "x86_64") {
        return Err("not x86-64 (no TSC)".into());
    }
    if !sys::has_invariant_tsc() {
        return Err("the CPU has no invariant TSC (CPUID 0x80000007 EDX bit 8)".into());
    }
    let path = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    let source = std::fs::read_to_string(path).map_err(|e| format!("{path} is unreadable: {e}"))?;
    let source = source.trim_end_matches('\n');
    if source != "tsc" {
        return Err(format!("the kernel's clocksource is {source}, not tsc"));
    }
    if sys::tsc() >= 1 << 62 {
        return Err("the TSC reads past 2^62".into());
    }
    Ok(())
}

fn choose() {
    let mut usable = check_tsc();
    let asked = std::env::var("RINGSIDE_SPAN_CLOCK").ok();
    let wanted = asked.as_deref() != Some("monotonic");
    if let Some(other) = asked.as_deref().filter(|a| !["", "auto", "tsc", "monotonic"].contains(a)) {
        eprintln!("ringside: RINGSIDE_SPAN_CLOCK={other} is none of auto, tsc, monotonic: taken as auto");
    }
    if usable.is_ok() && wanted {
        try_busy(); // no other writer before the clock is chosen: it is free
        usable = calibrate();
        release_busy();
    }
    if let (Some("tsc"), Err(why)) = (asked.as_deref(), &usable) {
        eprintln!("ringside: RINGSIDE_SPAN_CLOCK=tsc, but {why}: spans use CLOCK_MONOTONIC");
    }
    TSC_USABLE.store(usable.is_ok(), Relaxed);
    ASKED_MONOTONIC.store(!wanted, Relaxed);
    let _ = WHY.set(usable.clone().err().unwrap_or_else(|| "invariant TSC, clocksource tsc".into()));
    // Release: a span that starts on the TSC finds the calibration published above.
    STATE.clock.store(if usable.is_ok() && wanted { TSC } else { MONOTONIC }, Release);
}

/// Chooses the span clock and calibrates the TSC if it is chosen, once a process
/// (`rs_span_clock_init`): attach calls it.
pub(crate) fn init() {
    INIT.call_once(choose);
}

/// Takes a new anchor if the calibration is still due one, unless another thread is at it.
fn refresh(now: u64) {
    if !try_busy() {
        return;
    }
    let c = calibration();
    // Signed: an anchor later than `now` (another thread's, just taken) is not due.
    if c.mult != 0 && now.wrapping_sub(c.tsc) as i64 >= c.refresh as i64 {
        // About 0.5 us, once a second; none narrow enough (preempted): the next span's end tries.
        if let Some(anchor) = narrow_anchor(1, 8) {
            STATE.publish(&next(&c, anchor));
        }
    }
    release_busy();
}

/// In a fork() child (bot.rs's handler): a publish the fork cut short is finished from the copy
/// readers use, so the child's first writer starts from a whole latch. Atomic loads and stores
/// only: the child has this one thread.
pub(crate) fn after_fork_in_child() {
    if !BUSY.0.load(Relaxed) {
        return;
    }
    let sequence = STATE.sequence.load(Relaxed);
    let whole = STATE.copy[(sequence & 1) as usize].load();
    STATE.copy[((sequence & 1) ^ 1) as usize].store(&whole);
    if sequence & 1 != 0 {
        STATE.sequence.store(sequence.wrapping_add(1), Relaxed);
    }
    BUSY.0.store(false, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has_usable_tsc() -> bool {
        init();
        TSC_USABLE.load(Relaxed)
    }

    #[test]
    fn a_span_ends_on_the_clock_it_started_on() {
        let monotonic = sys::clock_precise_ns();
        let started = if has_usable_tsc() { sys::tsc() | TSC_BIT } else { sys::clock_precise_ns() };
        std::thread::sleep(std::time::Duration::from_millis(5));
        let before = sys::clock_precise_ns();
        let (elapsed, end_ns) = end(started);
        let (elapsed_monotonic, end_monotonic) = end(monotonic);
        let after = sys::clock_precise_ns();
        assert!(elapsed_monotonic >= before - monotonic && elapsed_monotonic <= after - monotonic);
        assert!(end_monotonic >= before && end_monotonic <= after);
        assert!(
            elapsed >= 5_000_000 - 10_000 && elapsed <= elapsed_monotonic + 10_000,
            "{elapsed} {elapsed_monotonic}"
        );
        let bound = SpanClock::BOUND_NS;
        assert!(end_ns + bound >= before && end_ns <= after + bound, "{end_ns} [{before}, {after}]");
        assert_eq!(end(sys::clock_precise_ns() + 1_000_000_000).0, 0, "a start from the future lasted 0");
    }

    #[test]
    fn the_tsc_converted_stays_within_the_bound_of_clock_monotonic_for_ten_seconds() {
        if !has_usable_tsc() {
            return;
        }
        let first = calibration();
        let (began, bound) = (sys::clock_precise_ns(), SpanClock::BOUND_NS);
        let (mut samples, mut worst) = (0u64, 0u64);
        while sys::clock_precise_ns() - began < 10_000_000_000 {
            // Each sample is a span's end: the first one past the refresh anchors again.
            let before = sys::clock_precise_ns();
            let (_, converted) = end(sys::tsc() | TSC_BIT);
            let after = sys::clock_precise_ns();
            let error = before.saturating_sub(converted).max(converted.saturating_sub(after));
            assert!(error <= bound, "{converted} against [{before}, {after}]: {}", SpanClock::describe());
            worst = worst.max(error);
            samples += 1;
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let anchors = calibration().anchors - first.anchors;
        assert!(samples > 200 && (5..=20).contains(&anchors), "{samples} samples, {anchors} anchors");
        println!(
            "{samples} samples over 10 s, the furthest {worst} ns from CLOCK_MONOTONIC; {}",
            SpanClock::describe()
        );
    }

    #[test]
    fn the_latch_gives_a_whole_copy_while_a_writer_publishes() {
        // A latch of the test's own (the process's serves the other tests' spans): readers see
        // whole calibrations, each field from one publish, while this thread publishes.
        let state = State::new();
        let (reading, stop) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|scope| {
            let reader = scope.spawn(|| {
                let mut reads = 0u64;
                while !stop.load(Relaxed) {
                    let c = state.calibration();
                    let k = c.anchors;
                    assert!(c.tsc == k && c.ns == 2 * k && c.mult == 3 * k && c.refresh == 4 * k, "torn: {c:?}");
                    reads += 1;
                    reading.store(true, Relaxed);
                }
                reads
            });
            while !reading.load(Relaxed) {
                std::thread::yield_now();
            }
            for k in 1..200_000u64 {
                state.publish(&Calibration { tsc: k, ns: 2 * k, mult: 3 * k, refresh: 4 * k, anchors: k, width_ns: 0 });
            }
            stop.store(true, Relaxed);
            assert!(reader.join().unwrap() > 0);
        });
        assert_eq!(state.calibration().anchors, 199_999);
    }

    #[test]
    fn a_new_anchor_takes_the_rate_of_its_interval_unless_it_moved_by_more_than_1_percent() {
        let c = Calibration { tsc: 1_000, ns: 5_000, mult: 1 << 31, refresh: 1, anchors: 3, width_ns: 40 };
        // 2 ticks a ns over a million ns: the same rate, the interval's refresh 4 times as long.
        let n = next(&c, Anchor { tsc: 2_001_000, ns: 1_005_000, width: 30 });
        assert_eq!((n.tsc, n.ns, n.mult, n.anchors, n.width_ns), (2_001_000, 1_005_000, 1 << 31, 4, 30));
        assert_eq!(n.refresh, 8_000_000);
        // 0.5 % faster: taken. 2 % faster: the machine slept; the rate stays.
        let faster = next(&c, Anchor { tsc: 2_001_000, ns: 1_010_000, width: 30 });
        assert_eq!(faster.mult, ((1_005_000u128 << 32) / 2_000_000) as u64);
        assert_eq!(next(&c, Anchor { tsc: 2_001_000, ns: 1_025_000, width: 30 }).mult, 1 << 31);
        // A TSC that went back: anchored, the rate kept, a new anchor due within a millisecond.
        let back = next(&c, Anchor { tsc: 500, ns: 6_000, width: 30 });
        assert_eq!((back.tsc, back.mult, back.refresh), (500, 1 << 31, 2_000_000));
        // Long intervals refresh after a second at most.
        let long = next(&c, Anchor { tsc: 10_000_001_000, ns: 5_000_005_000, width: 30 });
        assert_eq!(long.refresh, 2_000_000_000);
    }
}
