"""Ringside for Python: a bot's telemetry in nanoseconds, through shared memory.

    import ringside
    bot = ringside.attach("py-bot")                      # /dev/shm/ringside.py-bot
    fill = bot.histogram("order_fill_latency", unit="s", labelnames=("symbol",))
    orders = bot.counter("orders")
    exposure = bot.gauge("gross_exposure")
    in_flight = bot.gauge("orders_in_flight", merge="sum")  # the collector adds the workers' values
    slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)  # basis points to 0.01
    commission = bot.counter("commission_usd", resolution=1e-6)  # dollars to a micro-dollar

    fill.labels("AAPL").observe(0.0012)                  # seconds, stored as 1,200,000 ns exactly
    fill.labels("AAPL").observe(0.0012, exemplar={"order_id": "A17"})  # which order it was
    with fill.labels("MSFT").time(): ...                 # a span, timed by the span clock (bot.span_clock)
    @fill.labels("AAPL").time()                          # a function's calls, or a coroutine's
    async def send_order(): ...
    t = fill.labels("AAPL").start(); ...; fill.labels("AAPL").stop(t)
    orders.inc()                                         # exact: counters write no records
    slippage.observe(-3.5)                               # -350 hundredths of a basis point
    commission.inc(0.37)                                 # 370,000 micro-dollars, exactly
    exposure.set(1.25e6); exposure.inc(10); exposure.dec(2.5)
    bot.instrument_gc()                                  # python_gc_pause{generation}: each collection
    bot.instrument_asyncio()                             # in a coroutine: python_asyncio_lag{loop="main"}
    bot.close()                                          # or exit: the kernel drops the lock

The ringside-collector drains the bot as it drains every other producer's (C, C++, Swift, Rust)
and exports windowed percentiles, counters and gauges.

The calls run in a C extension over ringside_producer.h when the package was built with a
compiler and Python's headers (`ACCELERATED` is True), else in the pure-Python module `_pure`:
the same API, format, values and errors, at a few times the cost. RINGSIDE_PURE=1 in the
environment picks the pure module even where the extension was built.

VALUES. A histogram declared in "s", "ms", "us" or "ns" stores whole nanoseconds: an int is
multiplied exactly, a float multiplied and rounded to the nearest nanosecond (ties to even), which
is exact for any decimal number of nanoseconds below 2^51 (26 days). One in "bytes" or "none"
takes whole numbers (3 or 3.0). Counters add whole numbers from 0 to 2^64-1; gauges take floats.

BAD VALUES. Metrics never raise into trading code for a value: one a metric cannot take as given
is counted in the metric's cell (`clamped`: ringside_metric_clamped_total on /metrics,
clamped_values in /latest, said on the live page) and the call returns, recording what the C
producer records: a negative observation or increment, 0 (a counter adds nothing); one too large,
or an infinity, the largest the metric holds; a fraction given to a metric of whole numbers (a
counter's inc(2.5), 1.5 bytes), the nearest whole number, ties to even; a NaN, or a value that is
not a number (a str, None), nothing. An exemplar the metric cannot take is counted too
(`exemplars_refused`: ringside_metric_exemplars_refused_total, exemplars_refused in /latest) and
the value recorded without it. A strict bot (attach(..., strict=True), or RINGSIDE_STRICT=1 in the
environment when strict is not given) raises RingValueError (a ValueError) or RingTypeError (a
TypeError) naming the bot, the metric and the value instead, and records nothing: for tests.

SIGNED AND FRACTIONAL VALUES (format 4 of the file: VALUES in ringside.h). A histogram in "none"
or "bytes" declared with resolution= (a power of ten from 1e-18 to 1e18: 0.01, 1e-6, 1, 100) or
signed=True, and a counter declared with resolution=, store whole numbers of that step (a signed
histogram's in offset binary). observe() and inc() then take any number: a float is rounded to the
nearest step, ties to even, as the C producer's rs_bot_record_value and rs_bot_count_value round
it; an int is turned into steps exactly. A value the metric cannot hold (below 0 for an unsigned
histogram or a counter, past its range, an infinity) is clamped to the nearest end and recorded (a
counter adds nothing for one below 0), a NaN is not recorded, and each is counted in the metric's
cell (`clamped`): no number raises, none wraps. Metrics declared without either keep the rules
above (a float that is not whole is counted as it is rounded; resolution=1 rounds it as a step, not
counted), and a file is format 3, which older readers read, until its first signed or fractional metric. The same
metric asked again with another resolution or sign raises RingError.

EXEMPLARS. observe(value, exemplar={"order_id": "A17"}), as prometheus_client's, records the value
with an exemplar naming it; the collector keeps the largest values' exemplars (with the pid, the
thread's id and its name) and exports them in /latest and OpenMetrics. So do stop(token, exemplar)
and time(exemplar=...), whose timer's `exemplar` may also be set inside a `with` block, once it is
known (`with fill.time() as timer: ...; timer.exemplar = {"order_id": order.id}`). An exemplar is
a mapping of label names ([a-zA-Z_][a-zA-Z0-9_]*) to str values without newline or NUL, stored as
"key=value" pairs joined by newlines in the mapping's order: at most 64 bytes of UTF-8 in all. One
that is longer or malformed (empty too: None means none), not a mapping of str to str, or given to
a signed histogram (whose values carry none, in every language) is never written, nor cut: the
value is recorded without it and the exemplar counted (BAD VALUES); a strict bot raises
RingValueError or RingTypeError naming the problem instead, recording nothing. The value and its
exemplar take 1 + ceil(bytes / 16) slots of the lane, published together: a lane without room
for all of them drops the value and its exemplar together, one counted drop.

SPANS. time(), start() and stop() time a span on the span clock: with the C extension, the TSC
where the CPU's is invariant and the kernel keeps time with it (rdtsc, about half the cost of a
CLOCK_MONOTONIC read), calibrated against CLOCK_MONOTONIC at the process's first attach and again
about once a second as spans end; else CLOCK_MONOTONIC (THE SPAN CLOCK in ringside.h, the rules of
every producer). A span's record holds its duration and its end in CLOCK_MONOTONIC nanoseconds
(within 5 us). RINGSIDE_SPAN_CLOCK=monotonic in the environment keeps spans on CLOCK_MONOTONIC;
bot.span_clock says which clock is in use and why. start()'s token is a span clock reading: pass
it to stop() only (a time.monotonic_ns() reading works too, and ends on CLOCK_MONOTONIC). The pure
backend times spans with time.monotonic_ns().

THREADS AND ASYNCIO. Every call may come from any thread; each thread writes a lane of its own,
claimed on its first record and retired when it ends, so threads never contend (the C extension
retires it as the OS thread exits, which may be a moment after join() returns; the pure backend
as Python lets go of the thread, before join() returns). Coroutines of one event loop share their
thread's lane; a call never awaits. A lane carries its thread's name, threading.current_thread().name
as the thread claimed it (UTF-8, cut to 32 bytes at a character's boundary), which the collector
shows with each exemplar, beside the thread's id; a thread renamed after its first record keeps its old name in the
lane until it claims another (a forked child's first record, a bot attached anew).

WORKERS AND FORK. A bot may be written by several processes at once, as its workers: each writes a
file of its own, <name>@<pid>, and the collector merges them into the bot's series.
- A child made by fork (os.fork(), multiprocessing's "fork" start method, a ProcessPoolExecutor
  or a server's workers forked from a preloaded app) needs no code: its first record,
  registration or .labels(...) of a new series through a bot of its parent makes it a worker of
  that bot. Its file starts with the parent's metrics at the same places, so the metrics it
  inherited record as they did in the parent, into the child's file; the parent's file keeps the
  parent's records only. A gauge's merge= (see Bot.gauge) says how the collector merges its
  workers' values. A child that never records creates no file and says nothing. Should the
  file not be made (a full /dev/shm, or the parent's file removed), the child writes nothing to
  that bot and says why once on stderr: its calls return False or None, and registering raises
  RingError. Until its first record, a child's bot is enabled (its records will be kept) and its
  path is None; once the file could not be made, it is not enabled. Gauges'
  inc() and dec() start from 0 in the child, as in any new process.
- A process started otherwise (spawn, forkserver, subprocess, a process of its own) asks for it:
  attach(name, worker=True). Without it, a second process attaching a bot is refused.
- A bot the child closes is closed there as anywhere: its calls raise RingError.

RUNTIME HEALTH, opt-in, one line each (ringside/_runtime.py has the details):
- bot.instrument_gc(): each garbage collection's pause, from its start to its end, into the
  histogram python_gc_pause (seconds) labelled generation "0", "1" or "2": one record per
  collection, by one gc.callbacks callback. Returns a GcPauses; asked again, the same one.
- bot.instrument_asyncio(loop=None, interval=0.1, name="main"): the event loop's lag, how late a
  probe run at once and then `interval` seconds after each run ran, into the histogram
  python_asyncio_lag (seconds) labelled loop=name: one record per probe. loop=None: the running
  loop. Returns a LoopLag. A step that blocks the loop T seconds shows as a lag of T - interval
  to T.
Each instrument's close() stops it, and bot.close() closes them; a record that finds the bot
closed raises nothing inside gc or the loop, the instrument stops. A forked child's collections
record into its worker file, as its other records.

PROMETHEUS_CLIENT'S DECLARATIONS. Counter("orders", "Orders sent", ["side"]), Gauge(...) and
Histogram(name, documentation, labelnames, namespace, subsystem, unit, registry, buckets=...) are
called as prometheus_client's: the bot is the registry (registry=bot; without it, the one bot this
process attached and has open, else RingError naming them), and the call is the bot's histogram(),
counter() or gauge(), which take documentation and labelnames as their second and third
positionals too. The documentation is the metric's HELP: at most 128 bytes of UTF-8 (RS_HELP_MAX),
refused at registration when longer (RingValueError), never cut. unit is Ringside's ("s", "ms",
"us", "ns", "bytes", "none"); a counter has none.

BUCKETS. Histogram(..., buckets=...) and bot.histogram(..., buckets=...) take prometheus_client's
argument, check it as it does (numbers in increasing order, else RingValueError at registration),
and do not use it: the file records each value exactly (an HDR histogram in the collector), whose
quantiles need no buckets, and the collector exports every histogram's `_bucket` series on one
fixed 1-2-5 ladder (so histogram_quantile merges bots, languages and hosts); a bot's own bounds
would make its buckets unmergeable with the others'.

RINGSIDE_DISABLED=1 gives bots that create no file and write nothing; their calls still check
their values.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
import weakref
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Iterable,
    Mapping,
    NoReturn,
    Protocol,
    SupportsFloat,
    SupportsIndex,
    TypeVar,
    Union,
    cast,
)

from . import _exemplars, _runtime, _values
from ._backend import Backend, Core
from ._errors import BotError, RingError, RingTypeError, RingValueError
from ._runtime import GcPauses, LoopLag
from ._values import KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM

if TYPE_CHECKING:
    import asyncio

    from typing_extensions import Self

__all__ = ["attach", "Bot", "Histogram", "Counter", "Gauge", "GcPauses", "LoopLag", "RingError", "BotError",
           "RingValueError", "RingTypeError", "Number", "ACCELERATED", "__version__"]
__version__ = "0.4.0"

# What the metrics' calls take: an int, a float, or a number float() or operator.index() takes
# (numpy's, Decimal, Fraction). Anything else, or a number out of range, raises (see VALUES).
Number = Union[SupportsFloat, SupportsIndex]


class _Step(Protocol):
    """Counter.inc, Gauge.inc and Gauge.dec: by 1 unless told."""

    def __call__(self, amount: Number = 1, /) -> None: ...


class _Stop(Protocol):
    """Histogram.stop: the token start() returned, and an exemplar if given."""

    def __call__(self, token: int, /, exemplar: Mapping[str, str] | None = None) -> bool: ...


def _load_backend() -> tuple[Backend, bool]:
    if os.environ.get("RINGSIDE_PURE", "").lower() not in ("1", "true", "yes"):
        try:
            from . import _ringside
            return _ringside, True
        except ImportError:
            pass
    from . import _pure
    return _pure, False


_default_backend, ACCELERATED = _load_backend()


def _strict_from_environment() -> bool:
    """RINGSIDE_STRICT=1 (or true, yes) in the environment: bots attached without strict= are strict."""
    return os.environ.get("RINGSIDE_STRICT", "").lower() in ("1", "true", "yes")


def attach(name: str, directory: str | None = None, *, lane_capacity: int | None = None, max_metrics: int | None = None,
           max_lanes: int | None = None, mode: int = 0o600, worker: bool = False,
           max_workers: int | None = None, sample_above_percent: int | None = None, strict: bool | None = None) -> Bot:
    """Attaches to the bot `name` as its process, or as one of its workers, creating its file if it
    does not exist.

    Args:
        name: 1 to 200 of [A-Za-z0-9._-]; the file is <directory>/ringside.<name>, or a
            worker's <directory>/ringside.<name>@<pid>.
        directory: default $RINGSIDE_DIR, else /dev/shm.
        lane_capacity: records a lane holds (a power of two, 16 to 2^28); None: 65,536 for a
            new file, whatever an existing one has (a number: an existing file must match).
        max_metrics: series the bot may register, 1 to 4096; None: 256 for a new file.
        max_lanes: threads recording at once, 1 to 1024; None: 64 for a new file.
        mode: the permission bits of a new file.
        worker: write the bot as one of its workers, beside other processes that write it (a
            pool's, a server's): this process writes a file of its own, <name>@<pid>, which the
            collector merges with the bot's other files. A forked child needs no option: see
            WORKERS AND FORK.
        max_workers: as a worker (or a forked child of this process), the bound on the bot's
            worker files, 1 to 65,536; None: 256. Past it, a new worker continues the file of a
            worker that is gone; when every one is alive, it writes nothing to the bot
            (RingError; counted in the bot's file as workers_refused).
        sample_above_percent: how full a thread's lane is, in percent (1 to 99), when its
            histograms' records start to be sampled and weighted rather than dropped when it
            fills (SAMPLING in ringside.h; the C extension only: the pure backend never samples);
            None: 50; 100: never (a full lane drops). Only while the bot's collector reads weights.
        strict: a value or an exemplar a metric cannot take raises RingValueError or RingTypeError,
            recording nothing, rather than being counted (see BAD VALUES): for tests. None: strict
            when RINGSIDE_STRICT=1 is in the environment.
    Raises RingError: another process holds the bot (or, with worker=True, this process's worker
    file), a corrupt or incompatible file, a full directory, another user's file, a symbolic link;
    RingValueError for a bad argument.
    """
    return Bot(name, directory, lane_capacity=lane_capacity, max_metrics=max_metrics,
               max_lanes=max_lanes, mode=mode, worker=worker, max_workers=max_workers,
               sample_above_percent=sample_above_percent, strict=strict)


# The bots of this process, for the fork handler (weak: a bot dropped without close() goes too).
_BOTS: weakref.WeakSet[Bot] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A lock another thread of the parent held is held forever in the child: make new ones.
    # (The backends disown the parent's files themselves.)
    for bot in list(_BOTS):
        bot._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Bot:
    """A bot attached by this process, which writes its file (or as a worker a file of its own: see
    attach()). A context manager that closes it."""

    def __init__(self, name: str, directory: str | None = None, *, lane_capacity: int | None = None,
                 max_metrics: int | None = None, max_lanes: int | None = None, mode: int = 0o600,
                 worker: bool = False, max_workers: int | None = None, sample_above_percent: int | None = None,
                 strict: bool | None = None, _backend: Backend | None = None) -> None:
        # _backend: _pure or _ringside, for the benchmark and the tests that run both in one process
        self.name = name
        # Bad values raise (for tests) rather than being counted: BAD VALUES.
        self.strict = _strict_from_environment() if strict is None else bool(strict)
        backend = _backend or _default_backend
        self._backend = backend
        self._core: Core = backend.attach(name, directory, lane_capacity, max_metrics, max_lanes, mode, bool(worker),
                                          max_workers, sample_above_percent)
        self._families: dict[str, _Metric] = {}  # name -> the Histogram, Counter or Gauge registered under it
        self._lock = threading.Lock()
        self._closed = False
        self._gc_pauses: GcPauses | None = None  # instrument_gc()'s, while active
        self._loop_lags: list[LoopLag] = []  # instrument_asyncio()'s, one per loop (those found inactive are let go)
        _BOTS.add(self)

    def __repr__(self) -> str:
        return f"<ringside.Bot {self.name} at {self.path}>"

    @property
    def span_clock(self) -> str:
        """What this process's spans (time(), start() and stop()) are timed with, and why, for an
        operator's log: "tsc: invariant TSC, clocksource tsc; 2.4454 GHz, ..." with the C
        extension where the TSC serves (chosen at the process's first attach: see SPANS), else
        "monotonic: ..." saying why (RINGSIDE_SPAN_CLOCK=monotonic, the kernel's clocksource, the
        pure backend)."""
        return self._backend.span_clock()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Detaches: retires every lane, unmaps the file and releases its lock; the records stay
        for the collector. Calls through the bot's metrics raise RingError afterwards. Closes the
        bot's instruments first (instrument_gc(), instrument_asyncio())."""
        with self._lock:
            self._closed = True
            instruments: list[GcPauses | LoopLag] = [*self._loop_lags, *([self._gc_pauses] if self._gc_pauses else [])]
            self._gc_pauses, self._loop_lags = None, []
        for instrument in instruments:
            instrument.close()
        self._core.close()
        _BOTS.discard(self)

    def instrument_gc(self) -> GcPauses:
        """Records each garbage collection's pause, the time from its start to its end, into the
        histogram python_gc_pause (seconds), labelled generation "0", "1" or "2": one record per
        collection, through one gc.callbacks callback. Returns the instrument, whose close()
        removes the callback; asked again while it is active, returns the same one. bot.close()
        closes it. On the pure backend, a collection that began inside a ringside call of the
        same thread is not recorded (counted in its `skipped`). Raises RingError on a closed bot
        (or if the name python_gc_pause is taken by another shape of metric)."""
        self._check_open("instrument_gc")
        histogram = self.histogram(_runtime.GC_METRIC, unit="s", labelnames=("generation",), help=_runtime.GC_HELP)
        series = tuple(histogram.labels(str(generation)) for generation in range(3))  # (takes the lock)
        with self._lock:
            self._check_open("instrument_gc")
            if self._gc_pauses is None or not self._gc_pauses.active:
                self._gc_pauses = GcPauses(self, histogram, series)
            return self._gc_pauses

    def instrument_asyncio(self, loop: asyncio.AbstractEventLoop | None = None, interval: Number = 0.1, *,
                           name: str = "main") -> LoopLag:
        """Records the event loop's lag, through a probe it runs at once and then `interval`
        seconds after each run: how late each run was against the time it was due, into the
        histogram python_asyncio_lag (seconds), labelled loop=`name`. One record per probe. A
        step that blocks the loop for T seconds shows as a lag between T - interval and T.

        loop: default the running loop (call it from a coroutine); else a loop, running or not
        yet, on any thread. Returns the probe, whose close() stops it; bot.close() stops it too,
        and it ends with its loop. A loop has one probe per bot: asked again with the same
        interval and name, returns it. Raises RingTypeError or RingValueError for an interval
        that is not a positive finite number of seconds; RingError with no running loop, for a
        closed loop or bot, or a loop with another probe of this bot."""
        import asyncio

        self._check_open("instrument_asyncio")
        seconds = _runtime.interval_seconds(self.name, interval)
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                raise RingError(f"bot {self.name}: instrument_asyncio: no event loop runs in this thread; call it from "
                                "a coroutine, or pass the loop") from None
        if loop.is_closed():
            raise RingError(f"bot {self.name}: instrument_asyncio: the event loop is closed")
        histogram = self.histogram(_runtime.LAG_METRIC, unit="s", labelnames=("loop",), help=_runtime.LAG_HELP)
        series = histogram.labels(name)  # (takes the lock)
        with self._lock:
            self._check_open("instrument_asyncio")
            self._loop_lags = [probe for probe in self._loop_lags if probe.active]
            for probe in self._loop_lags:
                if probe.loop is loop:
                    if (probe.interval, probe.name) == (seconds, str(name)):
                        return probe
                    raise RingError(f"bot {self.name}: instrument_asyncio: the loop has a probe already, every "
                                    f"{probe.interval} s named {probe.name!r}; asked for every {seconds} s named "
                                    f"{str(name)!r}: close() it first")
            probe = LoopLag(self, histogram, series, loop, seconds, str(name))
            self._loop_lags.append(probe)
            return probe

    def _check_open(self, call: str) -> None:
        if self._closed:
            raise RingError(f"bot {self.name} is closed: {call}() cannot instrument it")

    @property
    def path(self) -> str | None:
        """The file this process writes: the bot's, or its own as a worker (<name>@<pid>). None
        when disabled, and in a forked child until its first record makes it a worker."""
        return self._core.path

    @property
    def enabled(self) -> bool:
        """Whether this process's records are kept: False when disabled by RINGSIDE_DISABLED or
        closed, and in a forked child that could not make its worker file. A forked child that
        has not recorded yet is enabled: its first record makes its worker file."""
        return self._core.enabled

    @property
    def lanes_allocated(self) -> int:
        """Lanes in the bot's file: one per thread that recorded at once."""
        return self._core.lanes_allocated

    @property
    def metric_count(self) -> int:
        """Series registered (each label set of a metric is one)."""
        return self._core.metric_count

    @property
    def records_written(self) -> int:
        """Records written, over every lane."""
        return self._core.records_written

    @property
    def records_dropped(self) -> int:
        """Records lost: to full lanes, and from threads that found no lane."""
        return self._core.records_dropped

    def histogram(self, name: str, documentation: str = "", labelnames: str | Iterable[str] = (), *,
                  unit: str = "none", labels: Mapping[str, object] | None = None, help: str = "",
                  sample_every: int = 1, resolution: Number | None = None, signed: bool = False,
                  buckets: Iterable[Number] | None = None) -> Histogram:
        """A histogram: observe(value) in `unit` ("s", "ms", "us", "ns", "bytes" or "none").

        documentation (or help=, the same): the metric's HELP text, at most 128 bytes of UTF-8
        (RS_HELP_MAX; longer raises RingValueError here, never later). labelnames: the labels
        each series names with .labels(...); labels: a dict of labels every series carries.
        sample_every=N writes 1 observation in N per thread (the collector scales the counts by N).

        buckets: taken as prometheus_client takes it (an iterable of numbers in increasing order,
        else RingValueError), and not used: see BUCKETS.

        resolution, signed (a histogram in "none" or "bytes"; see SIGNED AND FRACTIONAL VALUES):
        its values are whole numbers of `resolution` of its unit, a power of ten (0.01: basis
        points to a hundredth), and may be below 0 when `signed`. observe() then takes any int or
        float, rounded to the nearest step (ties to even); one the histogram cannot hold is
        clamped to its nearest end and counted, a NaN counted and not recorded. The same histogram
        asked again with another resolution or sign raises RingError; a resolution that is not a
        power of ten from 1e-18 to 1e18 RingValueError."""
        _check_buckets(self.name, name, buckets)
        return self._family(Histogram, name, unit, labelnames, labels, _help(self.name, name, documentation, help),
                            sample_every, values=self._values(name, unit, resolution, signed))

    def counter(self, name: str, documentation: str = "", labelnames: str | Iterable[str] = (), *,
                labels: Mapping[str, object] | None = None, help: str = "", resolution: Number | None = None) -> Counter:
        """A counter: inc(n=1) adds whole numbers to an exact total. documentation, labelnames
        and labels as histogram()'s.

        resolution (a power of ten: 1e-6 counts dollars to a micro-dollar; see SIGNED AND
        FRACTIONAL VALUES): inc() then takes any int or float, rounded to the nearest step and
        exact in steps: inc(0.37) a million times adds exactly 370,000 dollars. An increment below
        0 or a NaN adds nothing, one past 2^64-1 steps adds 2^64-1, and each is counted."""
        return self._family(Counter, name, "none", labelnames, labels, _help(self.name, name, documentation, help), 1,
                            values=self._values(name, "none", resolution, False))

    def _values(self, name: str, unit: str, resolution: Number | None, signed: bool) -> tuple[bool, int | None]:
        """(signed, scale) of a metric of steps, checked; (False, None) for one of today's values."""
        if not isinstance(signed, bool):
            raise RingTypeError(f"bot {self.name}: metric {name}: signed={signed!r} is not True or False")
        if resolution is None and not signed:
            return False, None
        if unit in _values.NANOSECONDS_PER:
            raise RingValueError(f"bot {self.name}: metric {name}: a histogram in {unit} records whole nanoseconds: "
                                 "resolution and signed are for histograms in none or bytes")
        return signed, (0 if resolution is None else _values.scale_of(self.name, name, resolution))

    def gauge(self, name: str, documentation: str = "", labelnames: str | Iterable[str] = (), *, unit: str = "none",
              labels: Mapping[str, object] | None = None, help: str = "", merge: str = "last") -> Gauge:
        """A gauge: set(value), inc(n=1), dec(n=1), from any thread; the last value is exact.
        documentation, labelnames and labels as histogram()'s.

        merge: how the collector merges the gauge across the bot's workers (processes that write
        the bot: see WORKERS AND FORK): "last", the value set last by any of them (the default);
        "sum", "max" or "min" of the live workers' last values (a queue's depth, requests in
        flight: "sum"); or "per_worker", a series per live worker labelled pid (so its own labels
        may not name pid). A bot of one process has one value, whatever the policy. The same gauge
        asked again with another policy raises RingError; an unknown policy RingValueError."""
        if not isinstance(merge, str) or merge not in _values.MERGE_CODES:
            raise RingValueError(f"bot {self.name}: metric {name}: unknown gauge merge {merge!r}; one of "
                                 f"{', '.join(_values.MERGE_CODES)}")
        return self._family(Gauge, name, unit, labelnames, labels, _help(self.name, name, documentation, help), 1,
                            _values.MERGE_CODES[merge])

    def _family(self, cls: type[_M], name: str, unit: str, labelnames: str | Iterable[str],
                labels: Mapping[str, object] | None, help: str, sample_every: int, merge: int = 0,
                values: tuple[bool, int | None] = (False, None)) -> _M:
        _values.check_name(self.name, name)
        if unit not in _values.UNIT_CODES:
            raise RingValueError(f"bot {self.name}: metric {name}: unknown unit {unit!r}; one of "
                                 f"{', '.join(_values.UNIT_CODES)}")
        names = (labelnames,) if isinstance(labelnames, str) else tuple(labelnames)
        constant = dict(labels or {})
        try:
            _values.encode_labels({**constant, **{key: "" for key in names}})
        except ValueError as error:
            raise RingValueError(f"bot {self.name}: metric {name}: {error}") from None
        if len(set(names)) != len(names) or set(names) & set(constant):
            raise RingValueError(f"bot {self.name}: metric {name}: label names {names} repeat a name")
        if merge == _values.MERGE_CODES["per_worker"] and ("pid" in names or "pid" in constant):
            raise RingValueError(f"bot {self.name}: metric {name}: a per-worker gauge is labelled pid by the "
                                 "collector: it cannot have a label named pid")
        shape = (cls, unit, names, tuple(sorted(constant.items())), help, sample_every, values, merge)
        with self._lock:
            family = self._families.get(name)
            if family is not None:
                if family._shape != shape and family._shape[:-1] == shape[:-1]:  # the same but the merge policy
                    raise RingError(f"bot {self.name}: gauge {name} is already registered merging its workers by "
                                    f"{_values.merge_phrase(family._merge)}; asked for {_values.merge_phrase(merge)}")
                if family._shape != shape and family._shape[:-2] + family._shape[-1:] == shape[:-2] + shape[-1:]:
                    # the same but its values (the C producer's message)
                    raise RingError(f"bot {self.name}: metric {name} is already registered with "
                                    f"{_values.values_phrase(*family._values)}; asked for {_values.values_phrase(*values)}")
                if family._shape != shape or not isinstance(family, cls):  # (the shape names the class)
                    raise RingError(f"bot {self.name}: metric {name} is already a {type(family).__name__.lower()} "
                                    f"in {family.unit} with label names {family.labelnames}; asked for a "
                                    f"{cls.__name__.lower()} in {unit} with label names {names}")
                return family
            created = cls._create(self, name, unit, names, constant, help, sample_every, merge, values, shape)
            self._families[name] = created
            return created


def _needs_labels(kind_name: str, name: str, labelnames: tuple[str, ...]) -> Callable[..., NoReturn]:
    def call(*args: object, **kwargs: object) -> NoReturn:
        raise ValueError(f"{kind_name} {name} has label names {labelnames}: call .labels(...) first")
    return call


class _Metric:
    """A metric family, and each of its series: with label names, a family whose .labels(...)
    returns (and caches) the series; without, a series itself."""
    __slots__ = ("_bot", "name", "unit", "labelnames", "labelvalues", "_constant", "_help", "_sample_every",
                 "_merge", "_values", "_shape", "_children", "_index")
    _kind = 0
    _call_names: tuple[str, ...] = ()

    if not TYPE_CHECKING:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass  # __new__ (a subclass's) returned the family registered, set up by _create

    @classmethod
    def _create(cls, bot: Bot, name: str, unit: str, labelnames: tuple[str, ...], constant: dict[str, object],
                help: str, sample_every: int, merge: int, values: tuple[bool, int | None], shape: tuple[object, ...],
                labelvalues: tuple[str, ...] = ()) -> Self:
        """A family or series, registered (Bot._family and labels() call it; users call the
        class as prometheus_client's, or the bot's histogram(), counter() and gauge())."""
        metric = object.__new__(cls)
        metric._setup(bot, name, unit, labelnames, constant, help, sample_every, merge, values, shape, labelvalues)
        return metric

    def _setup(self, bot: Bot, name: str, unit: str, labelnames: tuple[str, ...], constant: dict[str, object],
               help: str, sample_every: int, merge: int, values: tuple[bool, int | None], shape: tuple[object, ...],
               labelvalues: tuple[str, ...]) -> None:
        self._bot, self.name, self.unit, self.labelnames = bot, name, unit, labelnames
        self._constant, self._help, self._sample_every, self._shape = constant, help, sample_every, shape
        self._merge = merge  # the gauge's rs_gauge_merge code (0 for the other kinds)
        self._values = values  # (signed, scale): scale None for today's values, else a metric of steps
        self.labelvalues = labelvalues
        self._children: dict[tuple[object, ...], Self] = {}
        self._index = -1  # a series' registry index (a family's: -1)
        if labelnames and not labelvalues:
            for call in self._call_names:  # a family records nothing itself
                setattr(self, call, _needs_labels(type(self).__name__.lower(), name, labelnames))
            return
        labels = dict(constant)
        labels.update(zip(labelnames, labelvalues))
        try:
            encoded = _values.encode_labels(labels)
        except ValueError as error:
            raise RingValueError(f"bot {bot.name}: metric {name}: {error}") from None
        kind, core = self._kind, bot._core
        signed, steps = values
        form = _values.FORM_SIGNED if signed else _values.FORM_UNSIGNED
        index = self._index = core.register(name, kind, _values.stored_unit(kind, unit), encoded, help, sample_every,
                                            merge, form, steps or 0)
        scale = _values.NANOSECONDS_PER.get(unit, 1) if kind == KIND_HISTOGRAM else 1
        # Not strict: what a metric cannot take is counted in its cell, never raised (BAD VALUES).
        count_value = None if bot.strict else functools.partial(core.count_refused, index, False)
        count_exemplar = None if bot.strict else functools.partial(core.count_refused, index, True)
        encode_exemplar = (_exemplars.refuser if signed else _exemplars.encoder)(bot.name, name, count_exemplar) \
            if kind == KIND_HISTOGRAM else None
        handle = core.handle(index, kind, scale, unit not in _values.NANOSECONDS_PER,
                             _values.converter(kind, bot.name, name, unit, signed, steps, count_value), encode_exemplar,
                             (form, steps or 0) if steps is not None or signed else None)
        for call in self._call_names:  # the backend's calls themselves: one call per record
            setattr(self, call, getattr(handle, call))

    def labels(self, *values: object, **named: object) -> Self:
        """The series of these label values (positional, in labelnames' order, or by name),
        registered on first use and cached."""
        if not named:
            child = self._children.get(values)  # the common case: seen before, positional
            if child is not None:
                return child
        key = self._key(values, named)
        child = self._children.get(key)
        if child is not None:
            return child
        strings = tuple(str(value) for value in key)
        with self._bot._lock:
            child = self._children.get(strings)
            if child is None:
                child = type(self)._create(self._bot, self.name, self.unit, self.labelnames, self._constant,
                                           self._help, self._sample_every, self._merge, self._values, self._shape,
                                           strings)
                self._children[strings] = child
            self._children[key] = child
        return child

    def _key(self, values: tuple[object, ...], named: dict[str, object]) -> tuple[object, ...]:
        """The label values given, positional or by name, in labelnames' order; checked."""
        kind = type(self).__name__.lower()
        if not self.labelnames:
            raise ValueError(f"{kind} {self.name} has no label names")
        if values and not named and len(values) == len(self.labelnames):
            return values
        if named and not values and set(named) == set(self.labelnames):
            return tuple(named[label] for label in self.labelnames)
        given = f"{values} and {named}" if values and named else values or named or "none"
        raise ValueError(f"{kind} {self.name}: expected values for {self.labelnames}, got {given}")

    def remove(self, *values: object, **named: object) -> None:
        """Retires the series of these label values, as prometheus_client's remove(): the
        collector drops it from every page (/metrics, /latest, the page) at its next look at the
        bot's cells, and lets go of what it kept of it. labels(...) with the same values again
        gives a new series object and a live series, which the collector shows anew (a counter
        from zero: Prometheus reads a reset). A series object kept from before still takes calls,
        whose records the collector drops (counted as refused). Values never asked for: nothing
        happens. Registration's lock, not for the hot path; a family without label names raises
        ValueError. See RETIRING A SERIES in ringside.h."""
        strings = tuple(str(value) for value in self._key(values, named))
        with self._bot._lock:
            self._retire_locked(strings)

    def clear(self) -> None:
        """Retires every series of the family (see remove()), as prometheus_client's clear()."""
        if not self.labelnames:
            raise ValueError(f"{type(self).__name__.lower()} {self.name} has no label names")
        with self._bot._lock:
            for strings in {child.labelvalues for child in self._children.values()}:
                self._retire_locked(strings)

    def _retire_locked(self, strings: tuple[str, ...]) -> None:
        child = self._children.get(strings)
        if child is None:
            return
        for key in [key for key, cached in self._children.items() if cached is child]:
            del self._children[key]
        self._bot._core.retire(child._index)

    def __repr__(self) -> str:
        labels = dict(self._constant)
        labels.update(zip(self.labelnames, self.labelvalues))
        shown = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
        return f"<ringside.{type(self).__name__} {self.name}{{{shown}}} of bot {self._bot.name}>"


class Histogram(_Metric):
    """observe(value, exemplar=None) in the histogram's unit; returns True if a record was
    written, False if sampling skipped it, the lane was full or the thread found none (a counted
    drop), or the bot is disabled (or, in a forked child, its worker file could not be made). A
    time histogram also times: time() as a context manager or a decorator (of functions and
    coroutines), start() and stop(token, exemplar=None). An exemplar ({"order_id": "A17"}) names
    what the value measured: see EXEMPLARS in the package's documentation."""
    __slots__ = ("observe", "start", "stop")
    _kind = KIND_HISTOGRAM
    _call_names = ("observe", "start", "stop")
    # The backend's calls, set on each series by _Metric.__init__ (declared as methods for type
    # checkers, whose messages then name Histogram.observe).
    start: Callable[[], int]  # a token: the span clock's reading (see Bot.span_clock), for stop()
    if TYPE_CHECKING:
        def observe(self, value: Number, /, exemplar: Mapping[str, str] | None = None) -> bool: ...

        # Records the time since start() returned the token.
        def stop(self, token: int, /, exemplar: Mapping[str, str] | None = None) -> bool: ...

    def __new__(cls, name: str, documentation: str = "", labelnames: str | Iterable[str] = (), namespace: str = "",
                subsystem: str = "", unit: str = "none", registry: Bot | None = None, *,
                labels: Mapping[str, object] | None = None, sample_every: int = 1, resolution: Number | None = None,
                signed: bool = False, buckets: Iterable[Number] | None = None) -> Histogram:
        """prometheus_client's Histogram(name, documentation, labelnames, namespace, subsystem,
        unit, registry, buckets=...): registry is the Bot (default: the one bot attached and
        open in this process); unit is Ringside's ("s", "ms", ...: see Bot.histogram); buckets
        is checked and not used (see BUCKETS). The same as registry.histogram(...)."""
        bot = _registry(registry, "Histogram", name)
        return bot.histogram(_full_name(namespace, subsystem, name), documentation, labelnames, unit=unit,
                             labels=labels, sample_every=sample_every, resolution=resolution, signed=signed,
                             buckets=buckets)

    def _setup(self, *args: Any) -> None:
        super()._setup(*args)
        if self.unit not in _values.NANOSECONDS_PER and not (self.labelnames and not self.labelvalues):
            for call in ("start", "stop"):
                setattr(self, call, self._untimed)

    def _untimed(self, *args: object) -> NoReturn:
        raise TypeError(f"histogram {self.name} is in {self.unit}: only a histogram in s, ms, us or ns times")

    def time(self, exemplar: Mapping[str, str] | None = None) -> _Timer:
        """Times a block (`with h.time():`) or each call of a function or coroutine (`@h.time()`),
        recording each span with `exemplar` if given. In a `with` block, the timer's `exemplar` may
        be set once it is known (`with h.time() as timer: ...; timer.exemplar = {...}`). The
        exemplar is checked as each span is recorded: a bad one raises then, recording nothing."""
        if self.labelnames and not self.labelvalues:
            self.start()  # raises: call .labels(...) first
        if self.unit not in _values.NANOSECONDS_PER:
            self._untimed()
        return _Timer(self.start, self.stop, exemplar)


class Counter(_Metric):
    """inc(n=1): adds a whole number; exact whatever the lanes hold. Declared with a resolution,
    any number, rounded to its steps (see SIGNED AND FRACTIONAL VALUES)."""
    __slots__ = ("inc",)
    _kind = KIND_COUNTER
    _call_names = ("inc",)
    inc: _Step  # the backend's call

    def __new__(cls, name: str, documentation: str = "", labelnames: str | Iterable[str] = (), namespace: str = "",
                subsystem: str = "", unit: str = "", registry: Bot | None = None, *,
                labels: Mapping[str, object] | None = None, resolution: Number | None = None) -> Counter:
        """prometheus_client's Counter(name, documentation, labelnames, namespace, subsystem,
        unit, registry): registry is the Bot (default: the one bot attached and open in this
        process); unit must be "" or "none" (a counter counts). The same as registry.counter(...)."""
        if unit not in ("", "none"):
            raise RingValueError(f"metric {name}: a counter has no unit; asked for unit={unit!r}")
        bot = _registry(registry, "Counter", name)
        return bot.counter(_full_name(namespace, subsystem, name), documentation, labelnames, labels=labels,
                           resolution=resolution)


class Gauge(_Metric):
    """set(value), inc(n=1), dec(n=1): a float; the last value set, by any thread, is kept
    exactly, and a record of it (for windowed min and max) may be dropped like any other. inc and
    dec start from 0 in each process, a forked child included, as prometheus_client's do. Across
    a bot's workers the collector merges it by the policy of Bot.gauge(merge=...)."""
    __slots__ = ("set", "inc", "dec")
    _kind = KIND_GAUGE
    _call_names = ("set", "inc", "dec")
    # The backend's calls; set returns whether a record was written, as observe does.
    set: Callable[[Number], bool]
    inc: _Step
    dec: _Step

    def __new__(cls, name: str, documentation: str = "", labelnames: str | Iterable[str] = (), namespace: str = "",
                subsystem: str = "", unit: str = "none", registry: Bot | None = None, *,
                labels: Mapping[str, object] | None = None, merge: str = "last") -> Gauge:
        """prometheus_client's Gauge(name, documentation, labelnames, namespace, subsystem, unit,
        registry): registry is the Bot (default: the one bot attached and open in this process);
        merge as Bot.gauge's (prometheus_client's multiprocess_mode has other names). The same as
        registry.gauge(...)."""
        bot = _registry(registry, "Gauge", name)
        return bot.gauge(_full_name(namespace, subsystem, name), documentation, labelnames, unit=unit, labels=labels,
                         merge=merge)


def _registry(registry: Bot | None, kind: str, name: str) -> Bot:
    """The bot a metric declared as prometheus_client's registers on."""
    if registry is not None:
        if not isinstance(registry, Bot):
            raise RingTypeError(f"{kind}({name!r}, ...): registry= takes a ringside.Bot (ringside.attach(...)), "
                                f"not {type(registry).__name__}")
        return registry
    bots = [bot for bot in list(_BOTS) if not bot._closed]
    if len(bots) != 1:
        attached = ", ".join(sorted(bot.name for bot in bots)) or "none"
        raise RingError(f"{kind}({name!r}, ...) registers on the one bot this process attached; {len(bots)} are "
                        f"attached and open ({attached}): attach one first, or pass registry=bot")
    return bots[0]


def _full_name(namespace: str, subsystem: str, name: str) -> str:
    """prometheus_client's: namespace_subsystem_name, each part if given."""
    return "_".join(part for part in (namespace, subsystem, name) if part)


def _help(bot: str, name: str, documentation: str, help: str) -> str:
    """The metric's HELP: documentation (prometheus_client's positional) or help=, not two texts."""
    if documentation and help and documentation != help:
        raise RingValueError(f"bot {bot}: metric {name}: documentation {documentation!r} and help={help!r} differ: "
                             "give one")
    text = documentation or help
    if not isinstance(text, str):
        raise RingTypeError(f"bot {bot}: metric {name}: documentation {text!r} is not a str")
    return text


def _check_buckets(bot: str, name: str, buckets: Iterable[Number] | None) -> None:
    """buckets= as prometheus_client checks it (numbers, increasing); Ringside does not use it:
    see BUCKETS."""
    if buckets is None:
        return
    try:
        bounds = [float(bound) for bound in buckets]
    except (TypeError, ValueError):
        raise RingValueError(f"bot {bot}: metric {name}: buckets={buckets!r} is not an iterable of numbers") from None
    if any(low >= high for low, high in zip(bounds, bounds[1:])):
        raise RingValueError(f"bot {bot}: metric {name}: buckets={buckets!r} are not in increasing order")


_M = TypeVar("_M", bound=_Metric)
_F = TypeVar("_F", bound=Callable[..., Any])


class _Timer:
    """What Histogram.time() returns: a context manager, and a decorator of functions and
    coroutine functions. Each call of a decorated function has its own start. `exemplar`, if not
    None, is recorded with each span: time()'s, or, in a `with` block, one set on the timer."""
    __slots__ = ("_start", "_stop", "_token", "exemplar")

    def __init__(self, start: Callable[[], int], stop: _Stop, exemplar: Mapping[str, str] | None = None) -> None:
        self._start, self._stop, self._token = start, stop, 0
        self.exemplar = exemplar

    def __enter__(self) -> Self:
        self._token = self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.exemplar is None:
            self._stop(self._token)
        else:
            self._stop(self._token, self.exemplar)

    def __call__(self, function: _F) -> _F:
        start, stop, exemplar = self._start, self._stop, self.exemplar
        if inspect.iscoroutinefunction(function):
            @functools.wraps(function)
            async def timed_coroutine(*args: Any, **kwargs: Any) -> Any:
                token = start()
                try:
                    return await function(*args, **kwargs)
                finally:
                    stop(token, exemplar)
            return cast(_F, timed_coroutine)  # functools.wraps keeps the function's signature

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            token = start()
            try:
                return function(*args, **kwargs)
            finally:
                stop(token, exemplar)
        return cast(_F, timed)
