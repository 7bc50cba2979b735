//! The span clock (THE SPAN CLOCK in ringside.h): the clock a process chooses (once, from its
//! machine and environment: a process of its own shows RINGSIDE_SPAN_CLOCK's effect), and a span
//! of a known sleep on it, against CLOCK_MONOTONIC around it.

mod common;

use common::{clock_monotonic_ns, machine_has_usable_tsc, RingFile, ScratchDir};
use ringside::{Bot, Options, SpanClock, Unit};
use std::process::Command;
use std::time::Duration;

/// Set in the environment of this test binary run again as a child (the environment's test).
const CHILD: &str = "RINGSIDE_SPAN_CLOCK_TEST_CHILD";

#[test]
fn a_process_times_spans_on_the_tsc_where_it_serves_and_says_why() {
    let described = SpanClock::describe();
    if std::env::var("RINGSIDE_SPAN_CLOCK").is_ok() {
        return; // the environment chose: the next test runs a process with it set
    }
    if machine_has_usable_tsc() {
        assert_eq!(SpanClock::current(), SpanClock::Tsc, "{described}");
        assert!(
            described.starts_with("tsc: invariant TSC, clocksource tsc; ") && described.contains(" GHz, "),
            "{described}"
        );
    } else {
        assert_eq!(SpanClock::current(), SpanClock::Monotonic, "{described}");
        assert!(described.starts_with("monotonic: "), "{described}");
    }
}

#[test]
fn ringside_span_clock_monotonic_keeps_a_process_on_clock_monotonic() {
    if std::env::var_os(CHILD).is_some() {
        // The child: RINGSIDE_SPAN_CLOCK=monotonic in its environment.
        assert_eq!(SpanClock::current(), SpanClock::Monotonic);
        println!("described {}", SpanClock::describe());
        // Switched while it runs: a program's choice beats the environment's, where the TSC serves.
        if SpanClock::select(SpanClock::Tsc) {
            assert_eq!(SpanClock::current(), SpanClock::Tsc);
            println!("selected {}", SpanClock::describe());
        }
        return;
    }
    let me = std::env::current_exe().unwrap();
    let name = "ringside_span_clock_monotonic_keeps_a_process_on_clock_monotonic";
    let child = Command::new(me)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("RINGSIDE_SPAN_CLOCK", "monotonic")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    assert!(child.status.success(), "{out}{}", String::from_utf8_lossy(&child.stderr));
    assert!(out.contains("described monotonic: RINGSIDE_SPAN_CLOCK=monotonic\n"), "{out}");
    if machine_has_usable_tsc() {
        assert!(out.contains("selected tsc: invariant TSC, clocksource tsc (chosen by SpanClock::select); "), "{out}");
    }
}

#[test]
fn a_span_of_a_50_ms_sleep_is_clock_monotonics_time_around_it_and_ends_within_the_bound() {
    let dir = ScratchDir::new("span-clock");
    let bot =
        Bot::attach_with("rs-clock", Options { directory: Some(dir.path.clone()), ..Options::default() }).unwrap();
    let sleep = bot.histogram("sleep_span", Unit::Nanoseconds, &[]).unwrap();
    let outer_start = clock_monotonic_ns();
    let span = sleep.span();
    let inner_start = clock_monotonic_ns();
    std::thread::sleep(Duration::from_millis(50));
    let inner_end = clock_monotonic_ns();
    assert!(span.finish());
    let outer_end = clock_monotonic_ns();

    let records = RingFile::read(&dir.file("rs-clock")).records(0);
    assert_eq!(records.len(), 1, "{records:?}");
    let (inner, outer) = (inner_end - inner_start, outer_end - outer_start);
    let tolerance = outer / 500 + 20_000; // 0.2 %: twice the rate's error in a process's first milliseconds
    let record = records[0];
    assert_eq!(record.flags, 1, "flagged as a span");
    assert!(
        record.value + tolerance >= inner && record.value <= outer + tolerance,
        "a span of {} ns around a sleep of {inner} to {outer} ns by CLOCK_MONOTONIC",
        record.value
    );
    let bound = SpanClock::BOUND_NS;
    assert!(
        record.timestamp_ns + bound >= inner_end && record.timestamp_ns <= outer_end + bound,
        "a span ending at {}, between {inner_end} and {outer_end} by CLOCK_MONOTONIC",
        record.timestamp_ns
    );
}
