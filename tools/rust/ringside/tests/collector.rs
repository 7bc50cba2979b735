//! A Rust bot read by the real collector: records, counters, gauges, spans, drops, labels and
//! help, lanes handed from thread to thread. Each test has its own directory and collector.

mod common;

use common::{thread_id, Collector, RingFile, ScratchDir};
use ringside::{Bot, Counter, Histogram, Options, Unit};
use std::cell::RefCell;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

fn options(dir: &ScratchDir) -> Options {
    Options { directory: Some(dir.path.clone()), ..Options::default() }
}

fn expect(what: &str, value: f64, expected: f64) -> Result<(), String> {
    if common::approx(value, expected) {
        Ok(())
    } else {
        Err(format!("{what} is {value}, expecting {expected}"))
    }
}

#[test]
fn records_from_one_thread_decode_exactly() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("one-thread");
    let bot = Bot::attach_with("rs-one", options(&dir)).unwrap();
    let fill = bot.histogram("fill_latency", Unit::Microseconds, &[("symbol", "AAPL")]).unwrap();
    let collector = Collector::start(&binary, &dir);
    for value in 1..=1000u64 {
        assert!(fill.record(value), "record {value} was not written");
    }
    let series = collector.wait_for("1000 records of fill_latency", |latest| {
        let series = latest.series("rs-one", "fill_latency")?;
        expect("total_count", series.num("total_count")?, 1000.0)?;
        Ok(series.clone())
    });
    assert_eq!(series.num("total_sum").unwrap(), 500_500.0);
    assert_eq!(series.num("dropped_records").unwrap(), 0.0);
    assert_eq!(series.num("windows.1m.min").unwrap(), 1.0);
    assert_eq!(series.num("windows.1m.max").unwrap(), 1000.0);
    assert_eq!(series.num("windows.1m.count").unwrap(), 1000.0);
    assert_eq!(series.at("unit").and_then(|u| u.str()), Some("us"));
    assert_eq!(series.at("kind").and_then(|u| u.str()), Some("histogram"));
    assert_eq!(series.at("labels.symbol").and_then(|u| u.str()), Some("AAPL"));
    let metrics = collector.get("/metrics").unwrap();
    assert!(
        metrics.contains("fill_latency_seconds_count{ring=\"rs-one\",symbol=\"AAPL\"} 1000\n"),
        "/metrics:\n{metrics}"
    );
    // The producer is alive and holds one lane.
    let ring = collector.latest().unwrap().ring("rs-one").unwrap().clone();
    assert_eq!(ring.at("alive"), Some(&common::Json::Bool(true)));
    assert_eq!(ring.num("producer_pid").unwrap(), std::process::id() as f64);
    assert_eq!(bot.lanes_allocated(), 1);
}

#[test]
fn eight_threads_every_record_drained_or_counted_dropped() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("eight-threads");
    // Small lanes, so that they fill while the collector drains: they sample, gathering calls in
    // their gather cells (SAMPLING AND GATHERING in ringside.h), and may drop some.
    let bot = Bot::attach_with("rs-eight", Options { lane_capacity: Some(1024), ..options(&dir) }).unwrap();
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let collector = Collector::start(&binary, &dir);
    const THREADS: u64 = 8;
    const N: u64 = 50_000;
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (latency, orders) = (latency.clone(), orders.clone());
            thread::spawn(move || {
                let mut written = 0u64;
                for i in 0..N {
                    written += latency.record(t * N + i + 1) as u64;
                    orders.increment(1);
                }
                written
            })
        })
        .collect();
    let written: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(written > 0);
    eprintln!("{written} of {} calls written as they came, the rest sampled or dropped", THREADS * N);
    collector.wait_for("every call counted: written, gathered or dropped", |latest| {
        let orders = latest.series("rs-eight", "orders")?;
        expect("orders total", orders.num("total")?, (THREADS * N) as f64)?;
        let latency = latest.series("rs-eight", "latency")?;
        let count = latency.num("total_count")?;
        let dropped = latency.num("dropped_records")?;
        expect("count + dropped", count + dropped, (THREADS * N) as f64)?;
        // The values 1 to T*N, each counted once: in the sum of those counted or of those dropped.
        let total = (THREADS * N) as f64;
        expect(
            "sum + dropped sum",
            latency.num("total_sum")? + latency.num("dropped_sum")?,
            total * (total + 1.0) / 2.0,
        )?;
        expect("the largest", latency.num("total_max")?.max(latency.num("dropped_max")?), total)?;
        // Each record drained is one call; the calls gathered are counted from the gather cells.
        let ring = latest.ring("rs-eight")?;
        expect("records drained + gathered", ring.num("drained_total")? + ring.num("sampled_total")?, count)
    });
    let lanes = bot.lanes_allocated();
    assert!((1..=THREADS as u32).contains(&lanes), "{lanes} lanes");
    // Every thread has exited: every lane is retired.
    let file = RingFile::read(&dir.file("rs-eight"));
    for lane in 0..file.lanes_allocated() {
        assert_eq!(file.lane(lane).state, 2, "lane {lane}");
    }
}

#[test]
fn a_span_records_in_the_unit_flagged_and_stamped_with_its_end() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("span");
    let bot = Bot::attach_with("rs-span", options(&dir)).unwrap();
    let step_ms = bot.histogram("step_ms", Unit::Milliseconds, &[]).unwrap();
    let step_us = bot.histogram("step_us", Unit::Microseconds, &[]).unwrap();
    {
        let _span = step_ms.span();
        thread::sleep(Duration::from_millis(25));
    }
    let span = step_us.span();
    thread::sleep(Duration::from_millis(2));
    assert!(span.finish());
    assert!(step_us.record_duration(Duration::from_micros(1500)));
    step_us.span().cancel(); // records nothing

    let file = RingFile::read(&dir.file("rs-span"));
    let records = file.records(0);
    assert_eq!(records.len(), 3, "{records:?}");
    let (ms, us, plain) = (records[0], records[1], records[2]);
    assert_eq!((ms.metric, ms.kind, ms.flags), (0, 3, 1));
    assert!((25..1000).contains(&ms.value), "a 25 ms span recorded as {} ms", ms.value);
    assert_eq!((us.metric, us.kind, us.flags), (1, 3, 1));
    assert!((2000..1_000_000).contains(&us.value), "a 2 ms span recorded as {} us", us.value);
    // Stamped with its end, measured with the precise clock: after the first span's end plus the
    // sleep of the second.
    assert!(us.timestamp_ns >= ms.timestamp_ns + 2_000_000, "{ms:?} then {us:?}");
    assert_eq!((plain.metric, plain.kind, plain.flags, plain.value), (1, 3, 0, 1500));
    assert_eq!(records.iter().map(|r| r.sequence).collect::<Vec<_>>(), vec![0, 1, 2]);

    let collector = Collector::start(&binary, &dir);
    collector.wait_for("the spans", |latest| {
        let ms = latest.series("rs-span", "step_ms")?;
        expect("step_ms count", ms.num("total_count")?, 1.0)?;
        if ms.at("unit").and_then(|u| u.str()) != Some("ms") {
            return Err("step_ms is not in ms".into());
        }
        let min = ms.num("windows.1m.min")?;
        if !(25.0..1000.0).contains(&min) {
            return Err(format!("step_ms min {min}"));
        }
        let us = latest.series("rs-span", "step_us")?;
        expect("step_us count", us.num("total_count")?, 2.0)?;
        expect("step_us min", us.num("windows.1m.min")?, 1500.0)
    });
}

#[test]
fn gauges_keep_the_last_value_and_their_window() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("gauges");
    let bot = Bot::attach_with("rs-gauge", options(&dir)).unwrap();
    let exposure = bot.gauge("gross_exposure", Unit::None, &[("book", "main")]).unwrap();
    let collector = Collector::start(&binary, &dir);
    assert!(exposure.set(5.0));
    let other = exposure.clone();
    thread::spawn(move || {
        assert!(other.set(1.0));
        assert!(other.set(9.0));
    })
    .join()
    .unwrap();
    assert!(exposure.set(2.5));
    collector.wait_for("the gauge", |latest| {
        let gauge = latest.series("rs-gauge", "gross_exposure")?;
        expect("value", gauge.num("value")?, 2.5)?;
        expect("1m min", gauge.num("windows.1m.min")?, 1.0)?;
        expect("1m max", gauge.num("windows.1m.max")?, 9.0)
    });
    let metrics = collector.get("/metrics").unwrap();
    assert!(metrics.contains("gross_exposure{ring=\"rs-gauge\",book=\"main\"} 2.5\n"), "/metrics:\n{metrics}");
    let (bits, set, unlaned) = RingFile::read(&dir.file("rs-gauge")).metric_cell(0);
    assert_eq!((f64::from_bits(bits), set, unlaned), (2.5, 1, 0));
}

#[test]
fn a_full_lane_drops_and_counts_and_counters_stay_exact() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("full-lane");
    let bot = Bot::attach_with("rs-full", Options { lane_capacity: Some(16), ..options(&dir) }).unwrap();
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let level = bot.gauge("level", Unit::None, &[]).unwrap();
    // No collector yet: nothing drains, so the lane fills after 16 records.
    let written = (0..100u64).filter(|&v| latency.record(v)).count();
    assert_eq!(written, 16);
    for _ in 0..100 {
        orders.increment(1);
    }
    assert!(!level.set(7.5), "the lane is full: the gauge's record drops, its value stays");
    let file = RingFile::read(&dir.file("rs-full"));
    let lane = file.lane(0);
    assert_eq!((lane.write_cursor, lane.dropped_total), (16, 85));
    assert_eq!(lane.cell_writes, 100, "each increment moves the word the collector watches (CELLS in ringside.h)");
    assert_eq!((file.lane_cell(0, 0), file.lane_cell(0, 1), file.lane_cell(0, 2)), (84, 100, 1));

    let collector = Collector::start(&binary, &dir);
    collector.wait_for("16 records drained, 84 dropped", |latest| {
        let latency = latest.series("rs-full", "latency")?;
        expect("total_count", latency.num("total_count")?, 16.0)?;
        expect("dropped_records", latency.num("dropped_records")?, 84.0)?;
        expect("total_sum", latency.num("total_sum")?, (0..16).sum::<u64>() as f64)?;
        expect("orders", latest.series("rs-full", "orders")?.num("total")?, 100.0)?;
        expect("level", latest.series("rs-full", "level")?.num("value")?, 7.5)?;
        expect("ring dropped_total", latest.ring("rs-full")?.num("dropped_total")?, 85.0)
    });
    // Drained: the lane takes records again.
    assert!(latency.record(1000));
}

#[test]
fn the_registry_reaches_the_collector_with_labels_and_help() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("registry");
    let bot = Bot::attach_with("rs-registry", options(&dir)).unwrap();
    let fill = bot
        .metric("order_fill_latency")
        .label("symbol", "AAPL")
        .label("side", "buy")
        .help("Order to fill")
        .histogram(Unit::Microseconds)
        .unwrap();
    let orders = bot.metric("orders").labels(&[("venue", "XNAS")]).help("Orders sent").counter().unwrap();
    let orders_arca = bot.counter("orders", &[("venue", "ARCA")]).unwrap();
    // (name, labels) identifies a metric: registering it again finds it.
    let again =
        bot.histogram("order_fill_latency", Unit::Microseconds, &[("side", "buy"), ("symbol", "AAPL")]).unwrap();
    assert_eq!((fill.index(), orders.index(), orders_arca.index(), again.index()), (0, 1, 2, 0));
    assert_eq!(bot.metric_count(), 3);
    fill.record(42);
    again.record(58);
    orders.increment(3);
    orders_arca.increment(4);
    let collector = Collector::start(&binary, &dir);
    collector.wait_for("the registry", |latest| {
        let fill = latest.series("rs-registry", "order_fill_latency")?;
        expect("fill count", fill.num("total_count")?, 2.0)?;
        if fill.at("help").and_then(|h| h.str()) != Some("Order to fill") {
            return Err("no help".into());
        }
        if fill.at("labels.side").and_then(|h| h.str()) != Some("buy") {
            return Err("no label side".into());
        }
        Ok(())
    });
    let metrics = collector.get("/metrics").unwrap();
    for line in [
        "# HELP order_fill_latency_seconds Order to fill\n",
        "order_fill_latency_seconds_count{ring=\"rs-registry\",side=\"buy\",symbol=\"AAPL\"} 2\n",
        "# HELP orders_total Orders sent\n",
        "orders_total{ring=\"rs-registry\",venue=\"XNAS\"} 3\n",
        "orders_total{ring=\"rs-registry\",venue=\"ARCA\"} 4\n",
    ] {
        assert!(metrics.contains(line), "/metrics lacks {line:?}:\n{metrics}");
    }
}

#[test]
fn a_thread_exit_retires_its_lane_and_the_next_thread_reuses_it() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("lane-reuse");
    let bot = Bot::attach_with("rs-reuse", options(&dir)).unwrap();
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let collector = Collector::start(&binary, &dir);

    let first = latency.clone();
    let tid_a = thread::spawn(move || {
        assert!(first.record(1));
        thread_id()
    })
    .join()
    .unwrap();
    let file = RingFile::read(&dir.file("rs-reuse"));
    assert_eq!(file.lanes_allocated(), 1);
    let lane = file.lane(0);
    assert_eq!((lane.state, lane.owner_tid, lane.claims), (2, 0, 1), "retired when thread {tid_a} ended");
    collector.wait_for("lane 0 retired", |latest| {
        let lanes = latest.ring("rs-reuse")?.get("lanes").map(|l| l.array().to_vec()).unwrap_or_default();
        match lanes.as_slice() {
            [lane] if lane.at("state").and_then(|s| s.str()) == Some("retired") => Ok(()),
            _ => Err(format!("lanes {lanes:?}")),
        }
    });

    let second = latency.clone();
    let (recorded, wait) = (mpsc::channel(), mpsc::channel::<()>());
    let (recorded_sender, recorded_receiver) = recorded;
    let (done_sender, done_receiver) = wait;
    let b = thread::spawn(move || {
        assert!(second.record(2));
        recorded_sender.send(thread_id()).unwrap();
        done_receiver.recv().unwrap(); // hold the lane while the collector looks
    });
    let tid_b = recorded_receiver.recv().unwrap();
    let file = RingFile::read(&dir.file("rs-reuse"));
    assert_eq!(file.lanes_allocated(), 1, "the second thread reuses lane 0");
    let lane = file.lane(0);
    assert_eq!((lane.state, lane.owner_tid, lane.claims, lane.write_cursor), (1, tid_b, 2, 2));
    collector.wait_for("lane 0 active, held by the second thread", |latest| {
        let ring = latest.ring("rs-reuse")?;
        let lanes = ring.get("lanes").map(|l| l.array().to_vec()).unwrap_or_default();
        match lanes.as_slice() {
            [lane]
                if lane.at("state").and_then(|s| s.str()) == Some("active")
                    && lane.num("thread_id")? == tid_b as f64 =>
            {
                Ok(())
            }
            _ => Err(format!("lanes {lanes:?}")),
        }
    });
    done_sender.send(()).unwrap();
    b.join().unwrap();
    assert_eq!(RingFile::read(&dir.file("rs-reuse")).lane(0).state, 2);
    collector.wait_for("both records", |latest| {
        expect("count", latest.series("rs-reuse", "latency")?.num("total_count")?, 2.0)
    });
    assert_eq!(bot.lanes_allocated(), 1);
}

/// What a user's thread-local may hold: handles that record when the thread ends.
struct RecordsOnDrop(Histogram, Counter);

impl Drop for RecordsOnDrop {
    fn drop(&mut self) {
        self.0.record(7); // no assertion here: a panic in a thread-local's destructor aborts
        self.1.increment(1);
    }
}

thread_local! {
    static AT_EXIT: RefCell<Option<RecordsOnDrop>> = const { RefCell::new(None) };
}

#[test]
fn records_from_a_thread_locals_destructor_reach_a_lane() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("tls-exit");
    let bot = Bot::attach_with("rs-tls-exit", options(&dir)).unwrap();
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();

    // The thread-local is made before the thread's first record, so it is destroyed after
    // everything the crate set up at that record: its records come after the crate's exit hook.
    let (histogram, counter) = (latency.clone(), orders.clone());
    thread::spawn(move || {
        AT_EXIT.with(|at_exit| *at_exit.borrow_mut() = Some(RecordsOnDrop(histogram.clone(), counter)));
        assert!(histogram.record(1));
    })
    .join()
    .unwrap();
    let file = RingFile::read(&dir.file("rs-tls-exit"));
    assert_eq!(file.lanes_allocated(), 1);
    let lane = file.lane(0);
    assert_eq!(lane.write_cursor, 2, "the destructor's record is in the lane");
    assert_eq!((lane.state, lane.owner_tid), (2, 0), "the lane is retired after the destructor's record");
    assert_eq!(file.metric_cell(0).2, 0, "no record counted as dropped for want of a lane");
    assert_eq!((file.lane_cell(0, 1), file.metric_cell(1).2), (1, 0), "the increment is in the lane's cell");

    // A thread whose only records are its thread-local's, at its exit: it claims a lane then,
    // and the lane is retired after them.
    let (histogram, counter) = (latency.clone(), orders.clone());
    thread::spawn(move || AT_EXIT.with(|at_exit| *at_exit.borrow_mut() = Some(RecordsOnDrop(histogram, counter))))
        .join()
        .unwrap();
    let file = RingFile::read(&dir.file("rs-tls-exit"));
    assert_eq!(file.lanes_allocated(), 1, "lane 0 was free again");
    let lane = file.lane(0);
    assert_eq!((lane.write_cursor, lane.state, lane.claims), (3, 2, 2));
    assert_eq!(file.metric_cell(0).2, 0);

    // A record from another pthread key's destructor, after the crate's own has run (keys made
    // later run later in glibc's rounds): the thread claims its lane again, and the crate's
    // destructor runs in the next round to retire it.
    extern "C" fn drop_at_exit(value: *mut std::ffi::c_void) {
        // SAFETY: the value is the Box this test leaked into the key, given back once.
        drop(unsafe { Box::from_raw(value as *mut RecordsOnDrop) });
    }
    let key = PthreadKey::new(drop_at_exit);
    let (histogram, counter) = (latency.clone(), orders.clone());
    thread::spawn(move || {
        assert!(histogram.record(1)); // the crate's key is set before the test's
        key.set(Box::into_raw(Box::new(RecordsOnDrop(histogram, counter))) as *mut std::ffi::c_void);
    })
    .join()
    .unwrap();
    let file = RingFile::read(&dir.file("rs-tls-exit"));
    assert_eq!(file.lanes_allocated(), 1);
    let lane = file.lane(0);
    assert_eq!((lane.write_cursor, lane.state, lane.owner_tid), (5, 2, 0), "both records, then retired");
    assert_eq!(
        lane.claims, 4,
        "released by the crate's destructor, claimed again by the later key's record, retired in the next round"
    );
    assert_eq!(file.metric_cell(0).2, 0);

    let collector = Collector::start(&binary, &dir);
    collector.wait_for("the five records and three increments", |latest| {
        let series = latest.series("rs-tls-exit", "latency")?;
        expect("latency count", series.num("total_count")?, 5.0)?;
        expect("latency dropped", series.num("dropped_records")?, 0.0)?;
        expect("orders", latest.series("rs-tls-exit", "orders")?.num("total")?, 3.0)
    });
}

/// A pthread key of the test's own (never deleted: a test binary is short-lived).
#[derive(Clone, Copy)]
struct PthreadKey(u32);

extern "C" {
    fn pthread_key_create(key: *mut u32, destructor: Option<extern "C" fn(*mut std::ffi::c_void)>) -> i32;
    fn pthread_setspecific(key: u32, value: *const std::ffi::c_void) -> i32;
}

impl PthreadKey {
    fn new(destructor: extern "C" fn(*mut std::ffi::c_void)) -> PthreadKey {
        let mut key = 0;
        // SAFETY: key is a valid out-parameter; the destructor lives as long as the program.
        assert_eq!(unsafe { pthread_key_create(&mut key, Some(destructor)) }, 0);
        PthreadKey(key)
    }
    fn set(self, value: *mut std::ffi::c_void) {
        // SAFETY: a key made by `new`; the destructor is what reads the value.
        assert_eq!(unsafe { pthread_setspecific(self.0, value) }, 0);
    }
}

#[test]
fn a_thread_without_a_lane_keeps_counts_and_gauges_and_counts_its_records() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("laneless");
    let bot = Bot::attach_with("rs-laneless", Options { max_lanes: Some(1), ..options(&dir) }).unwrap();
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let level = bot.gauge("level", Unit::None, &[]).unwrap();
    assert!(latency.record(1)); // this thread holds the only lane
    let (latency2, orders2, level2) = (latency.clone(), orders.clone(), level.clone());
    thread::spawn(move || {
        for v in 0..10 {
            assert!(!latency2.record(v), "a thread without a lane writes no record");
        }
        orders2.increment(7);
        assert!(!level2.set(4.5));
    })
    .join()
    .unwrap();
    orders.increment(1);
    let file = RingFile::read(&dir.file("rs-laneless"));
    assert_eq!((file.lanes_allocated(), file.lanes_exhausted()), (1, 1));
    assert_eq!(file.metric_cell(0).2, 10, "histogram records counted in unlaned");
    assert_eq!(file.metric_cell(1).2, 7, "counter increments kept in unlaned");
    assert_eq!(file.metric_cell(2), (4.5f64.to_bits(), 1, 1), "the gauge's value kept, its record counted");
    let collector = Collector::start(&binary, &dir);
    collector.wait_for("laneless figures", |latest| {
        expect("orders", latest.series("rs-laneless", "orders")?.num("total")?, 8.0)?;
        expect("level", latest.series("rs-laneless", "level")?.num("value")?, 4.5)?;
        let latency = latest.series("rs-laneless", "latency")?;
        expect("latency count", latency.num("total_count")?, 1.0)?;
        expect("latency dropped", latency.num("dropped_records")?, 10.0)?;
        expect("unlaned", latest.ring("rs-laneless")?.num("unlaned_dropped_total")?, 11.0)
    });
}

#[test]
fn sampling_writes_one_call_in_n() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("sampling");
    let bot = Bot::attach_with("rs-sampled", options(&dir)).unwrap();
    let latency = bot.metric("latency").sample_every(4).histogram(Unit::Nanoseconds).unwrap();
    let written = (0..100u64).filter(|&v| latency.record(v)).count();
    assert_eq!(written, 25);
    let collector = Collector::start(&binary, &dir);
    collector.wait_for("sampled records", |latest| {
        let series = latest.series("rs-sampled", "latency")?;
        expect("sample_every", series.num("sample_every")?, 4.0)?;
        expect("windows.1m.count (scaled by 4)", series.num("windows.1m.count")?, 100.0)
    });
}

#[test]
fn attaching_again_reuses_the_file_its_metrics_and_counts() {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("reattach");
    {
        let bot = Bot::attach_with("rs-again", options(&dir)).unwrap();
        let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
        let orders = bot.counter("orders", &[]).unwrap();
        latency.record(3);
        orders.increment(5);
    } // every handle dropped: the lanes are retired and the lock released
    let file = RingFile::read(&dir.file("rs-again"));
    assert_eq!(file.lane(0).state, 2);
    let bot = Bot::attach_with("rs-again", options(&dir)).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    assert_eq!((latency.index(), orders.index()), (0, 1));
    orders.increment(2);
    latency.record(4);
    let file = RingFile::read(&dir.file("rs-again"));
    assert_eq!(file.u32(0x9C), 2, "producer_attaches");
    assert_eq!((file.lanes_allocated(), file.lane(0).claims, file.lane(0).write_cursor), (1, 2, 2));
    let collector = Collector::start(&binary, &dir);
    collector.wait_for("counts of both attachments", |latest| {
        expect("orders", latest.series("rs-again", "orders")?.num("total")?, 7.0)?;
        expect("latency sum", latest.series("rs-again", "latency")?.num("total_sum")?, 7.0)
    });
}

#[test]
fn ringside_dump_finds_nothing_wrong_with_a_rust_bots_file() {
    let binary = collector_or_skip!();
    let Some(dump) = common::dump_binary(&binary) else {
        common::say(&format!("SKIPPED: no ringside-dump beside {} (or set RINGSIDE_DUMP)", binary.display()));
        return;
    };
    let dir = ScratchDir::new("dump-check");
    let bot =
        Bot::attach_with("rs-dump", Options { lane_capacity: Some(64), max_lanes: Some(3), ..options(&dir) }).unwrap();
    let latency = bot.metric("latency").label("symbol", "AAPL").help("Latency").histogram(Unit::Microseconds).unwrap();
    let orders = bot.counter("orders", &[("side", "buy")]).unwrap();
    let level = bot.gauge("level", Unit::Bytes, &[]).unwrap();
    let threads: Vec<_> = (0..5)
        .map(|t| {
            let (latency, orders, level) = (latency.clone(), orders.clone(), level.clone());
            thread::spawn(move || {
                for i in 0..100 {
                    latency.record(i);
                    let _span = latency.span();
                    orders.increment(1);
                    level.set((t * 100 + i) as f64);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let check = |when: &str| {
        let output =
            std::process::Command::new(&dump).arg("--dir").arg(&dir.path).args(["check", "rs-dump"]).output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        assert!(
            output.status.success() && stdout.contains("ok"),
            "ringside-dump check {when}: {:?}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    };
    check("while the bot is attached");
    drop((latency, orders, level, bot));
    check("after the bot is dropped");
}
