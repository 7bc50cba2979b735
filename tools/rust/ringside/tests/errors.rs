//! What the crate refuses, and the sentences it says (no collector needed).

mod common;

use common::{RingFile, ScratchDir};
use ringside::{Bot, Error, GaugeMerge, Options, Unit};

fn options(dir: &ScratchDir) -> Options {
    Options { directory: Some(dir.path.clone()), ..Options::default() }
}

#[test]
fn a_second_attach_of_a_live_bot_is_refused_naming_its_process() {
    let dir = ScratchDir::new("second-attach");
    let first = Bot::attach_with("rs-dup", options(&dir)).unwrap();
    let error = Bot::attach_with("rs-dup", options(&dir)).unwrap_err();
    let pid = std::process::id();
    assert!(matches!(error, Error::ProducerAlive { pid: p, .. } if p == pid as i32), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!(
            "bot rs-dup: another producer is attached (pid {pid}); a bot has one process, or several as its workers \
             (attach with the worker option)"
        )
    );
    assert_eq!(error.bot(), "rs-dup");
    let _: &dyn std::error::Error = &error;
    // Handles keep the bot attached; once every one is dropped, the bot can be attached again.
    let handle = first.counter("orders", &[]).unwrap();
    drop(first);
    assert!(matches!(Bot::attach_with("rs-dup", options(&dir)), Err(Error::ProducerAlive { .. })));
    drop(handle);
    let again = Bot::attach_with("rs-dup", options(&dir)).unwrap();
    assert_eq!(again.metric_count(), 1);
}

#[test]
fn bad_bot_names_are_refused() {
    let dir = ScratchDir::new("bot-names");
    let long = "x".repeat(201);
    for name in ["", ".", "..", "a/b", "a b", "ü", long.as_str()] {
        let error = Bot::attach_with(name, options(&dir)).unwrap_err();
        assert!(matches!(error, Error::InvalidBotName { .. }), "{name:?}: {error:?}");
        assert!(error.to_string().ends_with("a bot name is 1 to 200 of [A-Za-z0-9._-], not . or .."), "{error}");
    }
    Bot::attach_with(&"x".repeat(200), options(&dir)).unwrap();
    Bot::attach_with("a-b.c_d", options(&dir)).unwrap();
}

#[test]
fn bad_metric_names_labels_and_help_are_refused() {
    let dir = ScratchDir::new("metric-names");
    let bot = Bot::attach_with("rs-names", options(&dir)).unwrap();
    let long = "x".repeat(105);
    for name in ["", "9x", "a-b", "a b", "é", long.as_str()] {
        let error = bot.counter(name, &[]).unwrap_err();
        assert!(matches!(error, Error::InvalidMetricName { .. }), "{name:?}: {error:?}");
        assert!(error.to_string().starts_with("bot rs-names: metric name \""), "{error}");
    }
    bot.counter(&"x".repeat(104), &[]).unwrap();

    let too_long = "v".repeat(255);
    let cases: [(&[(&str, &str)], &str); 7] = [
        (&[("9", "a")], "must match"),
        (&[("a-b", "a")], "must match"),
        (&[("__name", "a")], "__"),
        (&[("a", "1"), ("a", "2")], "appears twice"),
        (&[("a", "x\ny")], "newline"),
        (&[("a", "x\0y")], "NUL"),
        (&[("a", &too_long)], "more than 256"),
    ];
    for (labels, why) in cases {
        let error = bot.histogram("latency", Unit::Nanoseconds, labels).unwrap_err();
        assert!(matches!(error, Error::InvalidLabels { .. }), "{labels:?}: {error:?}");
        let message = error.to_string();
        assert!(message.starts_with("bot rs-names: metric latency: ") && message.contains(why), "{message}");
    }
    bot.histogram("latency", Unit::Nanoseconds, &[("a", &"v".repeat(254))]).unwrap();

    let error = bot.metric("g").help(&"h".repeat(129)).gauge(Unit::None).unwrap_err();
    assert!(matches!(error, Error::InvalidHelp { .. }), "{error:?}");
    assert_eq!(error.to_string(), "bot rs-names: metric g: the help text must be at most 128 bytes, without NUL");
    assert!(matches!(bot.metric("g").help("a\0b").gauge(Unit::None), Err(Error::InvalidHelp { .. })));
    bot.metric("g").help(&"h".repeat(128)).gauge(Unit::None).unwrap();

    let error = bot.metric("c").sample_every(2).counter().unwrap_err();
    assert_eq!(error.to_string(), "bot rs-names: metric c: counters are exact: sample_every must be 1");
    assert!(matches!(bot.metric("g2").sample_every(2).gauge(Unit::None), Err(Error::InvalidOption { .. })));
    assert!(matches!(bot.metric("h").sample_every(0).histogram(Unit::None), Err(Error::InvalidOption { .. })));
    // Nothing refused was registered.
    assert_eq!(bot.metric_count(), 3);
}

#[test]
fn a_metric_registered_again_differently_conflicts() {
    let dir = ScratchDir::new("conflict");
    let bot = Bot::attach_with("rs-conflict", options(&dir)).unwrap();
    bot.histogram("fill", Unit::Microseconds, &[("symbol", "AAPL")]).unwrap();
    let error = bot.counter("fill", &[("symbol", "AAPL")]).unwrap_err();
    assert!(matches!(error, Error::Conflict { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "bot rs-conflict: metric fill{symbol=AAPL} is already registered as a histogram in us sampled 1 in 1; \
         asked for a counter in none sampled 1 in 1"
    );
    assert!(matches!(bot.histogram("fill", Unit::Milliseconds, &[("symbol", "AAPL")]), Err(Error::Conflict { .. })));
    assert!(matches!(
        bot.metric("fill").label("symbol", "AAPL").sample_every(2).histogram(Unit::Microseconds),
        Err(Error::Conflict { .. })
    ));
    // Other labels: another metric.
    bot.counter("fill", &[("symbol", "MSFT")]).unwrap();
}

#[test]
fn a_gauges_merge_policy_is_the_byte_at_0x006_of_its_entry() {
    let dir = ScratchDir::new("merge-bytes");
    let bot = Bot::attach_with("rs-merge", options(&dir)).unwrap();
    for merge in GaugeMerge::ALL {
        let gauge = bot.metric(&format!("g_{merge}")).merge(merge).gauge(Unit::None).unwrap();
        assert!(gauge.set(1.0));
    }
    bot.gauge("g_default", Unit::None, &[]).unwrap();
    bot.metric("per_desk").label("desk", "a").merge(GaugeMerge::PerWorker).gauge(Unit::Bytes).unwrap();
    bot.counter("orders", &[]).unwrap();
    bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let file = RingFile::read(&dir.file("rs-merge"));
    let names: Vec<String> = file.entries().into_iter().map(|(name, _, _)| name).collect();
    assert_eq!(
        names,
        ["g_last", "g_sum", "g_max", "g_min", "g_per_worker", "g_default", "per_desk", "orders", "latency"]
    );
    // rs_gauge_merge's codes at 0x006 (0 for the other kinds), and 0x007 zero.
    let bytes: Vec<(u8, u8)> = (0..file.metric_count()).map(|index| file.gauge_merge(index)).collect();
    assert_eq!(bytes, [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (0, 0), (4, 0), (0, 0), (0, 0)]);
}

#[test]
fn the_same_gauge_with_another_merge_policy_conflicts() {
    let dir = ScratchDir::new("merge-conflict");
    {
        let bot = Bot::attach_with("rs-merge", options(&dir)).unwrap();
        let in_flight = bot.metric("in_flight").merge(GaugeMerge::Sum).gauge(Unit::None).unwrap();
        assert_eq!(
            bot.metric("in_flight").merge(GaugeMerge::Sum).gauge(Unit::None).unwrap().index(),
            in_flight.index()
        );
        let error = bot.metric("in_flight").merge(GaugeMerge::Max).gauge(Unit::None).unwrap_err();
        assert!(matches!(error, Error::Conflict { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "bot rs-merge: gauge in_flight is already registered merging its workers by sum; asked for max"
        );
        let error = bot.gauge("in_flight", Unit::None, &[]).unwrap_err();
        assert!(error.to_string().ends_with("merging its workers by sum; asked for the last set"), "{error}");
        bot.metric("depth").label("desk", "a").merge(GaugeMerge::PerWorker).gauge(Unit::None).unwrap();
    }
    // Attached again: the entries in the file say the same.
    let bot = Bot::attach_with("rs-merge", options(&dir)).unwrap();
    let error = bot.metric("depth").label("desk", "a").merge(GaugeMerge::Min).gauge(Unit::None).unwrap_err();
    assert!(matches!(error, Error::Conflict { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "bot rs-merge: gauge depth{desk=a} is already registered merging its workers by per worker; asked for min"
    );
    assert_eq!(bot.metric("in_flight").merge(GaugeMerge::Sum).gauge(Unit::None).unwrap().index(), 0);
    assert_eq!(bot.metric_count(), 2);
}

#[test]
fn a_per_worker_gauge_may_not_name_the_label_pid() {
    let dir = ScratchDir::new("merge-pid");
    let bot = Bot::attach_with("rs-merge", options(&dir)).unwrap();
    for labels in [&[("pid", "7")][..], &[("desk", "a"), ("pid", "7")]] {
        let error = bot.metric("busy").labels(labels).merge(GaugeMerge::PerWorker).gauge(Unit::None).unwrap_err();
        assert!(matches!(error, Error::InvalidLabels { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "bot rs-merge: metric busy: a per-worker gauge is labelled pid by the collector: it cannot have a label \
             named pid"
        );
    }
    assert_eq!(bot.metric_count(), 0);
    bot.metric("busy").label("pid", "7").merge(GaugeMerge::Sum).gauge(Unit::None).unwrap(); // another policy may
    bot.metric("busy_by_worker")
        .label("xpid", "a")
        .label("pidgin", "b")
        .merge(GaugeMerge::PerWorker)
        .gauge(Unit::None)
        .unwrap();
    assert_eq!(bot.metric_count(), 2);
}

#[test]
fn only_a_gauge_has_a_merge_policy_and_a_policy_is_named() {
    let dir = ScratchDir::new("merge-kinds");
    let bot = Bot::attach_with("rs-merge", options(&dir)).unwrap();
    for merge in [GaugeMerge::Sum, GaugeMerge::PerWorker] {
        let error = bot.metric("orders").merge(merge).counter().unwrap_err();
        assert!(matches!(error, Error::InvalidOption { .. }), "{error:?}");
        assert_eq!(error.to_string(), "bot rs-merge: metric orders: only a gauge has a merge policy");
        let error = bot.metric("latency").merge(merge).histogram(Unit::Nanoseconds).unwrap_err();
        assert_eq!(error.to_string(), "bot rs-merge: metric latency: only a gauge has a merge policy");
    }
    assert_eq!(bot.metric_count(), 0);
    bot.metric("orders").merge(GaugeMerge::Last).counter().unwrap(); // the default: no policy
                                                                     // A policy from a name (a configuration's, say): the five names, and nothing else.
    assert_eq!("per_worker".parse::<GaugeMerge>(), Ok(GaugeMerge::PerWorker));
    let error = "average".parse::<GaugeMerge>().unwrap_err();
    assert_eq!(error.to_string(), "unknown gauge merge \"average\"; one of last, sum, max, min, per_worker");
    let _: &dyn std::error::Error = &error;
}

#[test]
fn an_entry_with_a_merge_policy_a_reader_refuses_is_corrupt() {
    let dir = ScratchDir::new("merge-corrupt");
    let path = dir.file("rs-merge");
    {
        let bot = Bot::attach_with("rs-merge", options(&dir)).unwrap();
        bot.metric("level").merge(GaugeMerge::Max).gauge(Unit::None).unwrap();
        bot.counter("orders", &[]).unwrap();
        bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    }
    let valid = std::fs::read(&path).unwrap();
    for (entry, byte, problem) in [
        (0, 5, "gauge merge policy 5 on a gauge"),
        (0, 255, "gauge merge policy 255 on a gauge"),
        (1, 1, "gauge merge policy 1 on a counter"),
        (2, 4, "gauge merge policy 4 on a histogram"),
    ] {
        let mut bytes = valid.clone();
        bytes[4096 + 512 * entry + 6] = byte;
        std::fs::write(&path, &bytes).unwrap();
        let error = Bot::attach_with("rs-merge", options(&dir)).unwrap_err();
        assert!(matches!(error, Error::Corrupt { .. }), "{error:?}");
        assert!(error.to_string().ends_with(&format!("is corrupt: registry entry {entry}: {problem}")), "{error}");
    }
    // An older file's 0 (the value set last) on the gauge: valid.
    let mut bytes = valid.clone();
    bytes[4096 + 6] = 0;
    std::fs::write(&path, &bytes).unwrap();
    let bot = Bot::attach_with("rs-merge", options(&dir)).unwrap();
    assert_eq!(bot.gauge("level", Unit::None, &[]).unwrap().index(), 0);
}

#[test]
fn a_full_registry_refuses_new_metrics_only() {
    let dir = ScratchDir::new("registry-full");
    let bot = Bot::attach_with("rs-small", Options { max_metrics: Some(2), ..options(&dir) }).unwrap();
    bot.counter("a", &[]).unwrap();
    bot.counter("b", &[]).unwrap();
    let error = bot.counter("c", &[]).unwrap_err();
    assert!(matches!(error, Error::RegistryFull { capacity: 2, .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "bot rs-small: metric c: the registry is full (2 metrics); a bot file made with a larger max_metrics holds more"
    );
    assert_eq!(bot.counter("a", &[]).unwrap().index(), 0);
}

#[test]
fn options_out_of_range_are_refused() {
    let dir = ScratchDir::new("options");
    let o = || options(&dir);
    let refused = [
        Options { lane_capacity: Some(1000), ..o() },
        Options { lane_capacity: Some(8), ..o() },
        Options { lane_capacity: Some(1 << 29), ..o() },
        Options { max_metrics: Some(0), ..o() },
        Options { max_metrics: Some(4097), ..o() },
        Options { max_lanes: Some(0), ..o() },
        Options { max_lanes: Some(1025), ..o() },
        Options { mode: Some(0o4600), ..o() },
    ];
    for options in refused {
        let error = Bot::attach_with("rs-options", options.clone()).unwrap_err();
        assert!(matches!(error, Error::InvalidOption { .. }), "{options:?}: {error:?}");
    }
    assert!(!dir.file("rs-options").exists());
    let bot = Bot::attach_with(
        "rs-options",
        Options { lane_capacity: Some(16), max_metrics: Some(1), max_lanes: Some(1), mode: Some(0o640), ..o() },
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(dir.file("rs-options")).unwrap().permissions().mode() & 0o777, 0o640);
    drop(bot);
    // An existing file's shape must match what is asked; "any" (None) takes it.
    let error = Bot::attach_with("rs-options", Options { max_lanes: Some(2), ..o() }).unwrap_err();
    assert!(matches!(error, Error::Incompatible { version: None, .. }), "{error:?}");
    assert!(
        error.to_string().contains(
            "holds lanes of 16 records, 1 metrics and 1 lanes; asked for lanes of any records, any metrics and 2 lanes"
        ),
        "{error}"
    );
    Bot::attach_with("rs-options", o()).unwrap();
}

/// A file as an older format version left it: the magic, then `version`.
fn write_old_version_file(path: &std::path::Path, version: u32) {
    let mut bytes = vec![0u8; 8192];
    bytes[0..8].copy_from_slice(&0x4544_4953_474E_4952u64.to_le_bytes());
    bytes[8..12].copy_from_slice(&version.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn a_version_1_file_is_refused_naming_both_versions_unless_recreated() {
    let dir = ScratchDir::new("version-1");
    let path = dir.file("rs-v1");
    write_old_version_file(&path, 1);
    let error = Bot::attach_with("rs-v1", options(&dir)).unwrap_err();
    assert!(matches!(error, Error::Incompatible { version: Some(1), .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!(
            "bot rs-v1: {}: it is format version 1 (one ring per file, before lanes); this library reads and writes \
             versions 3 and 4 (a lane per thread, gather cells): remove the file, or attach with recreate to replace \
             it",
            path.display()
        )
    );
    assert_eq!(RingFile::read(&path).version(), 1, "a refused file is left as it was");
    let bot = Bot::attach_with("rs-v1", Options { recreate: true, ..options(&dir) }).unwrap();
    bot.counter("orders", &[]).unwrap().increment(1);
    assert_eq!(RingFile::read(&path).version(), 3);
}

#[test]
fn a_version_2_file_is_refused_as_before_gather_cells_unless_recreated() {
    let dir = ScratchDir::new("version-2");
    let path = dir.file("rs-v2");
    write_old_version_file(&path, 2);
    let error = Bot::attach_with("rs-v2", options(&dir)).unwrap_err();
    assert!(matches!(error, Error::Incompatible { version: Some(2), .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!(
            "bot rs-v2: {}: it is format version 2 (before gather cells); this library reads and writes versions 3 \
             and 4 (a lane per thread, gather cells): remove the file, or attach with recreate to replace it",
            path.display()
        )
    );
    assert_eq!(RingFile::read(&path).version(), 2, "a refused file is left as it was");
    Bot::attach_with("rs-v2", Options { recreate: true, ..options(&dir) }).unwrap();
    let file = RingFile::read(&path);
    assert_eq!(file.version(), 3);
    // The layout line's format 3 fields: lane_gather_offset and gather_cell_size, and 64-byte metric cells.
    assert_eq!((file.u32(0x60), file.u32(0x64), file.u32(0x58)), (256 + 256 * 8, 64, 64));
}

#[test]
fn corrupt_files_are_refused() {
    let dir = ScratchDir::new("corrupt");
    let path = dir.file("rs-corrupt");
    std::fs::write(&path, vec![0x55u8; 8192]).unwrap();
    let error = Bot::attach_with("rs-corrupt", options(&dir)).unwrap_err();
    assert!(matches!(error, Error::Corrupt { .. }), "{error:?}");
    assert!(error.to_string().contains("is corrupt: bad magic 0x5555555555555555 (not a Ringside file)"), "{error}");

    // A valid file whose registry entry was damaged.
    {
        let bot = Bot::attach_with("rs-damaged", options(&dir)).unwrap();
        bot.counter("orders", &[]).unwrap();
    }
    let damaged = dir.file("rs-damaged");
    let mut bytes = std::fs::read(&damaged).unwrap();
    bytes[4096 + 4] = 9; // entry 0's kind
    std::fs::write(&damaged, &bytes).unwrap();
    let error = Bot::attach_with("rs-damaged", options(&dir)).unwrap_err();
    assert!(error.to_string().contains("is corrupt: registry entry 0: unknown kind 9"), "{error}");

    // A file that is shorter than its lanes.
    let short = dir.file("rs-short");
    {
        let bot = Bot::attach_with("rs-short", options(&dir)).unwrap();
        bot.counter("orders", &[]).unwrap().increment(1); // adds lane 0
    }
    let file = std::fs::OpenOptions::new().write(true).open(&short).unwrap();
    let lanes_offset = RingFile::read(&short).u64(0x30);
    file.set_len(lanes_offset + 4096).unwrap();
    let error = Bot::attach_with("rs-short", options(&dir)).unwrap_err();
    assert!(error.to_string().contains("but its 1 lanes need"), "{error}");

    // A layout whose gather cells are not where the geometry puts them.
    {
        Bot::attach_with("rs-gather", options(&dir)).unwrap();
    }
    let gather = dir.file("rs-gather");
    let file = std::fs::OpenOptions::new().write(true).open(&gather).unwrap();
    use std::os::unix::fs::FileExt;
    file.write_all_at(&2240u32.to_le_bytes(), 0x60).unwrap();
    let error = Bot::attach_with("rs-gather", options(&dir)).unwrap_err();
    assert!(error.to_string().contains("is corrupt: lane_gather_offset is 2240, expected 2304"), "{error}");
    file.write_all_at(&2304u32.to_le_bytes(), 0x60).unwrap();
    file.write_all_at(&32u32.to_le_bytes(), 0x64).unwrap();
    let error = Bot::attach_with("rs-gather", options(&dir)).unwrap_err();
    assert!(error.to_string().contains("is corrupt: gather_cell_size is 32, expected 64"), "{error}");

    // A file whose creation never finished (version 0) is made again.
    std::fs::write(dir.file("rs-half"), vec![0u8; 100]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.file("rs-half"), std::fs::Permissions::from_mode(0o600)).unwrap();
    Bot::attach_with("rs-half", options(&dir)).unwrap();
    assert_eq!(RingFile::read(&dir.file("rs-half")).version(), 3);
}

#[test]
fn links_and_other_users_files_are_refused() {
    let dir = ScratchDir::new("links");
    std::os::unix::fs::symlink(dir.path.join("elsewhere"), dir.file("rs-link")).unwrap();
    let error = Bot::attach_with("rs-link", options(&dir)).unwrap_err();
    assert!(matches!(error, Error::SymbolicLink { .. }), "{error:?}");
    assert!(error.to_string().ends_with("is a symbolic link; Ringside never follows links"), "{error}");
    assert!(!dir.path.join("elsewhere").exists());

    // Another user's file: only root can make one to try.
    let path = dir.file("rs-other");
    std::fs::write(&path, b"").unwrap();
    if std::os::unix::fs::chown(&path, Some(12345), None).is_ok() {
        let error = Bot::attach_with("rs-other", options(&dir)).unwrap_err();
        assert!(matches!(error, Error::PermissionDenied { owner: Some(12345), .. }), "{error:?}");
        assert!(error.to_string().contains("is owned by uid 12345, not"), "{error}");
    }

    let error =
        Bot::attach_with("rs-nowhere", Options { directory: Some(dir.path.join("missing")), ..Options::default() })
            .unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error:?}");
    assert!(error.to_string().starts_with("bot rs-nowhere: open "), "{error}");
}

#[test]
fn a_disabled_bot_writes_nothing_and_still_checks_its_arguments() {
    let dir = ScratchDir::new("disabled-option");
    let bot = Bot::attach_with("rs-off", Options { disabled: true, ..options(&dir) }).unwrap();
    assert!(!bot.is_enabled());
    assert_eq!(bot.path(), None);
    let latency = bot.metric("latency").sample_every(3).histogram(Unit::Microseconds).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let level = bot.gauge("level", Unit::None, &[]).unwrap();
    for v in 0..10 {
        assert!(!latency.record(v));
    }
    assert!(!latency.span().finish());
    orders.increment(1);
    assert!(!level.set(1.0));
    assert!(matches!(bot.counter("9", &[]), Err(Error::InvalidMetricName { .. })));
    assert_eq!((bot.metric_count(), bot.lanes_allocated()), (0, 0));
    assert_eq!(std::fs::read_dir(&dir.path).unwrap().count(), 0);
}

#[test]
fn a_registry_of_4096_metrics_fills_and_is_found_again() {
    let dir = ScratchDir::new("big-registry");
    let o = || Options { max_metrics: Some(4096), lane_capacity: Some(16), max_lanes: Some(1), ..options(&dir) };
    let names: Vec<String> = (0..4096).map(|i| format!("m{i}")).collect();
    {
        let bot = Bot::attach_with("rs-big", o()).unwrap();
        for (i, name) in names.iter().enumerate() {
            assert_eq!(bot.counter(name, &[("k", "v")]).unwrap().index(), i as u32);
        }
        assert!(matches!(bot.counter("one_more", &[]), Err(Error::RegistryFull { capacity: 4096, .. })));
    }
    let bot = Bot::attach_with("rs-big", o()).unwrap();
    assert_eq!(bot.metric_count(), 4096);
    for (i, name) in names.iter().enumerate().rev() {
        assert_eq!(bot.counter(name, &[("k", "v")]).unwrap().index(), i as u32);
    }
    assert!(matches!(bot.histogram("m7", Unit::None, &[("k", "v")]), Err(Error::Conflict { .. })));
}

#[test]
fn handles_and_errors_travel_between_threads() {
    fn shareable<T: Clone + Send + Sync + 'static>() {}
    shareable::<Bot>();
    shareable::<ringside::Histogram>();
    shareable::<ringside::Counter>();
    shareable::<ringside::Gauge>();
    fn error<T: std::error::Error + Send + Sync + 'static>() {}
    error::<Error>();
}
