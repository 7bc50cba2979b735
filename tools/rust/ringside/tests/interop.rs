//! One bot file written in turn by this crate, the C producer (Tests/fixtures/c_producer.c, built
//! here with cc), the Python producer (the package in tools/python) and this crate again: each
//! validates what the previous one wrote, finds its metrics again and adds to its counts. And the
//! registry entries the three write for the same metrics (gauges of each merge policy), compared
//! byte for byte. Parts whose tool is missing (cc, python3, the repository's files) are skipped,
//! saying so.

mod common;

use common::{compile_with_c_producer, repository, RingFile, ScratchDir};
use ringside::{Bot, GaugeMerge, Options, Unit};
use std::path::Path;
use std::process::Command;

const BOT: &str = "rs-interop";

/// The bot as the C fixture registers it: lanes of 4096 records, 8 metrics, in this order; then a
/// gauge of this crate's whose workers add up (merged by sum), which the others find in the file.
fn attach_like_the_c_fixture(dir: &ScratchDir) -> (Bot, [u32; 5]) {
    let options = Options {
        directory: Some(dir.path.clone()),
        lane_capacity: Some(4096),
        max_metrics: Some(8),
        ..Options::default()
    };
    let bot = Bot::attach_with(BOT, options).unwrap();
    let latency = bot
        .metric("c_latency")
        .labels(&[("venue", "XNAS"), ("symbol", "AAPL")])
        .help("from C")
        .histogram(Unit::Microseconds)
        .unwrap();
    let orders = bot.counter("c_orders", &[]).unwrap();
    let exposure = bot.gauge("c_exposure", Unit::Bytes, &[]).unwrap();
    let span = bot.histogram("c_span", Unit::Microseconds, &[]).unwrap();
    let in_flight = bot.metric("c_in_flight").merge(GaugeMerge::Sum).gauge(Unit::None).unwrap();
    let indices = [latency.index(), orders.index(), exposure.index(), span.index(), in_flight.index()];
    for i in 1..=10 {
        latency.record(i);
        orders.increment(1);
    }
    exposure.set(2.0);
    in_flight.set(3.0);
    (bot, indices)
}

/// A counter's total in the file: its cells over every lane, plus its unlaned cell.
fn counter_total(file: &RingFile, metric: u32) -> u64 {
    (0..file.lanes_allocated()).map(|lane| file.lane_cell(lane, metric)).sum::<u64>() + file.metric_cell(metric).2
}

/// The format versions the Python package at `module` reads and writes (its pure backend's
/// `FORMAT_VERSION_MIN..=FORMAT_VERSION`), if it can be imported.
fn python_format_versions(module: &Path) -> Option<std::ops::RangeInclusive<u32>> {
    let script = format!(
        "import sys; sys.path.insert(0, {:?})\nfrom ringside import _pure\nprint(_pure.FORMAT_VERSION_MIN, _pure.FORMAT_VERSION)",
        module.display().to_string()
    );
    let output = Command::new("python3").arg("-c").arg(script).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let mut versions = text.split_whitespace().map(|word| word.parse::<u32>().ok());
    Some(versions.next()??..=versions.next()??)
}

fn run(command: &mut Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what}: {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_c_and_python_producers_and_this_crate_share_one_file() {
    let dir = ScratchDir::new("interop");
    let build = ScratchDir::new("interop-build");
    let path = dir.file(BOT);
    let mut expected_orders = 0u64;

    let (bot, indices) = attach_like_the_c_fixture(&dir);
    assert_eq!(indices, [0, 1, 2, 3, 4]);
    expected_orders += 10;
    drop(bot);

    // The C producer: attaches our file (validating it, the gauge's policy too), finds the four
    // metrics it registers again.
    let fixture = repository().join("Tests/fixtures/c_producer.c");
    let c_producer = build.path.join("c_producer");
    let compiled = compile_with_c_producer(&fixture, &c_producer);
    if compiled {
        let (count, threads) = (1000u64, 4u64);
        run(
            Command::new(&c_producer).arg(&dir.path).arg(BOT).arg(count.to_string()).arg(threads.to_string()),
            "the C producer on the Rust crate's file",
        );
        expected_orders += 2 * count * threads;
        let file = RingFile::read(&path);
        assert_eq!(file.metric_count(), 5, "the C producer found the Rust crate's four metrics, and added none");
        assert_eq!(counter_total(&file, 1), expected_orders);
    } else {
        common::say("SKIPPED (part): the C producer (no cc, or no Tests/fixtures/c_producer.c)");
    }

    // The Python producer, if it writes this crate's format (a package of another version refuses the file).
    let module = repository().join("tools/python");
    let python = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    let ours = RingFile::read(&path).version();
    let theirs = python.then(|| python_format_versions(&module)).flatten();
    if let Some(versions) = theirs.clone().filter(|versions| !versions.contains(&ours)) {
        common::say(&format!(
            "SKIPPED (part): the Python producer (tools/python takes format versions {versions:?}, this crate's file is {ours})"
        ));
    } else if python && module.join("ringside/__init__.py").is_file() && cfg!(target_arch = "x86_64") {
        // The package's backend calls, below its API: the API stores a time histogram in
        // nanoseconds, and c_latency is registered in microseconds by the others.
        let script = format!(
            "import sys; sys.path.insert(0, {module:?})\n\
             import ringside\n\
             from ringside import _values\n\
             bot = ringside.attach({BOT:?}, directory={dir:?})\n\
             core = bot._core\n\
             latency = core.register('c_latency', 3, 2, b'symbol=AAPL\\nvenue=XNAS', '', 1, 0)\n\
             orders = core.register('c_orders', 1, 0, b'', '', 1, 0)\n\
             assert (latency, orders) == (0, 1), (latency, orders)\n\
             assert core.register('c_in_flight', 2, 0, b'', '', 1, 1) == 4\n\
             try:\n    core.register('c_in_flight', 2, 0, b'', '', 1, 2)\n    raise SystemExit('merged by max accepted')\n\
             except ringside.RingError as error:\n    assert 'merging its workers by sum; asked for max' in str(error), error\n\
             observe = core.handle(latency, 3, 1, True, _values.converter(3, {BOT:?}, 'c_latency', 'none'), None).observe\n\
             inc = core.handle(orders, 1, 1, True, _values.converter(1, {BOT:?}, 'c_orders', 'none'), None).inc\n\
             for i in range(100):\n    observe(i + 1)\n    inc(3)\n\
             bot.close()\n",
            module = module.display().to_string(),
            dir = dir.path.display().to_string(),
        );
        run(Command::new("python3").arg("-c").arg(script), "the Python producer on the file");
        expected_orders += 300;
        assert_eq!(counter_total(&RingFile::read(&path), 1), expected_orders);
    } else {
        common::say("SKIPPED (part): the Python producer (no python3, no tools/python/ringside, or not x86_64)");
    }

    // This crate again, on what the others wrote.
    let (bot, indices) = attach_like_the_c_fixture(&dir);
    assert_eq!(indices, [0, 1, 2, 3, 4]);
    expected_orders += 10;
    let file = RingFile::read(&path);
    assert_eq!(counter_total(&file, 1), expected_orders);
    assert_eq!(file.gauge_merge(4), (1, 0), "c_in_flight merged by sum");
    for lane in 1..file.lanes_allocated() {
        assert_eq!(file.lane(lane).state, 2, "lane {lane} retired at attach");
    }

    let Some(collector) = common::collector_binary() else { return };
    if let Some(dump) = common::dump_binary(&collector) {
        let output = Command::new(&dump).arg("--dir").arg(&dir.path).args(["check", BOT]).output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success() && stdout.contains(" ok "), "ringside-dump check: {stdout}");
    }
    let collector = common::Collector::start(&collector, &dir);
    collector.wait_for("the counts of all three producers", |latest| {
        let total = latest.series(BOT, "c_orders")?.num("total")?;
        if total != expected_orders as f64 {
            return Err(format!("c_orders total {total}, expecting {expected_orders}"));
        }
        let exposure = latest.series(BOT, "c_exposure")?.num("value")?;
        if exposure != 2.0 {
            return Err(format!("c_exposure {exposure}"));
        }
        let in_flight = latest.series(BOT, "c_in_flight")?.num("value")?;
        if in_flight != 3.0 {
            return Err(format!("c_in_flight {in_flight}"));
        }
        Ok(())
    });
    drop(bot);
}

#[test]
fn registry_entries_from_c_python_and_this_crate_are_the_same_bytes() {
    let dir = ScratchDir::new("interop-merge");
    let build = ScratchDir::new("interop-merge-build");
    // This crate: a gauge of each policy, with labels, a unit and help, then a counter.
    {
        let options = Options {
            directory: Some(dir.path.clone()),
            lane_capacity: Some(4096),
            max_metrics: Some(8),
            ..Options::default()
        };
        let bot = Bot::attach_with("from-rust", options).unwrap();
        for merge in GaugeMerge::ALL {
            let help = format!("merged by {merge}");
            bot.metric(&format!("g_{merge}")).label("desk", "a").help(&help).merge(merge).gauge(Unit::Bytes).unwrap();
        }
        bot.counter("orders", &[]).unwrap();
    }
    let ours = RingFile::read(&dir.file("from-rust"));
    assert_eq!(ours.metric_count(), 6);
    let mut compared = 0;

    // The C producer: Tests/fixtures/c_merged.c registers the same metrics.
    let source = repository().join("Tests/fixtures/c_merged.c");
    let merged = build.path.join("c_merged");
    let compiled = compile_with_c_producer(&source, &merged);
    if compiled {
        run(Command::new(&merged).arg(&dir.path).arg("from-c"), "the C producer's gauges");
        let theirs = RingFile::read(&dir.file("from-c"));
        assert_eq!(theirs.metric_count(), 6);
        for index in 0..6 {
            assert_eq!(theirs.entry_bytes(index), ours.entry_bytes(index), "entry {index}: C's and ours");
        }
        compared += 1;
    } else {
        common::say("SKIPPED (part): the C producer's entries (no cc, no Sources/CRingside, or no Tests/fixtures)");
    }

    let module = repository().join("tools/python");
    let python = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if python && module.join("ringside/__init__.py").is_file() && cfg!(target_arch = "x86_64") {
        // The package's API, on its pure backend (the source tree has no extension built).
        let script = format!(
            "import sys; sys.path.insert(0, {module:?})\n\
             import ringside\n\
             assert not ringside.ACCELERATED\n\
             bot = ringside.attach('from-python', directory={dir:?}, lane_capacity=4096, max_metrics=8)\n\
             for merge in ('last', 'sum', 'max', 'min', 'per_worker'):\n\
             \x20   bot.gauge('g_' + merge, unit='bytes', labels={{'desk': 'a'}}, help='merged by ' + merge, merge=merge)\n\
             bot.counter('orders')\n\
             bot.close()\n",
            module = module.display().to_string(),
            dir = dir.path.display().to_string(),
        );
        run(
            Command::new("python3").arg("-c").arg(script).env_remove("RINGSIDE_DISABLED"),
            "the Python producer's gauges",
        );
        let theirs = RingFile::read(&dir.file("from-python"));
        assert_eq!(theirs.metric_count(), 6);
        for index in 0..6 {
            assert_eq!(theirs.entry_bytes(index), ours.entry_bytes(index), "entry {index}: Python's and ours");
        }
        compared += 1;
    } else {
        common::say(
            "SKIPPED (part): the Python producer's entries (no python3, no tools/python/ringside, or not x86_64)",
        );
    }
    if compared == 0 {
        common::say("SKIPPED: no other producer to compare the registry entries with");
    }
}
