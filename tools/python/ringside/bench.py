"""python -m ringside.bench: what a call costs, beside prometheus_client's, in one run.

Every row runs once per round and the rounds interleave the rows, so a machine that changes speed
between runs (a VM, a laptop) slows every row alike; each row reports the median of its rounds'
nanoseconds per call, loop included, and its ratio to the call it is compared with in the same
round: prometheus_client's, or for an observe with an exemplar, the same library's observe
without one, or for a span on the TSC (the C extension's span clock where the machine has a usable
one: THE SPAN CLOCK in ringside.h) the same span on CLOCK_MONOTONIC, the extension's clock switched
for that row's rounds. Between rounds the benchmark drains its own lanes as the collector would (it moves each
lane's read cursor up to its write cursor), so no record is dropped; the drops are printed.

    python -m ringside.bench [--rounds N] [--calls N] [--json]
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import mmap
import os
import platform
import shutil
import statistics
import struct
import sys
import tempfile
import time
from typing import Any, Callable, Dict, Optional, Tuple

import ringside
from ringside import _pure
from ringside._backend import Backend

# A row: its name, the call timed (None: the loop alone), its argument (None: called without
# one), the row it is compared with (None: none), the exemplar passed with the argument (None:
# none), and the span clock its rounds run on (None: the process's; "monotonic": the extension's
# switched to CLOCK_MONOTONIC for them).
Row = Tuple[str, Optional[Callable[..., object]], Optional[float], Optional[str], Optional[Dict[str, str]], Optional[str]]

# The exemplar of the exemplar rows: 12 bytes, one more lane slot (as ringside-bench's
# ringside.record.exemplar row).
EXEMPLAR = {"order_id": "A17"}


def _extension() -> Backend | None:
    """The C extension, if it was built."""
    try:
        from ringside import _ringside
    except ImportError:
        return None
    return _ringside


def _select_span_clock(clock: str) -> str:
    """Makes the C extension's spans started from now on read `clock` ("tsc" or "monotonic",
    rs_span_clock_select); returns the clock they read before."""
    from ringside import _ringside
    previous = _ringside.span_clock().split(":", 1)[0]
    _ringside.select_span_clock(clock)
    return previous


def _drain(path: str) -> None:
    """Consumes every record of the bot at `path`: each lane's read cursor to its write cursor."""
    with open(path, "r+b") as file:
        header = mmap.mmap(file.fileno(), _pure.PAGE_SIZE)
        lanes_offset, lane_size = struct.unpack_from("<Q", header, 0x030)[0], struct.unpack_from("<Q", header, 0x048)[0]
        lanes = struct.unpack_from("<I", header, 0x080)[0]
        header.close()
        for lane in range(lanes):
            view = mmap.mmap(file.fileno(), _pure.PAGE_SIZE, offset=lanes_offset + lane * lane_size)
            struct.pack_into("<Q", view, 0x80, struct.unpack_from("<Q", view, 0x00)[0])
            view.close()


def _timed(call: Callable[..., object] | None, argument: float | None, calls: int,
           exemplar: dict[str, str] | None = None) -> float:
    """Nanoseconds per call of `call(argument)` (or `call()` when argument is None, or
    `call(argument, exemplar=exemplar)` with an exemplar), loop included."""
    loop = itertools.repeat(argument, calls)
    if call is None:
        start = time.perf_counter_ns()
        for _ in loop:
            pass
        return (time.perf_counter_ns() - start) / calls
    if argument is None:
        start = time.perf_counter_ns()
        for _ in loop:
            call()
        return (time.perf_counter_ns() - start) / calls
    if exemplar is not None:
        start = time.perf_counter_ns()
        for value in loop:
            call(value, exemplar=exemplar)  # the keyword in the loop, as a caller writes it
        return (time.perf_counter_ns() - start) / calls
    start = time.perf_counter_ns()
    for value in loop:
        call(value)
    return (time.perf_counter_ns() - start) / calls


def _rows(directory: str) -> tuple[list[Row], list[ringside.Bot], bool]:
    """The rows, the bots to drain and close, and whether prometheus_client's rows are there."""
    rows: list[Row] = []
    bots = []
    extension = _extension()
    backends: list[tuple[str, str, Backend]] = [("ringside", "_ringside", extension)] if extension is not None else []
    backends.append(("ringside pure", "_pure", _pure))
    for label, module, backend in backends:
        bot = ringside.Bot(f"bench-{module}", directory, lane_capacity=1 << 20, _backend=backend)
        bots.append(bot)
        latency = bot.histogram("latency", unit="s", labelnames=("symbol",)).labels("AAPL")
        orders = bot.counter("orders")
        exposure = bot.gauge("exposure")
        family = bot.histogram("by_symbol", unit="s", labelnames=("symbol",))
        slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)  # format 4: signed, in steps of 0.01
        commission = bot.counter("commission_usd", resolution=1e-6)  # format 4: steps of 1e-6
        latency.observe(0.0012)  # each thread's lane claimed before timing
        exposure.set(1.5)
        orders.inc()
        family.labels("AAPL").observe(0.0012)
        rows += [
            (f"{label}: Histogram.observe(0.0012)", latency.observe, 0.0012, "prometheus_client: Histogram.observe", None,
             None),
            (f"{label}: observe(0.0012, exemplar=...)", latency.observe, 0.0012, f"{label}: Histogram.observe(0.0012)",
             EXEMPLAR, None),
            (f"{label}: labels('AAPL').observe", lambda v, f=family: f.labels("AAPL").observe(v), 0.0012,
             "prometheus_client: labels('AAPL').observe", None, None),
            (f"{label}: Counter.inc()", orders.inc, None, "prometheus_client: Counter.inc", None, None),
            # The paths of signed and fractional values, against the same backend's observe and inc
            (f"{label}: signed observe(-3.5), steps of 0.01", slippage.observe, -3.5, f"{label}: Histogram.observe(0.0012)",
             None, None),
            (f"{label}: inc(0.37), steps of 1e-6", commission.inc, 0.37, f"{label}: Counter.inc()", None, None),
            (f"{label}: Gauge.set(1.5)", exposure.set, 1.5, "prometheus_client: Gauge.set", None, None),
            (f"{label}: with time(): pass", lambda h=latency: _time_block(h), None, "prometheus_client: with time(): pass",
             None, None),
        ]
        if module == "_ringside":  # the extension's span on each clock (the pure backend's is CLOCK_MONOTONIC's)
            def span(start: Callable[[], int] = latency.start, stop: Callable[[int], object] = latency.stop) -> None:
                stop(start())
            rows += [
                (f"{label}: stop(start())", span, None, f"{label}: stop(start()) on CLOCK_MONOTONIC", None, None),
                (f"{label}: stop(start()) on CLOCK_MONOTONIC", span, None, None, None, "monotonic"),
            ]
    prometheus_rows = _prometheus_rows()
    rows += prometheus_rows or []
    rows.append(("the loop alone", None, None, None, None, None))
    return rows, bots, prometheus_rows is not None


def _prometheus_rows() -> list[Row] | None:
    """prometheus_client's calls, or None when it is not installed."""
    # Imported by name, so that mypy --strict passes without it (or its types) installed: the
    # package does not depend on it, and its calls here are typed Any.
    try:
        prometheus_client: Any = importlib.import_module("prometheus_client")
    except ImportError:
        return None
    registry = prometheus_client.CollectorRegistry()
    histogram = prometheus_client.Histogram("latency_seconds", "latency", registry=registry)
    labelled = prometheus_client.Histogram("by_symbol_seconds", "latency", ["symbol"], registry=registry)
    counter = prometheus_client.Counter("orders", "orders", registry=registry)
    gauge = prometheus_client.Gauge("exposure", "exposure", registry=registry)
    return [
        ("prometheus_client: Histogram.observe", histogram.observe, 0.0012, None, None, None),
        ("prometheus_client: observe(0.0012, exemplar=...)", histogram.observe, 0.0012,
         "prometheus_client: Histogram.observe", EXEMPLAR, None),
        ("prometheus_client: labels('AAPL').observe", lambda v: labelled.labels("AAPL").observe(v), 0.0012, None, None,
         None),
        ("prometheus_client: Counter.inc", counter.inc, None, None, None, None),
        ("prometheus_client: Gauge.set", gauge.set, 1.5, None, None, None),
        ("prometheus_client: with time(): pass", lambda: _time_block(histogram), None, None, None, None),
    ]


def _time_block(histogram: Any) -> None:
    """An empty block timed by histogram.time(), as a context manager: a span of nothing."""
    with histogram.time():
        pass


def run(rounds: int, calls: int) -> tuple[list[dict[str, Any]], int, bool]:
    directory = tempfile.mkdtemp(prefix="ringside-pybench.", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        rows, bots, has_prometheus = _rows(directory)
        samples: dict[str, list[float]] = {name: [] for name, _, _, _, _, _ in rows}
        extension = _extension()
        for _ in range(rounds):
            for name, call, argument, _, exemplar, clock in rows:
                for bot in bots:
                    if bot.path is not None:  # None: disabled (RINGSIDE_DISABLED), nothing to drain
                        _drain(bot.path)
                if clock is not None and extension is not None:
                    previous = _select_span_clock(clock)
                    try:
                        samples[name].append(_timed(call, argument, calls, exemplar))
                    finally:
                        _select_span_clock(previous)
                else:
                    samples[name].append(_timed(call, argument, calls, exemplar))
        results = []
        for name, _, _, baseline, _, _ in rows:
            ratios = ([statistics.median([mine / theirs for mine, theirs in zip(samples[name], samples[baseline])])]
                      if baseline in samples else [])
            results.append({"row": name, "ns": statistics.median(samples[name]),
                            "ratio": ratios[0] if ratios else None, "baseline": baseline if ratios else None})
        dropped = sum(bot.records_dropped for bot in bots)
        for bot in bots:
            bot.close()
        return results, dropped, has_prometheus
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _machine() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ringside.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds, each running every row once (default 7)")
    parser.add_argument("--calls", type=int, default=200_000, help="calls per row per round (default 200,000)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    options = parser.parse_args(argv)
    if options.rounds < 1 or options.calls < 1:
        parser.error("--rounds and --calls take a number from 1")
    extension = _extension()
    span_clock = extension.span_clock() if extension is not None else _pure.span_clock()  # before the rows switch it
    results, dropped, has_prometheus = run(options.rounds, options.calls)
    about = {"python": platform.python_version(), "implementation": platform.python_implementation(),
             "machine": _machine(), "accelerated": ringside.ACCELERATED, "rounds": options.rounds,
             "calls": options.calls, "dropped": dropped,
             "span_clock": span_clock}
    if options.json:
        print(json.dumps({**about, "rows": results}))
        return 0
    print(f"{about['implementation']} {about['python']} on {about['machine']}; ns per call, median of "
          f"{options.rounds} interleaved rounds of {options.calls:,} calls, loop included")
    print(f"span clock: {about['span_clock']}")
    if not has_prometheus:
        print("(prometheus_client is not installed: pip install prometheus_client for its rows and the ratios)")
    print(f"  {'call':<52} {'ns':>8}  {'ratio':>6}  to")
    for result in results:
        ratio = f"{result['ratio']:.2f}" if result["ratio"] is not None else ""
        print(f"  {result['row']:<52} {result['ns']:8.1f}  {ratio:>6}  {result['baseline'] or ''}")
    print(f"  records dropped: {dropped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
