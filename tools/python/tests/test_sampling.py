"""Adaptive sampling (SAMPLING in ringside.h): the C extension's lanes, filling past their threshold
with a consumer that reads weights, write weighted records, and every call is in a record's weight
or a drop once the thread's exit closes its groups; the pure backend never samples. The test plays
the consumer by writing the file's consumer line itself."""

import os
import struct
import threading
import time

import pytest

import ringside
from conftest import BotFile, missing, run_python

try:
    from ringside import _ringside
except ImportError:
    _ringside = None
from ringside import _pure


def declare_consumer(path, pid, reads_weights):
    """What a consumer stores at attach: its pid, and again when it reads weighted records."""
    with open(path, "r+b") as file:
        file.seek(0x100)
        file.write(struct.pack("<ii", pid, pid if reads_weights else 0))


def record_on_a_thread(histogram, calls):
    """Observes 0..calls-1 on a thread of its own, whose exit closes its lane's groups: join()
    returns once Python is done with the thread, and the C producer closes them in a pthread key
    destructor as the OS thread exits (its /proc/self/task entry then goes)."""
    thread = threading.Thread(target=lambda: [histogram.observe(value) for value in range(calls)])
    thread.start()
    thread.join()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/self/task/{thread.native_id}"):
        assert time.monotonic() < deadline, f"thread {thread.native_id} has not exited 10 s after join()"
        time.sleep(0.001)


@pytest.mark.parametrize("reads_weights", [True, False])
def test_the_extension_samples_a_filling_lane_only_for_a_consumer_that_reads_weights(ring_dir, reads_weights):
    if _ringside is None:
        missing("the C extension ringside._ringside is not built")
    bot = ringside.Bot("sampled", ring_dir, lane_capacity=64, _backend=_ringside)
    fill = bot.histogram("fill")
    declare_consumer(bot.path, 4242, reads_weights)
    record_on_a_thread(fill, 20_000)
    file = BotFile(bot.path)
    weights = file.weights("fill")
    assert all(weight & (weight - 1) == 0 for weight in weights)
    if reads_weights:
        assert max(weights) > 1, weights
        assert sum(weights) + file.dropped("fill") == 20_000
    else:
        assert weights == [1] * 64 and file.values("fill") == list(range(64))
        assert file.dropped("fill") == 20_000 - 64
    bot.close()


def test_the_pure_backend_never_samples(ring_dir):
    bot = ringside.Bot("pure", ring_dir, lane_capacity=64, sample_above_percent=50, _backend=_pure)
    fill = bot.histogram("fill")
    declare_consumer(bot.path, 4242, True)
    record_on_a_thread(fill, 1_000)
    file = BotFile(bot.path)
    assert file.weights("fill") == [1] * 64 and file.dropped("fill") == 1_000 - 64
    with open(bot.path, "rb") as raw:
        raw.seek(0x0B0)
        assert struct.unpack("<I", raw.read(4))[0] == 0, "sample_above: it never samples"
    bot.close()


@pytest.mark.parametrize("percent", [0, 101, -5, "50"])
def test_the_threshold_is_checked(ring_dir, backend, percent):
    with pytest.raises(ringside.RingValueError, match="sample_above_percent"):
        ringside.Bot("bad", ring_dir, sample_above_percent=percent, _backend=backend)


def test_the_exiting_thread_closes_its_groups_at_exit(ring_dir):
    """exit() runs no thread-exit hook for the thread that calls it: an atexit hook of the C
    producer writes that thread's open groups, so every call is still counted."""
    if _ringside is None:
        missing("the C extension ringside._ringside is not built")
    code = f"""
import struct, ringside
from ringside import _ringside
bot = ringside.Bot("exiting", {ring_dir!r}, lane_capacity=64, _backend=_ringside)
fill = bot.histogram("fill")
with open(bot.path, "r+b") as file:  # a consumer that reads weights, as the collector says it
    file.seek(0x100)
    file.write(struct.pack("<ii", 4242, 4242))
for value in range(20_000):
    fill.observe(value)
print(bot.path)
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    file = BotFile(result.stdout.strip())
    assert max(file.weights("fill")) > 1
    assert sum(file.weights("fill")) + file.dropped("fill") == 20_000
