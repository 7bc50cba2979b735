"""The producers' conformance table (Tests/conformance/cases.txt; its head says the operations) on
both backends, without Swift: py_runner.py runs every case into a directory of the test's own, and
each case's file, its times, ids and thread names masked, must equal the file pinned for the case
under Tests/conformance/expected/ (the Swift suite writes the pins and checks them with its reader:
docs/development.md, "Conformance"). A refused attach must print the producer's error, naming the
file, what it is and its owner, and leave what was planted untouched. The cases of names another
user took plant files as user nobody: they need root, and are skipped without (failed under
CI=true). A runner that hangs (on a FIFO) is killed at its deadline, and fails the test."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import ringside
from conftest import REPOSITORY, missing
from test_planted import plant_as_nobody, refusal, still_planted

try:
    from ringside import _ringside
except ImportError:
    _ringside = None

CONFORMANCE = os.path.join(REPOSITORY, "Tests", "conformance")
CASES = os.path.join(CONFORMANCE, "cases.txt")
PINS = os.path.join(CONFORMANCE, "expected")
REGENERATE = "RINGSIDE_WRITE_PINNED=1 swift test --filter ConformanceTests, as root (then review the diff)"


class Case:
    """A case of the table, as far as the test needs it: its name, what is planted at the bot's
    name before the runner runs, whether its attach must be refused, whether it attaches a worker."""

    def __init__(self, name):
        self.name, self.planted, self.refused, self.worker = name, None, False, False


def load_cases(path):
    cases = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if words[0] == "case":
                cases.append(Case(words[1]))
            elif words[0] == "plant":
                cases[-1].planted = words[1]
            elif words[0] == "attach":
                cases[-1].refused = "refused=1" in words
                cases[-1].worker = "worker=1" in words
    return cases


def without_planted(path):
    """The table's text without the cases that plant (each from its `case` line to the next)."""
    planted = {case.name for case in load_cases(path) if case.planted}
    kept, keep = [], True
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            words = line.split()
            if len(words) > 1 and words[0] == "case":
                keep = words[1] not in planted
            if keep:
                kept.append(line)
    return "".join(kept)


# MARK: - The mask and the pins

HEADER_SIZE = 4096  # RS_HEADER_SIZE
RECORD_SIZE = 32  # RS_RECORD_SIZE
MAX_LANES = 1024  # RS_MAX_LANES
KIND_EXEMPLAR = 4  # RS_KIND_EXEMPLAR


def word(data, offset, size):
    return int.from_bytes(data[offset:offset + size], "little")


def masked(data):
    """The file's bytes with what differs between two runs of one producer zeroed, the regions of
    ConformanceMask (Tests/RingsideKitTests/ConformanceCases.swift), at ringside.h's offsets: the
    header's created_realtime_ns and created_monotonic_ns (0x038), heartbeat_ns, producer_start_ns
    and producer_pid (0x088 to 0x09B), sample_above (0x0B0: the pure backend never samples, and
    writes 0) and rings_doorbell (0x0B4: 1 where the process could register for the barrier);
    each lane's heartbeat_ns (0x10), owner_tid (0x1C) and thread_name (0x28), and each value
    record's timestamp_ns (0x00: an exemplar record's holds the exemplar's bytes, compared)."""
    data = bytearray(data)

    def zero(start, end):
        data[start:end] = bytes(len(data[start:end]))

    if len(data) < HEADER_SIZE:
        return bytes(data)
    zero(0x38, 0x48)
    zero(0x88, 0x9C)
    zero(0xB0, 0xB8)
    lanes_offset, lane_size, records_offset = word(data, 0x30, 8), word(data, 0x48, 8), word(data, 0x50, 4)
    capacity = 1 << (word(data, 0x14, 4) & 31)
    for lane in range(min(word(data, 0x80, 4), MAX_LANES)):
        base = lanes_offset + lane * lane_size
        if base + lane_size > len(data):
            break
        zero(base + 0x10, base + 0x18)
        zero(base + 0x1C, base + 0x20)
        zero(base + 0x28, base + 0x48)
        for slot in range(capacity):
            record = base + records_offset + slot * RECORD_SIZE
            if record + RECORD_SIZE > len(data):
                break
            if data[record + 0x1C] != KIND_EXEMPLAR:
                zero(record, record + 8)
    return bytes(data)


def read_pin(name):
    """The pinned masked bytes of a case's file: its text says the length, then each 16 bytes that
    are not all zero as `OFFSET: HEX` (both hexadecimal); the bytes it leaves out are zero."""
    path = os.path.join(PINS, name + ".hex")
    if not os.path.exists(path):
        pytest.fail(f"case {name}: no pinned file {path}; write it with {REGENERATE}")
    data = bytearray()
    with open(path, encoding="ascii") as lines:
        for line in lines:
            if line.startswith("#") or not line.strip():
                continue
            key, value = line.split(maxsplit=1)
            if key == "length":
                data = bytearray(int(value))
            else:
                offset, chunk = int(key.rstrip(":"), 16), bytes.fromhex(value)
                data[offset:offset + len(chunk)] = chunk
    return bytes(data)


# The fields of ringside.h's structures, by offset, to name the field a difference falls in.
HEADER_FIELDS = ((0x000, "magic"), (0x008, "version"), (0x00C, "header_size"), (0x010, "record_size"),
                 (0x014, "capacity_log2"), (0x018, "registry_capacity"), (0x01C, "registry_entry_size"),
                 (0x020, "registry_offset"), (0x028, "cells_offset"), (0x030, "lanes_offset"), (0x038, "created_realtime_ns"),
                 (0x040, "created_monotonic_ns"), (0x048, "lane_size"), (0x050, "lane_records_offset"), (0x054, "max_lanes"),
                 (0x058, "metric_cell_size"), (0x05C, "lane_header_size"), (0x060, "lane_gather_offset"),
                 (0x064, "gather_cell_size"), (0x068, "layout_reserved"), (0x080, "lanes_allocated"), (0x084, "metric_count"),
                 (0x088, "heartbeat_ns"), (0x090, "producer_start_ns"), (0x098, "producer_pid"), (0x09C, "producer_attaches"),
                 (0x0A0, "lanes_exhausted"), (0x0A8, "workers_refused"), (0x0B0, "sample_above"), (0x0B4, "rings_doorbell"),
                 (0x0B8, "producer_reserved"),
                 (0x100, "consumer_pid"), (0x104, "weights_reader_pid"), (0x108, "consumer_heartbeat_ns"),
                 (0x110, "drain_interval_ns"), (0x118, "consumer_reserved"), (0x140, "doorbell"),
                 (0x144, "doorbell_reserved"), (0x180, "bot_control"), (0x184, "control_reserved"),
                 (0x1C0, "past the header struct"))
ENTRY_FIELDS = ((0x000, "index"), (0x004, "kind"), (0x005, "unit"), (0x006, "gauge_merge"), (0x007, "form"),
                (0x008, "sample_every"), (0x00C, "name_length"), (0x00E, "labels_length"), (0x010, "help_length"),
                (0x012, "scale"), (0x013, "reserved1"), (0x014, "retired"), (0x018, "name"), (0x080, "labels"), (0x180, "help"))
CELL_FIELDS = ((0x00, "gauge_bits"), (0x08, "gauge_set"), (0x10, "unlaned"), (0x18, "unlaned_sum"), (0x20, "unlaned_max"),
               (0x28, "clamped"), (0x30, "control"), (0x34, "reserved0"), (0x38, "exemplars_refused"))
LANE_FIELDS = ((0x00, "write_cursor"), (0x08, "dropped_total"), (0x10, "heartbeat_ns"), (0x18, "state"), (0x1C, "owner_tid"),
               (0x20, "claims"), (0x24, "cell_writes"), (0x28, "thread_name"), (0x48, "gathered"), (0x50, "producer_reserved"),
               (0x80, "read_cursor"), (0x88, "consumer_heartbeat_ns"), (0x90, "consumer_reserved"))
GATHER_FIELDS = ((0x00, "calls"), (0x08, "sum"), (0x10, "latest"), (0x18, "max"), (0x20, "dropped_sum"), (0x28, "dropped_max"),
                 (0x30, "reserved"))
RECORD_FIELDS = ((0x00, "timestamp_ns"), (0x08, "value"), (0x10, "sequence"), (0x18, "metric"), (0x1C, "kind"), (0x1D, "flags"),
                 (0x1E, "exemplar_length"))


def field(fields, offset):
    name = [name for start, name in fields if start <= offset][-1]
    return f"byte 0x{offset:X} ({name})"


def field_at(data, offset):
    """Where `offset` falls in a bot file laid out as `data`'s header says: the header, registry
    entry N, metric cell N, or lane L's header, counter cell, gather cell of metric N or record slot
    N, and the field."""
    if offset < HEADER_SIZE or len(data) < HEADER_SIZE:
        return "the header, " + field(HEADER_FIELDS, offset)
    registry, cells, lanes = word(data, 0x20, 8), word(data, 0x28, 8), word(data, 0x30, 8)
    lane_size, records, gather = word(data, 0x48, 8), word(data, 0x50, 4), word(data, 0x60, 4)
    if registry <= offset < cells:
        return f"registry entry {(offset - registry) // 512}, " + field(ENTRY_FIELDS, (offset - registry) % 512)
    if cells <= offset < lanes:
        return f"metric cell {(offset - cells) // 64}, " + field(CELL_FIELDS, (offset - cells) % 64)
    if offset < lanes or lane_size == 0:
        return f"byte 0x{offset:X}, before the lanes"
    lane, at = divmod(offset - lanes, lane_size)
    if at >= records:
        return f"lane {lane}, record slot {(at - records) // RECORD_SIZE}, " + field(RECORD_FIELDS, (at - records) % RECORD_SIZE)
    if at >= gather:
        return f"lane {lane}, gather cell of metric {(at - gather) // 64}, " + field(GATHER_FIELDS, (at - gather) % 64)
    if at >= 0x100:
        return f"lane {lane}, counter cell of metric {(at - 0x100) // 8}, byte 0x{at:X}"
    return f"lane {lane}'s header, " + field(LANE_FIELDS, at)


def first_difference(left, right):
    for offset, (a, b) in enumerate(zip(left, right)):
        if a != b:
            return offset
    return None if len(left) == len(right) else min(len(left), len(right))


# MARK: - The runs

class Table:
    """The table run by one backend: its directory, what the runner printed, whether planted."""

    def __init__(self, backend_name, directory, output, planted):
        self.backend_name, self.directory, self.output, self.planted = backend_name, directory, output, planted


@pytest.fixture(scope="module", params=["extension", "pure"])
def table(request):
    """py_runner.py over the whole table on one backend, of the ringside these tests import, in a
    directory shared as /dev/shm is; as root, each case's file planted first as user nobody."""
    if request.param == "extension" and _ringside is None:
        missing("the C extension ringside._ringside is not built (pip install ./tools/python with a C compiler and Python.h)")
    directory = tempfile.mkdtemp(prefix="ringside-conformance.", dir="/dev/shm")
    cases_path = CASES
    try:
        os.chmod(directory, 0o1777)
        planted = os.geteuid() == 0
        if planted:
            for case in load_cases(CASES):
                if case.planted:
                    plant_as_nobody(case.planted, os.path.join(directory, "ringside." + case.name))
        else:
            cases_path = os.path.join(tempfile.mkdtemp(prefix="ringside-conformance-cases."), "cases.txt")
            with open(cases_path, "w", encoding="utf-8") as text:
                text.write(without_planted(CASES))
        package = os.path.dirname(os.path.dirname(ringside.__file__))
        run = subprocess.run([sys.executable, os.path.join(CONFORMANCE, "py_runner.py"), package, cases_path, directory,
                              request.param], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, f"py_runner.py ({request.param}) failed:\n{run.stdout}{run.stderr}"
        yield Table(request.param, directory, run.stdout, planted)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        if cases_path != CASES:
            shutil.rmtree(os.path.dirname(cases_path), ignore_errors=True)


def case_file(case, directory):
    """The path of the file a case writes: the bot's, or its worker's (`NAME@PID`)."""
    names = [name for name in os.listdir(directory)
             if (name.startswith(f"ringside.{case.name}@") if case.worker else name == f"ringside.{case.name}")]
    assert len(names) == 1, f"case {case.name}: files {names} in {directory}, expected one"
    return os.path.join(directory, names[0])


@pytest.mark.parametrize("case", load_cases(CASES), ids=lambda case: case.name)
def test_case_is_written_as_pinned(table, case):
    if case.planted and not table.planted:
        missing(f"case {case.name} plants {case.planted} at the bot's name as user nobody: that needs root")
    context = f"case {case.name} ({table.backend_name})"
    if case.planted:
        path = os.path.join(table.directory, "ringside." + case.name)
        assert still_planted(case.planted, path), f"{context}: what nobody planted at {path} was touched"
    if case.refused:
        said = f"refused {case.name}: bot {case.name}: {refusal(case.planted, path)}"
        assert said in table.output.splitlines(), f"{context}: the runner said:\n{table.output}\nnot:\n{said}"
        return
    path = case_file(case, table.directory)
    with open(path, "rb") as file:
        written = masked(file.read())
    pinned = read_pin(case.name)
    offset = first_difference(pinned, written)
    assert offset is None, (
        f"{context}: {path}, masked, differs from Tests/conformance/expected/{case.name}.hex at offset 0x{offset:X}, "
        f"{field_at(pinned, offset)}: pinned {pinned[offset:offset + 8].hex()}, written {written[offset:offset + 8].hex()} "
        f"(lengths {len(pinned)} and {len(written)}). If the format changed on purpose, regenerate the pins: {REGENERATE}")
