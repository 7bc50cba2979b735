//! The producers' conformance table (Tests/conformance/cases.txt; its head says the operations),
//! without Swift: the example's case interpreter (examples/conformance/runner.rs) runs every case
//! in this process into a directory of the test's own, and each case's file, its times, ids and
//! thread names masked, must equal the file pinned for the case under Tests/conformance/expected/
//! (the Swift suite writes the pins and checks them with its reader: docs/development.md,
//! "Conformance"). A refused attach must give the producer's error, naming the file, what it is
//! and its owner, and leave what was planted untouched. The cases of names another user took plant
//! files as user nobody: they need root, and are left out without (with a message; CI=true fails).
//! One test: it arms a 60 s alarm, so a producer that waits on a FIFO ends the test binary by
//! SIGALRM ("signal 14"), a failure, instead of hanging it.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod common;
#[path = "../examples/conformance/runner.rs"]
mod runner;

use common::fork::{effective_uid, root_or_skip, take_turn};
use common::planted::{plant, shared_dir, still_planted, KINDS};
use std::path::{Path, PathBuf};

extern "C" {
    fn alarm(seconds: u32) -> u32;
}

const REGENERATE: &str = "RINGSIDE_WRITE_PINNED=1 swift test --filter ConformanceTests, as root (then review the diff)";

/// A case of the table, as far as the test needs it.
#[derive(Default)]
struct Case {
    name: String,
    /// What is planted at the bot's name before the runner runs.
    planted: Option<String>,
    /// Whether its attach must be refused.
    refused: bool,
    /// Whether it attaches a worker (its file is `NAME@PID`).
    worker: bool,
}

fn load_cases(text: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    for words in text.lines().map(|line| line.split_whitespace().collect::<Vec<_>>()) {
        match (words.first(), cases.last_mut()) {
            (Some(&"case"), _) => cases.push(Case { name: words[1].to_string(), ..Case::default() }),
            (Some(&"plant"), Some(case)) => case.planted = Some(words[1].to_string()),
            (Some(&"attach"), Some(case)) => {
                case.refused = words.contains(&"refused=1");
                case.worker = words.contains(&"worker=1");
            }
            _ => {}
        }
    }
    cases
}

/// The table's text without the cases that plant (each from its `case` line to the next).
fn without_planted(text: &str, cases: &[Case]) -> String {
    let planted: Vec<&str> =
        cases.iter().filter(|case| case.planted.is_some()).map(|case| case.name.as_str()).collect();
    let mut keep = true;
    let mut kept = String::new();
    for line in text.lines() {
        if let ["case", name, ..] = line.split_whitespace().collect::<Vec<_>>()[..] {
            keep = !planted.contains(&name);
        }
        if keep {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

// MARK: - The mask and the pins

const HEADER_SIZE: usize = 4096; // RS_HEADER_SIZE
const RECORD_SIZE: usize = 32; // RS_RECORD_SIZE
const MAX_LANES: usize = 1024; // RS_MAX_LANES
const KIND_EXEMPLAR: u8 = 4; // RS_KIND_EXEMPLAR

fn word(data: &[u8], offset: usize, size: usize) -> usize {
    data[offset..offset + size].iter().rev().fold(0, |value, &byte| value << 8 | byte as usize)
}

/// The file's bytes with what differs between two runs of one producer zeroed, the regions of
/// ConformanceMask (Tests/RingsideKitTests/ConformanceCases.swift), at ringside.h's offsets: the
/// header's created_realtime_ns and created_monotonic_ns (0x038), heartbeat_ns, producer_start_ns
/// and producer_pid (0x088 to 0x09B), sample_above (0x0B0: Python's pure backend never samples,
/// and writes 0) and rings_doorbell (0x0B4: 1 where the process could register for the barrier); each lane's heartbeat_ns (0x10), owner_tid (0x1C) and thread_name (0x28), and
/// each value record's timestamp_ns (0x00: an exemplar record's holds the exemplar's bytes, compared).
fn masked(mut data: Vec<u8>) -> Vec<u8> {
    if data.len() < HEADER_SIZE {
        return data;
    }
    let length = data.len();
    let mut zero = |start: usize, end: usize| data[start.min(length)..end.min(length)].fill(0);
    zero(0x38, 0x48);
    zero(0x88, 0x9C);
    zero(0xB0, 0xB8);
    let (lanes_offset, lane_size, records_offset) = (word(&data, 0x30, 8), word(&data, 0x48, 8), word(&data, 0x50, 4));
    let capacity = 1usize << (word(&data, 0x14, 4) & 31);
    for lane in 0..word(&data, 0x80, 4).min(MAX_LANES) {
        let base = lanes_offset + lane * lane_size;
        if base + lane_size > data.len() {
            break;
        }
        for (start, end) in [(0x10, 0x18), (0x1C, 0x20), (0x28, 0x48)] {
            data[base + start..base + end].fill(0);
        }
        for slot in 0..capacity {
            let record = base + records_offset + slot * RECORD_SIZE;
            if record + RECORD_SIZE > data.len() {
                break;
            }
            if data[record + 0x1C] != KIND_EXEMPLAR {
                data[record..record + 8].fill(0);
            }
        }
    }
    data
}

/// The pinned masked bytes of a case's file: its text says the length, then each 16 bytes that
/// are not all zero as `OFFSET: HEX` (both hexadecimal); the bytes it leaves out are zero.
fn read_pin(path: &Path) -> Vec<u8> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("no pinned file {} ({error}); write it with {REGENERATE}", path.display()));
    let mut data = Vec::new();
    for line in text.lines().filter(|line| !line.starts_with('#') && !line.trim().is_empty()) {
        let (key, value) = line.split_once(' ').unwrap_or_else(|| panic!("{}: bad line {line}", path.display()));
        if key == "length" {
            data = vec![0; value.parse().unwrap()];
            continue;
        }
        let offset = usize::from_str_radix(key.trim_end_matches(':'), 16).unwrap();
        for (index, pair) in value.trim().as_bytes().chunks(2).enumerate() {
            data[offset + index] = u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap();
        }
    }
    data
}

// The fields of ringside.h's structures, by offset, to name the field a difference falls in.
const HEADER_FIELDS: &[(usize, &str)] = &[
    (0x000, "magic"),
    (0x008, "version"),
    (0x00C, "header_size"),
    (0x010, "record_size"),
    (0x014, "capacity_log2"),
    (0x018, "registry_capacity"),
    (0x01C, "registry_entry_size"),
    (0x020, "registry_offset"),
    (0x028, "cells_offset"),
    (0x030, "lanes_offset"),
    (0x038, "created_realtime_ns"),
    (0x040, "created_monotonic_ns"),
    (0x048, "lane_size"),
    (0x050, "lane_records_offset"),
    (0x054, "max_lanes"),
    (0x058, "metric_cell_size"),
    (0x05C, "lane_header_size"),
    (0x060, "lane_gather_offset"),
    (0x064, "gather_cell_size"),
    (0x068, "layout_reserved"),
    (0x080, "lanes_allocated"),
    (0x084, "metric_count"),
    (0x088, "heartbeat_ns"),
    (0x090, "producer_start_ns"),
    (0x098, "producer_pid"),
    (0x09C, "producer_attaches"),
    (0x0A0, "lanes_exhausted"),
    (0x0A8, "workers_refused"),
    (0x0B0, "sample_above"),
    (0x0B4, "rings_doorbell"),
    (0x0B8, "producer_reserved"),
    (0x100, "consumer_pid"),
    (0x104, "weights_reader_pid"),
    (0x108, "consumer_heartbeat_ns"),
    (0x110, "drain_interval_ns"),
    (0x118, "consumer_reserved"),
    (0x140, "doorbell"),
    (0x144, "doorbell_reserved"),
    (0x180, "bot_control"),
    (0x184, "control_reserved"),
    (0x1C0, "past the header struct"),
];
const ENTRY_FIELDS: &[(usize, &str)] = &[
    (0x000, "index"),
    (0x004, "kind"),
    (0x005, "unit"),
    (0x006, "gauge_merge"),
    (0x007, "form"),
    (0x008, "sample_every"),
    (0x00C, "name_length"),
    (0x00E, "labels_length"),
    (0x010, "help_length"),
    (0x012, "scale"),
    (0x013, "reserved1"),
    (0x014, "retired"),
    (0x018, "name"),
    (0x080, "labels"),
    (0x180, "help"),
];
const CELL_FIELDS: &[(usize, &str)] = &[
    (0x00, "gauge_bits"),
    (0x08, "gauge_set"),
    (0x10, "unlaned"),
    (0x18, "unlaned_sum"),
    (0x20, "unlaned_max"),
    (0x28, "clamped"),
    (0x30, "control"),
    (0x34, "reserved0"),
    (0x38, "exemplars_refused"),
];
const LANE_FIELDS: &[(usize, &str)] = &[
    (0x00, "write_cursor"),
    (0x08, "dropped_total"),
    (0x10, "heartbeat_ns"),
    (0x18, "state"),
    (0x1C, "owner_tid"),
    (0x20, "claims"),
    (0x24, "cell_writes"),
    (0x28, "thread_name"),
    (0x48, "gathered"),
    (0x50, "producer_reserved"),
    (0x80, "read_cursor"),
    (0x88, "consumer_heartbeat_ns"),
    (0x90, "consumer_reserved"),
];
const GATHER_FIELDS: &[(usize, &str)] = &[
    (0x00, "calls"),
    (0x08, "sum"),
    (0x10, "latest"),
    (0x18, "max"),
    (0x20, "dropped_sum"),
    (0x28, "dropped_max"),
    (0x30, "reserved"),
];
const RECORD_FIELDS: &[(usize, &str)] = &[
    (0x00, "timestamp_ns"),
    (0x08, "value"),
    (0x10, "sequence"),
    (0x18, "metric"),
    (0x1C, "kind"),
    (0x1D, "flags"),
    (0x1E, "exemplar_length"),
];

fn field(fields: &[(usize, &str)], offset: usize) -> String {
    let name = fields.iter().rev().find(|(start, _)| *start <= offset).map_or("?", |(_, name)| name);
    format!("byte 0x{offset:X} ({name})")
}

/// Where `offset` falls in a bot file laid out as `data`'s header says: the header, registry entry
/// N, metric cell N, or lane L's header, counter cell, gather cell of metric N or record slot N,
/// and the field.
fn field_at(data: &[u8], offset: usize) -> String {
    if offset < HEADER_SIZE || data.len() < HEADER_SIZE {
        return format!("the header, {}", field(HEADER_FIELDS, offset));
    }
    let (registry, cells, lanes) = (word(data, 0x20, 8), word(data, 0x28, 8), word(data, 0x30, 8));
    let (lane_size, records, gather) = (word(data, 0x48, 8), word(data, 0x50, 4), word(data, 0x60, 4));
    if (registry..cells).contains(&offset) {
        return format!(
            "registry entry {}, {}",
            (offset - registry) / 512,
            field(ENTRY_FIELDS, (offset - registry) % 512)
        );
    }
    if (cells..lanes).contains(&offset) {
        return format!("metric cell {}, {}", (offset - cells) / 64, field(CELL_FIELDS, (offset - cells) % 64));
    }
    if offset < lanes || lane_size == 0 {
        return format!("byte 0x{offset:X}, before the lanes");
    }
    let (lane, at) = ((offset - lanes) / lane_size, (offset - lanes) % lane_size);
    if at >= records {
        let slot = (at - records) / RECORD_SIZE;
        return format!("lane {lane}, record slot {slot}, {}", field(RECORD_FIELDS, (at - records) % RECORD_SIZE));
    }
    if at >= gather {
        return format!(
            "lane {lane}, gather cell of metric {}, {}",
            (at - gather) / 64,
            field(GATHER_FIELDS, (at - gather) % 64)
        );
    }
    if at >= 0x100 {
        return format!("lane {lane}, counter cell of metric {}, byte 0x{at:X}", (at - 0x100) / 8);
    }
    format!("lane {lane}'s header, {}", field(LANE_FIELDS, at))
}

fn first_difference(left: &[u8], right: &[u8]) -> Option<usize> {
    let found = left.iter().zip(right).position(|(a, b)| a != b);
    found.or((left.len() != right.len()).then(|| left.len().min(right.len())))
}

// MARK: - The run

/// The file a case wrote: the bot's, or its worker's (`NAME@PID`).
fn case_file(case: &Case, directory: &Path) -> PathBuf {
    let names: Vec<String> = common::fork::files_in(directory)
        .into_iter()
        .filter(|name| {
            let bot = format!("ringside.{}", case.name);
            if case.worker {
                name.starts_with(&format!("{bot}@"))
            } else {
                *name == bot
            }
        })
        .collect();
    assert_eq!(names.len(), 1, "case {}: files {names:?} in {}, expected one", case.name, directory.display());
    directory.join(&names[0])
}

/// What a refused attach must say: the producer's error, naming the file, what it is and whose.
fn refusal(case: &Case, path: &Path) -> String {
    let kind = case.planted.as_deref().unwrap_or_default();
    let said = KINDS.iter().find(|(planted, _)| *planted == kind).map_or(kind, |(_, said)| said);
    format!(
        "refused {name}: bot {name}: {} is {said} owned by uid {}, not a regular file of uid {}; a bot opens only \
         regular files of its own user (have it removed, or attach another name)",
        path.display(),
        common::fork::NOBODY,
        effective_uid(),
        name = case.name
    )
}

/// Compares a case's file with its pin, naming the first difference's offset and field.
fn check_pinned(case: &Case, directory: &Path, pins: &Path) -> Result<(), String> {
    let path = case_file(case, directory);
    let written = masked(std::fs::read(&path).unwrap());
    let pinned = read_pin(&pins.join(format!("{}.hex", case.name)));
    let Some(offset) = first_difference(&pinned, &written) else { return Ok(()) };
    let bytes = |data: &[u8]| {
        data[offset.min(data.len())..(offset + 8).min(data.len())]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    Err(format!(
        "case {}: {}, masked, differs from Tests/conformance/expected/{}.hex at offset 0x{offset:X}, {}: pinned {}, \
         written {} (lengths {} and {}). If the format changed on purpose, regenerate the pins: {REGENERATE}",
        case.name,
        path.display(),
        case.name,
        field_at(&pinned, offset),
        bytes(&pinned),
        bytes(&written),
        pinned.len(),
        written.len()
    ))
}

#[test]
fn every_case_of_the_table_is_written_as_pinned() {
    let conformance = common::repository().join("Tests/conformance");
    let text = std::fs::read_to_string(conformance.join("cases.txt")).unwrap();
    let cases = load_cases(&text);
    assert!(!cases.is_empty(), "no cases in {}", conformance.display());
    let _turn = take_turn();
    let planting = root_or_skip("planting the conformance cases' files as user nobody at a bot's name");
    let dir = shared_dir("conformance");
    let table = if planting { text.clone() } else { without_planted(&text, &cases) };
    for case in cases.iter().filter(|case| planting && case.planted.is_some()) {
        plant(case.planted.as_deref().unwrap(), &dir.file(&case.name));
    }
    // SAFETY: alarm only arms a timer; SIGALRM's default action ends the process (a hang fails).
    unsafe { alarm(60) };
    let refusals = runner::run_table(&table, &dir.path).unwrap_or_else(|problem| panic!("cases.txt:{problem}"));
    // SAFETY: as above: disarms it.
    unsafe { alarm(0) };
    let mut problems = Vec::new();
    for case in cases.iter().filter(|case| planting || case.planted.is_none()) {
        if let Some(kind) = &case.planted {
            if !still_planted(kind, &dir.file(&case.name)) {
                problems.push(format!("case {}: what nobody planted was touched", case.name));
            }
        }
        if case.refused {
            let said = refusal(case, &dir.file(&case.name));
            if !refusals.contains(&said) {
                problems.push(format!("case {}: the refusals said {refusals:#?}, not {said}", case.name));
            }
        } else if let Err(problem) = check_pinned(case, &dir.path, &conformance.join("expected")) {
            problems.push(problem);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
