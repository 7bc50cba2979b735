"""Runtime health: Bot.instrument_gc() (a pause per collection) and Bot.instrument_asyncio() (the
event loop's lag, by a periodic probe), on both backends, read back from the bot's file."""

import asyncio
import gc
import math
import statistics
import sys
import threading
import time
from decimal import Decimal

import pytest

import ringside
from conftest import BotFile, _ringside, run_python

MS = 1_000_000  # nanoseconds, as the file stores seconds


def attach(backend, ring_dir, name, **options):
    return ringside.Bot(name, ring_dir, _backend=backend, **options)


def backend_expression(backend):
    """The backend, as code for a script run by run_python."""
    name = "_ringside" if backend is _ringside else "_pure"
    return f"__import__('ringside.{name}').{name}"


def pauses(bot, generation):
    return BotFile(bot.path).values("python_gc_pause", f"generation={generation}")


def lags(bot, loop="main"):
    return BotFile(bot.path).values("python_asyncio_lag", f"loop={loop}")


@pytest.fixture
def no_automatic_gc():
    """Only the test's gc.collect() calls collect: the counts of collections are the test's."""
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()


@pytest.fixture
def unraisable():
    """What raised inside gc (a callback's exception goes to sys.unraisablehook, not the caller)."""
    seen = []
    previous, sys.unraisablehook = sys.unraisablehook, seen.append
    yield seen
    sys.unraisablehook = previous


def make_heap(objects):
    """`objects` lists in reference cycles, alive: a full collection walks each of them."""
    heap = [[] for _ in range(objects)]
    for node in heap:
        node.append(node)
    return heap


# MARK: - GC pauses

def test_a_forced_collection_records_one_pause_of_the_right_order(backend, ring_dir, no_automatic_gc, unraisable):
    bot = attach(backend, ring_dir, "gc")
    instrument = bot.instrument_gc()
    heap = make_heap(300_000)
    measured = []
    for _ in range(3):
        start = time.perf_counter_ns()  # CLOCK_MONOTONIC, the clock both backends time spans with
        gc.collect()
        measured.append(time.perf_counter_ns() - start)
    gc.collect(0)
    gc.collect(1)
    recorded = pauses(bot, 2)
    # One record per collection, in its generation's series; none for collections not made.
    assert len(recorded) == 3 and len(pauses(bot, 1)) == 1 and len(pauses(bot, 0)) == 1
    for value, around in zip(recorded, measured):
        assert 1_000 <= value <= around  # timed inside the call: never longer than the call
        # 300,000 objects cannot be walked in under 0.1 ms on any machine this runs on: the value
        # is the collection's, not a callback's or the clock's.
        assert value >= 100_000, (recorded, measured)
    # Most of the call is the collection; a preemption outside it (within the call, outside the
    # collection) could make one call look longer, hardly all three.
    assert any(value >= around / 2 for value, around in zip(recorded, measured)), (recorded, measured)
    assert instrument.skipped == 0 and not unraisable
    del heap
    bot.close()


def test_instrument_gc_installs_once_and_close_removes_it(backend, ring_dir, no_automatic_gc, unraisable):
    callbacks = len(gc.callbacks)
    bot = attach(backend, ring_dir, "gc-once")
    first = bot.instrument_gc()
    assert bot.instrument_gc() is first and first.active
    assert len(gc.callbacks) == callbacks + 1
    assert first.histogram is bot.histogram("python_gc_pause", unit="s", labelnames=("generation",),
                                            help=ringside._runtime.GC_HELP)
    gc.collect()
    first.close()
    first.close()  # again: nothing
    assert not first.active and len(gc.callbacks) == callbacks
    gc.collect()
    assert len(pauses(bot, 2)) == 1  # nothing after close()
    second = bot.instrument_gc()  # a closed one is replaced
    assert second is not first and second.active
    gc.collect()
    assert len(pauses(bot, 2)) == 2
    bot.close()  # closes the bot's instruments first
    assert not second.active and len(gc.callbacks) == callbacks
    gc.collect()  # no callback left to raise
    with pytest.raises(ringside.RingError, match="closed"):
        bot.instrument_gc()
    assert not unraisable


def test_a_collection_as_the_bot_closes_raises_nothing_inside_gc(backend, ring_dir, no_automatic_gc, unraisable):
    callbacks = len(gc.callbacks)
    bot = attach(backend, ring_dir, "gc-closing")
    instrument = bot.instrument_gc()
    bot._core.close()  # as bot.close() in another thread, between a collection's start and stop
    gc.collect()  # the record raises RingError inside the callback: caught, the instrument stops
    assert not instrument.active and not unraisable
    gc.collect()
    bot.close()
    assert len(gc.callbacks) == callbacks and not unraisable


def test_a_name_taken_by_another_metric_is_refused(backend, ring_dir):
    bot = attach(backend, ring_dir, "gc-taken")
    bot.counter("python_gc_pause")
    callbacks = len(gc.callbacks)
    with pytest.raises(ringside.RingError, match="already a counter"):
        bot.instrument_gc()
    assert len(gc.callbacks) == callbacks
    bot.close()


def test_on_the_pure_backend_a_collection_inside_a_ringside_call_is_skipped(backend, ring_dir, no_automatic_gc):
    # A collection that begins inside the pure backend (halfway through a record, or a lane being
    # added) would interleave the callback's record with it: the callback records nothing there.
    # Such a frame, made here: a function whose code says it is ringside/_pure.py's.
    bot = attach(backend, ring_dir, "gc-inside")
    instrument = bot.instrument_gc()
    pure_file = ringside._pure.Bot._slow.__code__.co_filename
    scope = {}
    exec(compile("def interrupted(callback, info):\n    callback('stop', info)\n", pure_file, "exec"), scope)
    info = {"generation": 2, "collected": 0, "uncollectable": 0}
    instrument._on_gc("start", info)
    scope["interrupted"](instrument._on_gc, info)
    if backend is ringside._pure:
        assert instrument.skipped == 1 and pauses(bot, 2) == []
    else:  # the extension's calls run no Python code while they write: no frame of theirs to find
        assert instrument.skipped == 0 and len(pauses(bot, 2)) == 1
    gc.collect()  # an ordinary one is recorded
    assert len(pauses(bot, 2)) == (1 if backend is ringside._pure else 2)
    bot.close()


FORKED_GC = """
import gc, os, ringside
gc.disable()  # (inherited by the child) only the collections asked for
bot = ringside.Bot("gc-fork", {directory!r}, _backend={backend})
bot.instrument_gc()
pid = os.fork()
if pid == 0:
    gc.collect()
    gc.collect()
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(pid, os.waitstatus_to_exitcode(status), flush=True)
bot.close()
"""


def test_a_forked_childs_collections_record_into_its_worker_file(backend, ring_dir):
    result = run_python(FORKED_GC.format(backend=backend_expression(backend), directory=ring_dir))
    assert result.returncode == 0 and result.stderr == "", result.stderr
    pid, status = map(int, result.stdout.split())
    assert status == 0
    child = BotFile(f"{ring_dir}/ringside.gc-fork@{pid}")
    assert len(child.values("python_gc_pause", "generation=2")) == 2
    assert BotFile(f"{ring_dir}/ringside.gc-fork").values("python_gc_pause", "generation=2") == []


# MARK: - Event loop lag

def test_a_blocking_sleep_in_a_coroutine_shows_as_lag(backend, ring_dir):
    bot = attach(backend, ring_dir, "lag")
    interval = 0.01

    async def main():
        started = time.monotonic()
        probe = bot.instrument_asyncio(interval=interval)  # the first probe is due now
        time.sleep(0.05)  # blocks the loop: that probe runs 50 ms late at least
        await asyncio.sleep(0.2)  # idle: the probes run about on time
        idle = len(lags(bot))
        time.sleep(0.05)  # blocks again: the probe due in the next 10 ms runs 40 ms late at least
        await asyncio.sleep(0.05)
        probe.close()
        elapsed = time.monotonic() - started
        count = len(lags(bot))
        await asyncio.sleep(0.05)
        assert len(lags(bot)) == count and not probe.active  # closed: no more probes
        return idle, elapsed

    idle, elapsed = asyncio.run(main())
    values = lags(bot)
    # A probe every interval after the last ran, so at most one per interval: one record each.
    assert 10 <= len(values) <= elapsed / interval + 1
    assert values[0] >= 50 * MS - 1_000  # (the loop's clock is a float of seconds)
    assert max(values[1:idle]) < values[0]  # the idle ones: smaller
    assert max(values[idle:]) >= 40 * MS - 1_000
    assert max(values) < 2_000 * MS  # generous: a loaded machine may stall the loop besides
    # Idle probes are about on time: half of them, at least, within 20 ms (a few ms is usual).
    assert statistics.median(values[1:idle]) < 20 * MS, values
    bot.close()


def test_the_probe_ends_with_its_loop_and_takes_an_explicit_loop(backend, ring_dir):
    bot = attach(backend, ring_dir, "lag-loop")
    loop = asyncio.new_event_loop()
    probe = bot.instrument_asyncio(loop, interval=0.01, name="feed")  # a loop not running yet
    assert probe.loop is loop and probe.interval == 0.01 and probe.name == "feed" and probe.active
    loop.run_until_complete(asyncio.sleep(0.05))
    loop.close()
    assert not probe.active  # ended with its loop
    assert 1 <= len(lags(bot, "feed")) <= 0.05 / 0.01 + 2
    assert [entry[1:] for entry in BotFile(bot.path).registry] == [("python_asyncio_lag", 3, "loop=feed")]
    bot.close()


def test_a_probe_of_a_loop_in_another_thread(backend, ring_dir):
    bot = attach(backend, ring_dir, "lag-thread")
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        probe = bot.instrument_asyncio(loop, interval=0.01, name="other")  # from this thread
        time.sleep(0.1)
        probe.close()  # off the loop's thread: its next run ends it
        time.sleep(0.05)
        count = len(lags(bot, "other"))
        time.sleep(0.05)
        assert count >= 2 and len(lags(bot, "other")) == count
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
    bot.close()


def test_instrument_asyncio_installs_once_per_loop(backend, ring_dir):
    bot = attach(backend, ring_dir, "lag-once")

    async def main():
        probe = bot.instrument_asyncio(interval=0.05)
        assert bot.instrument_asyncio(interval=0.05) is probe
        assert bot.instrument_asyncio(interval=Decimal("0.05")) is probe  # a number float() takes
        with pytest.raises(ringside.RingError, match="has a probe already"):
            bot.instrument_asyncio(interval=0.1)
        with pytest.raises(ringside.RingError, match="has a probe already"):
            bot.instrument_asyncio(interval=0.05, name="other")
        probe.close()
        probe.close()
        again = bot.instrument_asyncio(interval=0.1)
        assert again is not probe and again.active
        bot.close()  # stops it, on the loop's thread
        assert not again.active
        await asyncio.sleep(0.15)  # no probe runs on the closed bot
        with pytest.raises(ringside.RingError, match="closed"):
            bot.instrument_asyncio()

    asyncio.run(main())


def test_a_bot_closed_from_another_thread_ends_the_probe_quietly(backend, ring_dir):
    bot = attach(backend, ring_dir, "lag-closing")
    errors = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context))
        probe = bot.instrument_asyncio(interval=0.01)
        await asyncio.sleep(0.03)
        await asyncio.to_thread(bot.close)
        await asyncio.sleep(0.05)
        assert not probe.active
        # A probe still due when the core closes under it (bot.close() marks it first): no error.
        quiet = attach(backend, ring_dir, "lag-closing-2")
        other = quiet.instrument_asyncio(interval=0.01)
        quiet._core.close()
        await asyncio.sleep(0.05)
        assert not other.active
        quiet.close()

    asyncio.run(main())
    assert errors == []


@pytest.mark.parametrize("interval, error", [
    (0, ringside.RingValueError), (-0.1, ringside.RingValueError), (math.nan, ringside.RingValueError),
    (math.inf, ringside.RingValueError), (10**400, ringside.RingValueError), ("0.1", ringside.RingTypeError),
    (None, ringside.RingTypeError), (True, ringside.RingTypeError),
])
def test_a_bad_interval_is_refused(backend, ring_dir, interval, error):
    bot = attach(backend, ring_dir, "lag-bad")

    async def main():
        with pytest.raises(error, match="interval"):
            bot.instrument_asyncio(interval=interval)

    asyncio.run(main())
    assert issubclass(error, (ValueError, TypeError))
    bot.close()


def test_without_a_running_loop_or_with_a_closed_one_it_says_so(backend, ring_dir):
    bot = attach(backend, ring_dir, "lag-no-loop")
    with pytest.raises(ringside.RingError, match="no event loop runs"):
        bot.instrument_asyncio()
    loop = asyncio.new_event_loop()
    loop.close()
    with pytest.raises(ringside.RingError, match="the event loop is closed"):
        bot.instrument_asyncio(loop)
    bot.close()
