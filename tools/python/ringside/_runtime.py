"""Runtime health, opt-in, one line each: Bot.instrument_gc() and Bot.instrument_asyncio().

GC PAUSES. One gc.callbacks callback, added by instrument_gc(), reads the precise clock (the
histogram's start()) in a collection's "start" phase and records the time since (stop(), a span)
in its "stop" phase: ONE record per collection, into python_gc_pause{generation="0"|"1"|"2"} in
seconds. The three series are registered at install, so the callback looks nothing up. The pause
is the collection's time as the collecting thread sees it, the other gc.callbacks that run between
the two phases included. One start time is kept for the process, not one per thread: CPython runs
one collection at a time (gc's `collecting` flag is set before the "start" callbacks and cleared
after the "stop" ones; the free-threaded build stops the world), so a "stop" always follows its
own "start".

A callback runs wherever the collection began, between any two bytecodes of any code. On the pure
backend that may be inside a ringside call of the same thread, halfway through publishing a
record or adding a lane, which a record made from the callback would then interleave with: there,
the callback records nothing and counts the collection in GcPauses.skipped (it looks at the frames
the collection interrupted: ringside/_pure.py, or threading.py or _values.py called from it). The
C extension's calls run no Python code while they write, so it needs no such care.

EVENT LOOP LAG. instrument_asyncio() schedules a probe on the loop: at once, then `interval`
seconds after each run (loop.call_at). Each run records how late it ran, the loop's clock at the
run minus the time it was due, into python_asyncio_lag{loop=<name>} in seconds: ONE record per
probe. A callback or coroutine step that blocks the loop for T seconds delays the probe due
during it by up to T: the largest lag it shows lies between T - interval and T.

CLOSING. GcPauses.close() removes the callback; LoopLag.close() stops the probe (on the loop's
thread at once; from another thread its next run, which records nothing). Bot.close() closes the
bot's instruments first. A record that finds the bot closed (a collection under way in another
thread as it closed) raises nothing inside gc or the loop: the instrument stops recording. A
probe ends with its loop, when the loop closes. An instrument keeps its bot alive until it is
closed (gc.callbacks, or the loop, holds it, and it holds the bot). A forked child inherits the gc
callback with the rest of the process: its collections record into its own worker file, as any
record there (so a child that collects makes one).
"""

from __future__ import annotations

import gc
import math
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

from . import _values
from ._errors import RingError, RingTypeError, RingValueError

if TYPE_CHECKING:  # asyncio, and the pure backend, are imported only where used (asyncio takes ~15 ms)
    import asyncio

    from . import Bot, Histogram

GC_METRIC = "python_gc_pause"
GC_HELP = "Time each garbage collection took, by generation"
LAG_METRIC = "python_asyncio_lag"
LAG_HELP = "How late the event loop ran a probe, against the time it was due"

# What a collection may interrupt on the pure backend with a lane half written (see above): code
# of ringside/_pure.py itself, or of what it calls that runs Python code (threading's is_alive()
# and current_thread(), a value's converter) with its frames below.
_CALLED_FROM_PURE = frozenset({threading.Thread.is_alive.__code__.co_filename, _values.converter.__code__.co_filename})


def _inside(pure_file: str, frame: FrameType | None) -> bool:
    """Whether `frame`, the innermost one a collection interrupted, is in the pure backend's
    file `pure_file` (or in what it called)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename == pure_file:
            return True
        if filename not in _CALLED_FROM_PURE:
            return False
        frame = frame.f_back
    return False


class GcPauses:
    """What Bot.instrument_gc() returns: the gc.callbacks callback that records each collection's
    pause into `histogram` (python_gc_pause, labelled generation). close() removes it."""

    def __init__(self, bot: Bot, histogram: Histogram, series: tuple[Histogram, ...]) -> None:
        self.bot, self.histogram = bot, histogram
        self._series = series  # each generation's, registered already: the callback looks nothing up
        self._clock = self._series[0].start
        # On the pure backend, the frames a collection interrupted are looked at (see above).
        # The pure backend's core is a Python class (its code's file is _pure.py); the extension's is not.
        code = getattr(getattr(type(bot._core), "_slow", None), "__code__", None)
        self._pure_file: str | None = code.co_filename if code is not None else None
        self._started = 0  # the clock at the "start" phase of the collection under way; 0: none
        self._active = True
        self.skipped = 0  # collections not recorded: begun inside the pure backend, or of an unknown generation
        self._callback = self._on_gc  # one bound method, to remove the very object added
        gc.callbacks.append(self._callback)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = self._clock()
            return
        started, self._started = self._started, 0
        if not started or not self._active:
            return
        generation = info["generation"]
        if (self._pure_file is not None and _inside(self._pure_file, sys._getframe(1))) or not 0 <= generation < 3:
            self.skipped += 1
            return
        try:
            self._series[generation].stop(started)
        except RingError:  # the bot closed meanwhile (in another thread): nothing raises inside gc
            self._active = False

    @property
    def active(self) -> bool:
        """Whether collections are still recorded: not closed, nor its bot."""
        return self._active

    def close(self) -> None:
        """Removes the callback from gc.callbacks; again does nothing."""
        self._active = False
        try:
            gc.callbacks.remove(self._callback)
        except ValueError:
            pass  # removed already (by close(), or by someone else)

    def __repr__(self) -> str:
        return f"<ringside.GcPauses of bot {self.bot.name}, {'active' if self._active else 'closed'}, skipped {self.skipped}>"


class LoopLag:
    """What Bot.instrument_asyncio() returns: the probe that records `loop`'s lag every
    `interval` seconds into `histogram` (python_asyncio_lag, labelled loop=`name`). close() stops
    it."""

    def __init__(self, bot: Bot, histogram: Histogram, series: Histogram, loop: asyncio.AbstractEventLoop,
                 interval: float, name: str) -> None:
        self.bot, self.histogram, self.loop, self.interval, self.name = bot, histogram, loop, interval, name
        self._series = series  # histogram.labels(name)
        self._closed = False
        self._handle: asyncio.Handle | None = None
        self._due = loop.time()
        # From any thread, the loop running or not yet: the first probe is due now.
        self._handle = loop.call_soon_threadsafe(self._probe)

    def _probe(self) -> None:
        now = self.loop.time()
        if self._closed:
            return
        lag = now - self._due
        try:
            self._series.observe(lag if lag > 0.0 else 0.0)
        except RingError:  # the bot is closed: the probe ends, raising nothing inside the loop
            self._closed = True
            return
        self._due = now + self.interval
        self._handle = self.loop.call_at(self._due, self._probe)

    @property
    def active(self) -> bool:
        """Whether the probe still runs: not closed, nor its bot, nor its loop."""
        return not self._closed and not self.loop.is_closed()

    def close(self) -> None:
        """Stops the probe: on the loop's thread at once; from another, its next run ends it
        without recording. Again does nothing."""
        import asyncio

        self._closed = True
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = not self.loop.is_running()  # no loop runs here: this one runs nowhere, or elsewhere
        if on_loop and self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def __repr__(self) -> str:
        state = "active" if self.active else "closed"
        return f"<ringside.LoopLag {self.name} of bot {self.bot.name}, every {self.interval} s, {state}>"


def interval_seconds(bot: str, value: Any) -> float:
    """A probe's interval: a positive finite number of seconds, as a float."""
    if isinstance(value, (bool, str, bytes)) or not (hasattr(type(value), "__float__") or hasattr(type(value), "__index__")):
        raise RingTypeError(f"bot {bot}: instrument_asyncio: interval is a number of seconds, not {value!r}")
    try:
        seconds = float(value)
    except (OverflowError, ValueError):  # an int past a float's range, say
        seconds = math.nan
    if not (seconds > 0.0 and math.isfinite(seconds)):
        raise RingValueError(f"bot {bot}: instrument_asyncio: interval must be a positive finite number of seconds, "
                             f"not {value!r}")
    return seconds
