"""The span clock (THE SPAN CLOCK in ringside.h): the C extension times spans on the TSC where the
CPU's is invariant and the kernel keeps time with it, else on CLOCK_MONOTONIC, chosen once a
process (a process of its own shows RINGSIDE_SPAN_CLOCK's effect); the pure backend on
time.monotonic_ns(). A span of a known sleep against CLOCK_MONOTONIC around it, on both."""

import os
import platform
import time

import pytest

import ringside
from conftest import BotFile, _ringside, run_python

# How far a span's end may be from CLOCK_MONOTONIC on the TSC (RS_SPAN_CLOCK_BOUND_NS).
BOUND_NS = 5_000


def machine_has_usable_tsc():
    """x86-64, /proc/cpuinfo's flags constant_tsc and nonstop_tsc, and the kernel's clocksource
    tsc: judged apart from the C library."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = next((line.split() for line in cpuinfo if line.startswith("flags")), [])
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as source:
            clocksource = source.read().strip()
    except OSError:
        return False
    return platform.machine() == "x86_64" and {"constant_tsc", "nonstop_tsc"} <= set(flags) and clocksource == "tsc"


def extension():
    if _ringside is None:
        pytest.skip("the C extension is not built")
    return _ringside


def test_a_span_of_a_50_ms_sleep_is_clock_monotonics_time_around_it_and_ends_within_the_bound(backend, ring_dir):
    bot = ringside.Bot("sleep", ring_dir, _backend=backend)
    latency = bot.histogram("latency", unit="ns")
    outer_start = time.monotonic_ns()
    token = latency.start()
    inner_start = time.monotonic_ns()
    time.sleep(0.05)
    inner_end = time.monotonic_ns()
    assert latency.stop(token)
    outer_end = time.monotonic_ns()
    [(value, end)] = BotFile(bot.path).spans("latency")
    inner, outer = inner_end - inner_start, outer_end - outer_start
    tolerance = outer // 500 + 20_000  # 0.2 %: twice the rate's error in a process's first milliseconds
    assert inner - tolerance <= value <= outer + tolerance, f"a span of {value} ns around a sleep of {inner} to {outer} ns"
    assert inner_end - BOUND_NS <= end <= outer_end + BOUND_NS, f"a span ending at {end}, in [{inner_end}, {outer_end}]"
    bot.close()


def test_a_time_monotonic_ns_token_ends_on_clock_monotonic(backend, ring_dir):
    bot = ringside.Bot("tokens", ring_dir, _backend=backend)
    latency = bot.histogram("latency", unit="us")  # stored in ns, as every time unit
    begun = time.monotonic_ns()  # CLOCK_MONOTONIC, as the pure backend's start() and rs_clock_precise_ns
    time.sleep(0.005)
    before = time.monotonic_ns()
    assert latency.stop(begun)
    after = time.monotonic_ns()
    [(value, end)] = BotFile(bot.path).spans("latency")
    assert before - begun <= value <= after - begun
    assert before <= end <= after  # read on CLOCK_MONOTONIC itself
    bot.close()


def test_the_extension_times_spans_on_the_tsc_where_it_serves_and_says_why(ring_dir):
    backend = extension()
    bot = ringside.Bot("clock", ring_dir, _backend=backend)
    if os.environ.get("RINGSIDE_SPAN_CLOCK", "auto") not in ("auto", "tsc", ""):
        pytest.skip("RINGSIDE_SPAN_CLOCK chose the clock of this process")
    latency = bot.histogram("latency", unit="s")
    token = latency.start()
    if machine_has_usable_tsc():
        assert bot.span_clock.startswith("tsc: invariant TSC, clocksource tsc"), bot.span_clock
        assert token >> 63 == 1  # RS_SPAN_TSC_BIT: the end reads the TSC too
    else:
        assert bot.span_clock.startswith("monotonic: "), bot.span_clock
        assert token >> 63 == 0
    assert latency.stop(token)
    bot.close()


def test_the_pure_backend_times_spans_with_time_monotonic_ns(ring_dir):
    from ringside import _pure
    bot = ringside.Bot("pure-clock", ring_dir, _backend=_pure)
    assert bot.span_clock == "monotonic: the pure-Python backend times spans with time.monotonic_ns()"
    bot.close()


CHOSEN = """
import ringside
bot = ringside.Bot("chosen", {directory!r}, _backend=__import__("ringside._ringside")._ringside)
latency = bot.histogram("latency", unit="s")
print(bot.span_clock)
print(latency.start() >> 63)
"""


def test_ringside_span_clock_monotonic_keeps_the_extension_on_clock_monotonic(ring_dir):
    extension()
    result = run_python(CHOSEN.format(directory=ring_dir), env={"RINGSIDE_SPAN_CLOCK": "monotonic"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["monotonic: RINGSIDE_SPAN_CLOCK=monotonic", "0"]
    result = run_python(CHOSEN.format(directory=ring_dir), env={"RINGSIDE_SPAN_CLOCK": "hpet"})
    assert result.returncode == 0, result.stderr
    assert "RINGSIDE_SPAN_CLOCK=hpet is none of auto, tsc, monotonic: taken as auto" in result.stderr
    assert result.stdout.splitlines()[1] == ("1" if machine_has_usable_tsc() else "0")


def test_a_span_under_way_when_the_clock_is_switched_ends_on_its_own_clock(ring_dir):
    backend = extension()
    bot = ringside.Bot("switched", ring_dir, _backend=backend)
    latency = bot.histogram("latency", unit="ns")
    before = backend.span_clock().split(":", 1)[0]
    try:
        started = latency.start()
        time.sleep(0.01)
        assert backend.select_span_clock("monotonic")
        assert latency.start() >> 63 == 0
        assert latency.stop(started)
        assert backend.select_span_clock("tsc") == machine_has_usable_tsc()
        with pytest.raises(ValueError, match="takes \"tsc\" or \"monotonic\""):
            backend.select_span_clock("hpet")
    finally:
        backend.select_span_clock(before)
    [(value, _)] = BotFile(bot.path).spans("latency")
    assert 10_000_000 - 20_000 <= value < 10_000_000_000, value
    bot.close()


FORKED = """
import os, time, ringside
bot = ringside.Bot("forked", {directory!r}, _backend=__import__("ringside._ringside")._ringside)
latency = bot.histogram("latency", unit="ns")
latency.stop(latency.start())  # the parent calibrated at attach, and spans
pid = os.fork()
if pid == 0:
    before = time.monotonic_ns()
    token = latency.start()
    time.sleep(0.02)
    latency.stop(token)
    print(before, time.monotonic_ns(), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(pid, os.waitstatus_to_exitcode(status), flush=True)
"""


def test_a_forked_child_times_spans_with_the_calibration_it_inherited(ring_dir):
    extension()
    result = run_python(FORKED.format(directory=ring_dir))
    assert result.returncode == 0, result.stderr
    (before, after), (pid, status) = [map(int, line.split()) for line in result.stdout.splitlines()]
    assert status == 0
    [(value, end)] = BotFile(f"{ring_dir}/ringside.forked@{pid}").spans("latency")
    assert 20_000_000 - 40_000 <= value <= after - before + 20_000, value
    assert before + 20_000_000 - BOUND_NS <= end <= after + BOUND_NS
