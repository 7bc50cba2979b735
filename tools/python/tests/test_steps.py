"""Signed and fractional values (VALUES in ringside.h, format 4): histograms declared with a
resolution or signed, and counters with a resolution, on both backends. What they write is held
byte for byte to what the C producer itself writes (a C program built from Sources/CRingside, fed
the same calls); then clamping and NaN counted, conflicts, resolutions refused, exact sums, files of
format 3 and 4, forked workers, exemplars, drops and sampling in offset binary; and end to end, what
the real collector's /latest shows of them (exact decimals, read as Decimal, not rounded to floats)."""

import json
import math
import os
import random
import shutil
import struct
import subprocess
import threading
from decimal import Decimal
from fractions import Fraction

import pytest

import ringside
from conftest import REPOSITORY, BotFile, Collector, _collector_path, _ringside, find_series, missing, offset, run_python
from ringside import _pure
from test_process import run_forking
from test_sampling import declare_consumer, need_extension

I64_MAX = (1 << 63) - 1
U64_MAX = (1 << 64) - 1

# The C producer fed lines on stdin: "r NAME KIND UNIT FORM SCALE SAMPLE_EVERY" registers (printing
# the file's version after it), "v INDEX VALUE" records a histogram's value (rs_bot_record_value) or
# adds a counter's (rs_bot_count_value), VALUE a C99 hexadecimal float, inf, -inf or nan; as the
# operator's tool and a consumer would (CONTROL in ringside.h), "c INDEX WORD" stores a metric's
# control word, "b WORD" the bot's bot_control, "w PID" a consumer that reads gather cells.
# An optional third argument is the lane capacity (1,024 without it).
REFERENCE = r"""
#include "ringside_producer.h"
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) return 2;
    rs_bot_options options = {0};
    options.directory = argv[1];
    options.lane_capacity = argc == 4 ? (uint32_t)strtoul(argv[3], NULL, 10) : 1024;
    rs_bot *bot;
    rs_error error;
    if (rs_bot_attach(&bot, argv[2], &options, &error) < 0) { fprintf(stderr, "%s\n", error.message); return 1; }
    rs_metric metrics[32];
    int count = 0;
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        char name[105], number[64];
        int kind, unit, form, scale, index, pid;
        unsigned every, word;
        rs_metric_cell *cells = (rs_metric_cell *)(void *)((char *)bot->header + bot->header->cells_offset);
        if (sscanf(line, "r %104s %d %d %d %d %u", name, &kind, &unit, &form, &scale, &every) == 6 && count < 32) {
            rs_values values = {(uint8_t)form, (int8_t)scale};
            if (rs_bot_register_values(bot, &metrics[count++], name, (rs_kind)kind, (rs_unit)unit, values, NULL, "", every,
                                       &error) < 0) {
                fprintf(stderr, "%s\n", error.message);
                return 1;
            }
            printf("version %u\n", (unsigned)bot->header->version);
        } else if (sscanf(line, "c %d %u", &index, &word) == 2 && index >= 0 && index < count) {
            __atomic_store_n(&cells[index].control, word, __ATOMIC_RELAXED);
        } else if (sscanf(line, "b %u", &word) == 1) {
            __atomic_store_n(&bot->header->bot_control, word, __ATOMIC_RELAXED);
        } else if (sscanf(line, "w %d", &pid) == 1) {
            __atomic_store_n(&bot->header->consumer_pid, pid, __ATOMIC_RELAXED);
            __atomic_store_n(&bot->header->weights_reader_pid, pid, __ATOMIC_RELAXED);
        } else if (sscanf(line, "v %d %63s", &index, number) == 2 && index >= 0 && index < count) {
            double value = strtod(number, NULL);
            if (metrics[index].kind == RS_KIND_COUNTER) rs_bot_count_value(bot, metrics[index], value);
            else rs_bot_record_value(bot, metrics[index], value);
        } else {
            fprintf(stderr, "bad line: %s", line);
            return 1;
        }
    }
    rs_bot_detach(bot);
    return 0;
}
"""

# (name, kind, unit, resolution, signed, sample_every): a time histogram of today, then metrics of steps.
METRICS = [
    ("latency", "histogram", "ns", None, False, 1),
    ("slippage_bps", "histogram", "none", 0.01, True, 1),
    ("order_size", "histogram", "bytes", 1e-3, False, 1),
    ("pnl_usd", "histogram", "none", 1, True, 1),
    ("notional", "histogram", "none", 100, False, 1),
    ("signal", "histogram", "none", 1e-6, True, 3),
    ("commission_usd", "counter", "none", 1e-6, False, 1),
    ("fees", "counter", "none", 0.01, False, 1),
    ("lots", "counter", "none", 1000, False, 1),
]
KINDS = {"counter": 1, "histogram": 3}
UNITS = {"none": 0, "ns": 1, "bytes": 5}


def scale_of(resolution):
    return 0 if resolution is None else round(math.log10(resolution))


def calls():
    """(metric index, value) of every call: edges (ties, zeros, clamps, NaN, infinities), then a
    seeded mix of magnitudes and signs, enough to fill a lane of 1,024 and drop."""
    edges = [0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 0.005, -0.005, 0.015, 0.125, 1e-9, -1e-9, 3.0, -3.5, 2.25,
             1e30, -1e30, 9.2e18, -9.2e18, 2e20, math.inf, -math.inf, math.nan, 123456.789, -0.37, 0.37]
    generator = random.Random(41)
    result = []
    for index in range(1, len(METRICS)):  # the metrics of steps
        values = list(edges)
        for _ in range(150):
            magnitude = 10 ** generator.uniform(-8, 8)
            values.append(generator.choice((-1, 1)) * magnitude)
            values.append(float(generator.randint(-10**6, 10**6)))  # integral: given as ints too
            values.append(generator.randint(-400, 400) / 4)  # ties at quarter steps
        result.extend((index, value) for value in values)
    generator.shuffle(result)
    return result


def assert_same_one_lane_file(ours, theirs):
    """Two `comparable` files of one lane each are the same: header, registry and cells, the lane's
    cursors, drops and cells, and its records byte for byte (the first five that differ said)."""
    for key in ("version", "metrics", "registry", "cells"):
        assert ours[key] == theirs[key], key
    assert len(ours["lanes"]) == len(theirs["lanes"]) == 1
    for key in ("write", "dropped", "cell_writes", "gathered", "cells", "gather"):
        assert ours["lanes"][0][key] == theirs["lanes"][0][key], key
    mismatched = [(at, record.hex(), theirs["lanes"][0]["records"][at].hex())
                  for at, record in enumerate(ours["lanes"][0]["records"]) if record != theirs["lanes"][0]["records"][at]]
    assert not mismatched, mismatched[:5]


def comparable(path):
    """Everything of a bot file a producer decides but its clock, pid, thread and time of creation:
    version, registry entries, metric cells, and per lane its cursors, drops, cell writes, lane
    cells, gather cells and records (all but their timestamps)."""
    with open(path, "rb") as file:
        data = file.read()
    (_, version, _, _, capacity_log2, capacity, _, registry_offset, cells_offset, lanes_offset, _, _, lane_size,
     records_offset, _, _, _, gather_offset, _) = struct.unpack_from("<QIIIIIIQQQQQQIIIIII", data, 0)
    lanes, count = struct.unpack_from("<II", data, 0x80)
    shape = {"version": version, "metrics": count,
             "registry": data[registry_offset:registry_offset + 512 * count],
             "cells": data[cells_offset:cells_offset + 64 * count], "lanes": []}
    for lane in range(lanes):
        at = lanes_offset + lane * lane_size
        write, dropped = struct.unpack_from("<QQ", data, at)
        records = []
        for cursor in range(max(0, write - (1 << capacity_log2)), write):
            record = at + records_offset + 32 * (cursor & ((1 << capacity_log2) - 1))
            records.append(data[record + 8:record + 32])
        shape["lanes"].append({
            "write": write, "dropped": dropped, "cell_writes": struct.unpack_from("<I", data, at + 0x24)[0],
            "gathered": struct.unpack_from("<Q", data, at + 0x48)[0],
            "cells": data[at + 256:at + 256 + 8 * count],
            "gather": data[at + gather_offset:at + gather_offset + 64 * count], "records": records})
    return shape


@pytest.fixture(scope="module")
def reference_program(tmp_path_factory):
    """The C producer of this repository, built into a program that makes the calls it is fed."""
    compiler = next((name for name in ("cc", "gcc", "clang") if shutil.which(name)), None)
    if compiler is None:
        missing("no C compiler (cc, gcc or clang) to build the C producer's reference program")
    folder = tmp_path_factory.mktemp("reference")
    source = folder / "reference.c"
    source.write_text(REFERENCE)
    producer = os.path.join(REPOSITORY, "Sources", "CRingside")
    binary = folder / "reference"
    built = subprocess.run([compiler, "-std=gnu11", "-O1", "-pthread", "-I", os.path.join(producer, "include"), str(source),
                            os.path.join(producer, "ringside_producer.c"), os.path.join(producer, "ringside.c"),
                            "-o", str(binary), "-lm"], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return str(binary)


def run_reference(program, directory, name, lines, capacity=None):
    arguments = [program, directory, name] + ([str(capacity)] if capacity else [])
    result = subprocess.run(arguments, input="".join(lines), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [int(line.split()[1]) for line in result.stdout.splitlines()]


def register_all(bot):
    metrics, versions = [], []
    for name, kind, unit, resolution, signed, every in METRICS:
        if kind == "counter":
            metrics.append(bot.counter(name, resolution=resolution))
        else:
            metrics.append(bot.histogram(name, unit=unit, resolution=resolution, signed=signed, sample_every=every))
        with open(bot.path, "rb") as file:
            versions.append(struct.unpack_from("<I", file.read(12), 8)[0])
    return metrics, versions


@pytest.mark.parametrize("ints", [False, True], ids=["floats", "integral-values-as-ints"])
def test_each_backend_writes_what_the_c_producer_writes_byte_for_byte(backend, ring_dir, reference_program, ints):
    lines = [f"r {name} {KINDS[kind]} {UNITS[unit]} {int(signed)} {scale_of(resolution)} {every}\n"
             for name, kind, unit, resolution, signed, every in METRICS]
    lines += [f"v {index} {value.hex() if math.isfinite(value) else value}\n" for index, value in calls()]
    c_versions = run_reference(reference_program, ring_dir, "c", lines)

    bot = ringside.Bot("py", ring_dir, lane_capacity=1024, _backend=backend)
    metrics, versions = register_all(bot)
    given_as_ints = 0
    for index, value in calls():
        if ints and math.isfinite(value) and value == int(value) and abs(value) < 2**53:
            value = int(value)
            given_as_ints += 1
        call = metrics[index].inc if METRICS[index][1] == "counter" else metrics[index].observe
        call(value)
    bot.close()

    assert given_as_ints > 1000 if ints else given_as_ints == 0
    assert versions == c_versions == [3] + [4] * (len(METRICS) - 1), "format 3 until the first metric of steps"
    ours, theirs = comparable(f"{ring_dir}/ringside.py"), comparable(f"{ring_dir}/ringside.c")
    assert [lane["dropped"] for lane in theirs["lanes"]][0] > 0, "the calls overfill the lane: drops are compared too"
    assert_same_one_lane_file(ours, theirs)


def test_a_signed_histograms_values_are_rounded_to_its_steps_in_offset_binary(bot):
    slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
    for value in (-3.5, 0, 2.25, -0.005, 0.015, 1e-9, -7, 3):
        assert slippage.observe(value) is True
    file = BotFile(bot.path)
    assert (file.version, file.forms, file.scales) == (4, [1], [-2])
    # -0.005 and 0.015 round to even steps: -0 and 2; ints are exact: -7 is -700 hundredths
    assert file.signed_values("slippage_bps") == [-350, 0, 225, 0, 2, 0, -700, 300]
    assert file.values("slippage_bps")[0] == ((1 << 64) - 350) ^ (1 << 63)  # stored as (v as u64) ^ 2^63
    assert file.clamped("slippage_bps") == 0


def test_values_a_metric_cannot_hold_are_clamped_to_its_ends_and_counted_and_a_nan_is_not_recorded(bot):
    pnl = bot.histogram("pnl", signed=True)  # whole units, signed: format 4's form alone
    size = bot.histogram("size", resolution=1e-3)
    fees = bot.counter("fees", resolution=0.01)
    for value in (math.inf, -math.inf, 1e30, math.nan, -(2**63), 2**63, 2**200):
        pnl.observe(value)
    for value in (-1.0, math.nan, 2e20, -1, 2**64, -0.0001):
        size.observe(value)
    for value in (-0.5, math.nan, 1.5, -1, 2**70, math.inf):
        fees.inc(value)
    file = BotFile(bot.path)
    assert file.signed_values("pnl") == [I64_MAX, -I64_MAX, I64_MAX, -I64_MAX, I64_MAX, I64_MAX]
    assert file.values("size") == [0, U64_MAX, 0, U64_MAX, 0]
    assert (file.clamped("pnl"), file.clamped("size"), file.clamped("fees")) == (7, 6, 5)
    # 1.5 in hundredths, then 2^64 - 1 twice (past the end), wrapping as a counter's cell does
    assert file.counter("fees") == (150 + 2 * U64_MAX) % (1 << 64)


def test_an_unsigned_histogram_without_a_resolution_keeps_refusing_what_it_cannot_hold(strict_bot):
    bot = strict_bot
    """Today's histograms are unchanged: a value out of range raises, records nothing and counts nothing."""
    sizes = bot.histogram("sizes", unit="bytes")
    for value in (-1, 1.5, math.nan):
        with pytest.raises(ringside.RingValueError, match="metric sizes"):
            sizes.observe(value)
    with pytest.raises(ringside.RingValueError, match="metric orders"):
        bot.counter("orders").inc(0.5)
    file = BotFile(bot.path)
    assert (file.version, file.values("sizes"), file.clamped("sizes")) == (3, [], 0)


def test_ints_are_exact_beyond_a_doubles_53_bits(bot):
    pnl = bot.histogram("pnl", resolution=1, signed=True)
    micro = bot.counter("micro", resolution=1e-6)
    coarse = bot.histogram("coarse", resolution=100)
    for value in (2**62 + 1, -(2**63 - 1), 2**53 + 1):
        pnl.observe(value)
    micro.inc(2**40 + 1)  # 2^40 + 1 dollars in micro-dollars: past 2^53
    for value in (150, 250, 251, 10**18 + 50, 10**18 + 150):  # to the nearest hundred, ties to even
        coarse.observe(value)
    coarse.observe(-10)  # below 0, though it rounds to 0 hundreds: clamped and counted, as C tests it
    coarse_signed = bot.histogram("coarse_signed", resolution=100, signed=True)
    coarse_signed.observe(-(2**63))  # 2^63 units are in range in hundreds
    file = BotFile(bot.path)
    assert file.signed_values("pnl") == [2**62 + 1, -(2**63 - 1), 2**53 + 1]
    assert file.counter("micro") == (2**40 + 1) * 10**6
    assert file.values("coarse") == [2, 2, 3, 10**16, 10**16 + 2, 0]
    assert file.signed_values("coarse_signed") == [-92233720368547758]
    assert (file.clamped("pnl"), file.clamped("coarse"), file.clamped("coarse_signed")) == (0, 1, 0)


def test_a_million_increments_of_a_cent_are_exactly_a_million_cents(bot):
    commission = bot.counter("commission_usd", resolution=0.01)
    for _ in range(1_000_000):
        commission.inc(0.01)
    file = BotFile(bot.path)
    assert file.counter("commission_usd") == 1_000_000  # $10,000.00 in cents, exactly
    assert file.clamped("commission_usd") == 0


def test_the_same_metric_asked_with_other_values_is_a_conflict_naming_it(backend, ring_dir):
    with ringside.Bot("conflicts", ring_dir, _backend=backend) as bot:
        slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
        assert bot.histogram("slippage_bps", resolution=0.01, signed=True) is slippage
        with pytest.raises(ringside.RingError, match=r"^bot conflicts: metric slippage_bps is already registered with "
                           r"signed values in steps of 1e-2; asked for unsigned values in steps of 1e-2$"):
            bot.histogram("slippage_bps", resolution=0.01)
        with pytest.raises(ringside.RingError, match="signed values in steps of 1e-2; asked for whole values without a "
                           "resolution"):
            bot.histogram("slippage_bps")
        bot.counter("fees", resolution=1e-6)
        with pytest.raises(ringside.RingError, match="metric fees is already registered with unsigned values in steps "
                           "of 1e-6; asked for unsigned values in steps of 1e-2"):
            bot.counter("fees", resolution=0.01)
        # The backend's own check, the C producer's message (the extension's is that message)
        bot._core.register("spread", 3, 0, b"venue=X", "", 1, 0, 1, -4)
        with pytest.raises(ringside.RingError, match=r"^bot conflicts: metric spread\{venue=X\} is already registered with "
                           r"signed values in steps of 1e-4; asked for unsigned values in steps of 1e0$"):
            bot._core.register("spread", 3, 0, b"venue=X", "", 1, 0, 0, 0)
        registered = bot.metric_count
    # A process attaching the bot again finds the metric's values in its file
    with ringside.Bot("conflicts", ring_dir, _backend=backend) as again:
        with pytest.raises(ringside.RingError, match="metric slippage_bps is already registered with signed values in "
                           "steps of 1e-2; asked for signed values in steps of 1e-3"):
            again.histogram("slippage_bps", resolution=0.001, signed=True)
        again.histogram("slippage_bps", resolution=0.01, signed=True).observe(-1.25)
        assert again.metric_count == registered
    assert BotFile(f"{ring_dir}/ringside.conflicts").signed_values("slippage_bps") == [-125]


@pytest.mark.parametrize("resolution, error, reason", [
    (0.03, ringside.RingValueError, r"resolution 0\.03 is not a power of ten"),
    (0.011, ringside.RingValueError, r"resolution 0\.011 is not a power of ten"),
    (0, ringside.RingValueError, "resolution 0 is not a power of ten"),
    (-0.01, ringside.RingValueError, r"resolution -0\.01 is not a power of ten"),
    (math.nan, ringside.RingValueError, "resolution nan is not a power of ten"),
    (math.inf, ringside.RingValueError, "resolution inf is not a power of ten"),
    (1e-19, ringside.RingValueError, r"resolution 1e-19 is 1e-19: a resolution is from 1e-18 to 1e18"),
    (10**19, ringside.RingValueError, r"resolution 10000000000000000000 is 1e19: a resolution is from 1e-18 to 1e18"),
    ("0.01", ringside.RingTypeError, r"resolution '0\.01' is not a number"),
    (True, ringside.RingTypeError, "resolution True is not a number"),
])
def test_a_resolution_that_is_not_a_power_of_ten_in_range_is_refused_naming_the_metric(bot, resolution, error, reason):
    with pytest.raises(error, match=f"^bot steps: metric spread: {reason}"):
        bot.histogram("spread", resolution=resolution)
    with pytest.raises(error, match=f"^bot steps: metric fees: {reason}"):
        bot.counter("fees", resolution=resolution)
    assert bot.metric_count == 0


def test_resolutions_given_as_any_power_of_ten_are_taken(bot):
    given = ((0.01, -2), (1e-6, -6), (1, 0), (100, 2), (1e-18, -18), (10**18, 18), (Decimal("0.001"), -3),
             (Fraction(1, 10), -1), (1e18, 18), (0.1, -1), (1e-3, -3))
    for number, (resolution, _) in enumerate(given):
        bot.histogram(f"h{number}", resolution=resolution)
    assert BotFile(bot.path).scales == [scale for _, scale in given]


def test_signed_and_resolution_are_for_histograms_in_none_or_bytes(bot):
    with pytest.raises(ringside.RingValueError, match="metric latency: a histogram in s records whole nanoseconds"):
        bot.histogram("latency", unit="s", signed=True)
    with pytest.raises(ringside.RingValueError, match="a histogram in ms records whole nanoseconds"):
        bot.histogram("latency", unit="ms", resolution=0.001)
    with pytest.raises(ringside.RingTypeError, match="signed=1 is not True or False"):
        bot.histogram("latency", signed=1)
    with pytest.raises(TypeError):
        bot.counter("fees", signed=True)  # a counter never goes back
    with pytest.raises(TypeError):
        bot.gauge("level", resolution=0.01)  # a gauge is a double
    # The backends refuse what the format cannot say, as the C producer does
    for form, scale, reason in ((1, 0, "only a histogram takes signed values"), (0, 19, "scale 19 is not from -18 to 18"),
                                (2, 0, "unknown value form 2")):
        with pytest.raises(ringside.RingValueError, match=f"metric c: {reason}"):
            bot._core.register("c", 1, 0, b"", "", 1, 0, form, scale)
    with pytest.raises(ringside.RingValueError, match="metric g: a gauge is a double: it takes no scale"):
        bot._core.register("g", 2, 0, b"", "", 1, 0, 0, -2)
    assert bot.metric_count == 0


@pytest.mark.parametrize("value, error", [("1.5", TypeError), (None, TypeError), ([1], TypeError), (b"1", TypeError)])
def test_a_value_that_is_no_number_raises_and_records_nothing(strict_bot, value, error):
    bot = strict_bot
    slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
    fees = bot.counter("fees", resolution=0.01)
    with pytest.raises(error, match="metric slippage_bps"):
        slippage.observe(value)
    with pytest.raises(error, match="metric fees"):
        fees.inc(value)
    file = BotFile(bot.path)
    assert (file.values("slippage_bps"), file.clamped("slippage_bps")) == ([], 0)
    assert (file.counter("fees"), file.clamped("fees")) == (0, 0)


def test_numbers_of_other_types_are_taken_as_floats_or_exact_ints(bot):
    class Index:  # numpy's integers offer __index__
        def __index__(self):
            return -12

    slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
    for value in (Decimal("-1.25"), Fraction(1, 4), Index(), True):
        slippage.observe(value)
    assert BotFile(bot.path).signed_values("slippage_bps") == [-125, 25, -1200, 100]


def test_a_signed_histogram_refuses_an_exemplar_naming_the_metric_and_records_nothing(strict_bot):
    bot = strict_bot
    # The collector keeps no exemplars for signed values: an exemplar is refused before anything is recorded.
    slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
    for exemplar in ({"order_id": "A17"}, {"order id": "x"}):
        with pytest.raises(ringside.RingValueError, match="metric slippage_bps: a signed histogram's values carry no exemplars"):
            slippage.observe(-3.5, exemplar=exemplar)
    assert slippage.observe(-3.5) is True
    file = BotFile(bot.path)
    assert file.exemplars("slippage_bps") == []
    assert file.signed_values("slippage_bps") == [-350]
    assert file.clamped("slippage_bps") == 0


def test_a_file_is_format_3_until_its_first_metric_of_steps_and_either_backend_attaches_both(ring_dir):
    if _ringside is None:
        missing("the C extension ringside._ringside is not built")
    path = f"{ring_dir}/ringside.formats"
    for first, second in ((_pure, _ringside), (_ringside, _pure)):
        with ringside.Bot("formats", ring_dir, _backend=first) as bot:
            bot.histogram("latency", unit="us").observe(5)
            bot.histogram("signal", resolution=1, signed=False)  # resolution 1: whole units, as format 3 says them
            assert BotFile(path).version == 3
            bot.histogram("slippage_bps", resolution=0.01, signed=True).observe(-1.5)
            assert BotFile(path).version == 4
        with ringside.Bot("formats", ring_dir, _backend=second) as bot:  # adopts a file of format 4
            bot.histogram("slippage_bps", resolution=0.01, signed=True).observe(2.5)
            assert bot.metric_count == 3
        file = BotFile(path)
        assert (file.version, file.forms, file.scales) == (4, [0, 0, 1], [0, 0, -2])
        assert file.signed_values("slippage_bps") == [-150, 250]
        os.unlink(path)


FORK = """
import os, ringside
bot = ringside.Bot("parent", {directory!r}, _backend={backend})
slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
fees = bot.counter("fees", resolution=0.01)
bot.histogram("latency", unit="ms").observe(1)
slippage.observe(-1.0)
pid = os.fork()
if pid == 0:
    slippage.observe(-2.5)  # an inherited handle: the child becomes a worker
    fees.inc(0.37)
    fees.inc(-1)  # clamped and counted in the worker's file
    print("child", os.getpid(), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status), flush=True)
bot.close()
"""


def test_a_forked_childs_worker_file_carries_its_parents_values_and_is_format_4(backend, ring_dir):
    pid = run_forking(FORK, backend, ring_dir)
    parent, worker = BotFile(f"{ring_dir}/ringside.parent"), BotFile(f"{ring_dir}/ringside.parent@{pid}")
    assert parent.version == worker.version == 4
    assert worker.registry == parent.registry and worker.entries == parent.entries
    assert (worker.forms, worker.scales) == ([1, 0, 0], [-2, -2, 0])
    assert parent.signed_values("slippage_bps") == [-100] and worker.signed_values("slippage_bps") == [-250]
    assert (worker.counter("fees"), worker.clamped("fees"), parent.counter("fees"), parent.clamped("fees")) == (37, 1, 0, 0)


def test_disabled_bots_take_every_number_and_record_nothing(ring_dir):
    code = f"""
import math, os, ringside
from ringside import _pure
for backend in [None, _pure]:
    bot = ringside.Bot("off", {ring_dir!r}, _backend=backend)
    slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
    fees = bot.counter("fees", resolution=1e-6)
    print(slippage.observe(-3.5), slippage.observe(math.nan), slippage.observe(2**80), fees.inc(0.37), fees.inc(-1))
    print("not a number", slippage.observe("x"))
    strict = ringside.Bot("off-strict", {ring_dir!r}, strict=True, _backend=backend)
    try:
        strict.histogram("slippage_bps", resolution=0.01, signed=True).observe("x")
    except ringside.RingTypeError as error:
        print("refused", "slippage_bps" in str(error))
    strict.close()
    bot.close()
print(os.listdir({ring_dir!r}))
"""
    result = run_python(code, env={"RINGSIDE_DISABLED": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["False False False None None", "not a number False", "refused True"] * 2 + ["[]"]


def test_a_full_lane_drops_signed_values_with_their_offset_sum_and_largest(backend, ring_dir):
    bot = ringside.Bot("full", ring_dir, lane_capacity=16, _backend=backend)
    pnl = bot.histogram("pnl", resolution=0.01, signed=True)
    values = [(-1) ** index * (index * 7 % 1000) for index in range(100)]  # in hundredths
    for value in values:
        pnl.observe(value / 100)
    file = BotFile(bot.path)
    assert file.signed_values("pnl") == values[:16]
    dropped = values[16:]
    assert file.dropped("pnl") == len(dropped)
    # offset binary: a sum of n offsets is the values' sum plus n * 2^63, modulo 2^64; unsigned order is signed order
    assert file.dropped_values("pnl") == ((sum(dropped) + len(dropped) * (1 << 63)) % (1 << 64), offset(max(dropped)))
    bot.close()


def test_a_thread_without_a_lane_keeps_its_signed_drops_sum_and_largest(backend, ring_dir):
    bot = ringside.Bot("laneless", ring_dir, lane_capacity=16, max_lanes=1, _backend=backend)
    pnl = bot.histogram("pnl", resolution=0.01, signed=True)
    pnl.observe(0.5)  # this thread takes the one lane
    values = [-(index * 13 % 500) for index in range(50)]
    thread = threading.Thread(target=lambda: [pnl.observe(value / 100) for value in values])
    thread.start()
    thread.join()
    file = BotFile(bot.path)
    assert file.dropped("pnl") == 50
    assert file.dropped_values("pnl") == ((sum(values) + 50 * (1 << 63)) % (1 << 64), offset(max(values)))
    bot.close()


def test_a_filling_lanes_gather_cells_hold_signed_calls_exactly_in_offset_binary(ring_dir):
    """The extension samples a lane that would fill before its consumer drains it (SAMPLING in
    ringside.h): every call of a signed histogram is a record, a gathered call or a drop, and the
    offsets' sums and largest are exact."""
    need_extension()
    bot = ringside.Bot("sampled", ring_dir, lane_capacity=64, _backend=_ringside)
    pnl = bot.histogram("pnl", resolution=0.01, signed=True)
    declare_consumer(bot.path, 4242, True)
    values = [(index * 2_654_435_761) % 2_000_001 - 1_000_000 for index in range(20_000)]  # hundredths, both signs
    for value in values:
        pnl.observe(value / 100)
    file = BotFile(bot.path)
    written = file.values("pnl")
    gathered, gathered_sum, gathered_max = file.gathered("pnl")
    dropped_sum, dropped_max = file.dropped_values("pnl")
    assert gathered > 0 and max(file.weights("pnl")) > 1
    assert len(written) + gathered + file.dropped("pnl") == len(values)
    assert (sum(written) + gathered_sum + dropped_sum) % (1 << 64) == sum(offset(value) for value in values) % (1 << 64)
    assert max(max(written), gathered_max, dropped_max) == offset(max(values))
    bot.close()


def test_a_sampled_signed_histogram_writes_one_in_n_and_counts_every_clamp(backend, ring_dir):
    bot = ringside.Bot("one_in_n", ring_dir, _backend=backend)
    signal = bot.histogram("signal", resolution=1e-3, signed=True, sample_every=3)
    written = [signal.observe(value) for value in (-1.0, -2.0, math.inf, math.nan, -4.0, 5.0, -math.inf, 7.0)]
    file = BotFile(bot.path)
    # a NaN is counted and takes no turn; the clamped ones take theirs
    assert written == [True, False, False, False, True, False, False, True]
    assert file.signed_values("signal") == [-1000, -4000, 7000]
    assert file.clamped("signal") == 3
    bot.close()


def test_resolution_1_rounds_and_clamps_whole_units_in_a_file_that_stays_format_3(bot):
    whole = bot.histogram("whole", unit="bytes", resolution=1)
    for value in (1.5, 2.5, -1, 7):
        whole.observe(value)
    file = BotFile(bot.path)
    assert (file.version, file.forms, file.scales) == (3, [0], [0])
    assert file.values("whole") == [2, 2, 0, 7] and file.clamped("whole") == 1


@pytest.fixture
def quantile_collector(ring_dir):
    """The real collector on the test's directory, reporting p01, p50 and p99."""
    binary = _collector_path()
    if binary is None:
        missing("ringside-collector is not built: run `swift build` or set RINGSIDE_COLLECTOR")
    running = Collector(binary, ring_dir, "--quantiles", "0.01,0.5,0.99")
    yield running
    running.stop()


def exact_latest(collector):
    """/latest with its numbers as written: exact decimals as Decimal (a float would round them)."""
    return json.loads(collector.get("/latest"), parse_float=Decimal)


def slippage_steps(generator):
    """A signed lognormal mixture in hundredths of a basis point: magnitudes exp(N(1, 1)) bps, 72.3 %
    of them negative, so a mean near -2 bps with tails on both sides (the collector's own test's)."""
    magnitude = math.exp(generator.gauss(1, 1))
    return round((-magnitude if generator.random() < 0.723 else magnitude) * 100)


def test_100000_signed_values_reach_the_collector_exactly_with_quantiles_within_0_1_percent(backend, ring_dir,
                                                                                           quantile_collector):
    generator = random.Random(41)
    steps = [slippage_steps(generator) for _ in range(100_000)]
    assert -3 < sum(steps) / len(steps) / 100 < -1, "a mean near -2 bps"
    # A lane larger than the burst: every value a record (the pure backend never samples, and drops when full)
    bot = ringside.Bot("signed", ring_dir, lane_capacity=1 << 17, _backend=backend)
    slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
    for value in steps:
        slippage.observe(value / 100)
    series = quantile_collector.wait_for(
        "the collector to count the 100,000 values",
        lambda: (found := find_series(exact_latest(quantile_collector), "signed", "slippage_bps")) is not None
        and found["total_count"] == 100_000 and found)
    ordered = sorted(steps)
    assert (series["signed"], series["resolution"], series["clamped_values"]) == (True, Decimal("0.01"), 0)
    assert series["total_sum"] == Decimal(sum(steps)) / 100  # exact, in hundredths
    assert series["total_max"] == Decimal(ordered[-1]) / 100
    window = series["windows"]["1m"]
    assert window["count"] == 100_000
    assert (window["min"], window["max"]) == (Decimal(ordered[0]) / 100, Decimal(ordered[-1]) / 100)
    for key, q in (("p01", 0.01), ("p50", 0.5), ("p99", 0.99)):
        exact = ordered[math.ceil(q * len(ordered)) - 1] / 100
        assert abs(float(window[key]) - exact) <= abs(exact) * 0.001, (key, window[key], exact)
    bot.close()


def test_numpy_agrees_with_the_collector_on_100000_signed_values(ring_dir, quantile_collector):
    """numpy as the reference: a signed lognormal mixture of slippages (mean about -2 bps, tails on
    both sides) drawn and reduced by numpy; the collector's p1, p50, p99 and max in /latest within
    0.1 % of numpy's (nearest rank: percentile's inverted_cdf) over the values as recorded (to 0.01)."""
    try:
        import numpy
    except ImportError:
        missing("numpy is not installed (pip install numpy)")
    rng = numpy.random.default_rng(41)
    magnitudes = rng.lognormal(mean=1.0, sigma=1.0, size=100_000)
    values = numpy.where(rng.random(100_000) < 0.723, -magnitudes, magnitudes)
    recorded = numpy.rint(values * 100) / 100  # what a signed histogram of hundredths keeps: C's rint
    assert -3 < values.mean() < -1, "a mean near -2 bps"
    bot = ringside.Bot("numpy", ring_dir, lane_capacity=1 << 17)
    slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
    for value in values.tolist():
        slippage.observe(value)
    series = quantile_collector.wait_for(
        "the collector to count the 100,000 values",
        lambda: (found := find_series(exact_latest(quantile_collector), "numpy", "slippage_bps")) is not None
        and found["total_count"] == 100_000 and found)
    window = series["windows"]["1m"]
    for key, q in (("p01", 1), ("p50", 50), ("p99", 99)):
        reference = float(numpy.percentile(recorded, q, method="inverted_cdf"))
        assert abs(float(window[key]) - reference) <= abs(reference) * 0.001, (key, window[key], reference)
    assert float(series["total_max"]) == float(recorded.max())
    assert float(window["max"]) == float(recorded.max()) and float(window["min"]) == float(recorded.min())
    bot.close()


def test_a_million_increments_of_a_cent_are_exactly_10000_in_the_collector(backend, ring_dir, collector):
    bot = ringside.Bot("cents", ring_dir, _backend=backend)
    commission = bot.counter("commission_total_usd", resolution=0.01)
    for _ in range(1_000_000):
        commission.inc(0.01)
    series = collector.wait_for(
        "the collector to read a total of 10000",
        lambda: (found := find_series(exact_latest(collector), "cents", "commission_total_usd")) is not None
        and found["total"] == 10_000 and found)
    assert (series["resolution"], series["signed"], series["clamped_values"]) == (Decimal("0.01"), False, 0)
    assert "commission_total_usd_total{ring=\"cents\"} 10000\n" in collector.get("/metrics")
    bot.close()


def test_clamped_values_reach_the_collector_counted_and_at_the_metrics_ends(backend, ring_dir, collector):
    bot = ringside.Bot("clamps", ring_dir, _backend=backend)
    pnl = bot.histogram("pnl_usd", resolution=0.01, signed=True)
    fees = bot.counter("fees_usd", resolution=1e-6)
    for value in (1.25, math.nan, -math.inf, 1e300, -2.5):
        pnl.observe(value)
    fees.inc(0.37)
    fees.inc(-1)  # a counter never goes back: counted, nothing added
    found = collector.wait_for(
        "the collector to count 4 values and a clamped increment",
        lambda: (latest := exact_latest(collector)) and (pnl_series := find_series(latest, "clamps", "pnl_usd"))
        and (fees_series := find_series(latest, "clamps", "fees_usd")) and pnl_series["total_count"] == 4
        and fees_series["clamped_values"] == 1 and (pnl_series, fees_series))
    pnl_series, fees_series = found
    assert pnl_series["clamped_values"] == 3  # the NaN and the two infinities
    assert pnl_series["total_max"] == Decimal("92233720368547758.07")  # 2^63 - 1 hundredths
    assert pnl_series["windows"]["1m"]["min"] == Decimal("-92233720368547758.07")
    assert (fees_series["total"], fees_series["resolution"]) == (Decimal("0.37"), Decimal("0.000001"))
    metrics = collector.get("/metrics")
    assert 'ringside_metric_clamped_total{ring="clamps",metric="pnl_usd",labels=""} 3' in metrics
    assert 'ringside_metric_clamped_total{ring="clamps",metric="fees_usd",labels=""} 1' in metrics
    bot.close()
