"""Sampling and gathering (SAMPLING AND GATHERING in ringside.h): the C extension's lanes that would
fill before their consumer drains them write 1 call in 2^k and gather the others into the lane's
gather cells in shared memory, so every call is a record, a gathered call or a drop, with exact
sums and largest values, whatever the thread does next; the pure backend never samples, and keeps
its drops' sum and largest. The tests play the consumer by writing the file's consumer line, or run
the real collector (its /latest)."""

import random
import signal
import struct
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import ringside
from conftest import BotFile, missing

try:
    from ringside import _ringside
except ImportError:
    _ringside = None
from ringside import _pure


def need_extension():
    if _ringside is None:
        missing("the C extension ringside._ringside is not built")


def declare_consumer(path, pid, reads_weights):
    """What a consumer stores at attach: its pid, and again when it reads gather cells."""
    with open(path, "r+b") as file:
        file.seek(0x100)
        file.write(struct.pack("<ii", pid, pid if reads_weights else 0))


def burst_value(index):
    """Values spread over 1 ... 1,000,000 in no order: a sum or a largest that misses one shows."""
    return 1 + (index * 2_654_435_761) % 1_000_000


def expect_exact(file, name, values):
    """Every call of `values` a record, a gathered call or a drop, and each part's sum and largest
    exact: what a collector reads from this file (no consumer took any gathered largest)."""
    written = file.values(name)
    gathered, gathered_sum, gathered_max = file.gathered(name)
    dropped_sum, dropped_max = file.dropped_values(name)
    assert len(written) + gathered + file.dropped(name) == len(values)
    assert sum(written) + gathered_sum + dropped_sum == sum(values)
    assert max(max(written, default=0), gathered_max, dropped_max) == max(values)
    return gathered


@pytest.mark.parametrize("reads_weights", [True, False])
def test_the_extension_samples_a_filling_lane_only_for_a_consumer_that_reads_gather_cells(ring_dir, reads_weights):
    need_extension()
    bot = ringside.Bot("sampled", ring_dir, lane_capacity=64, _backend=_ringside)
    fill = bot.histogram("fill")
    declare_consumer(bot.path, 4242, reads_weights)
    values = list(range(20_000))
    for value in values:
        fill.observe(value)
    file = BotFile(bot.path)
    weights = file.weights("fill")
    assert all(weight & (weight - 1) == 0 for weight in weights)
    gathered = expect_exact(file, "fill", values)
    if reads_weights:
        assert max(weights) > 1 and gathered > 0, weights
        # Sampling uses the lane's top 16 records at the most (16 records at the least: 1/32 of 64 is less).
        assert weights[:48] == [1] * 48
    else:
        assert weights == [1] * 64 and file.values("fill") == list(range(64)) and gathered == 0
        assert file.dropped("fill") == 20_000 - 64
    bot.close()


def test_the_pure_backend_never_samples_and_keeps_its_drops_sum_and_largest(ring_dir):
    bot = ringside.Bot("pure", ring_dir, lane_capacity=64, sample_above_percent=50, _backend=_pure)
    fill = bot.histogram("fill")
    declare_consumer(bot.path, 4242, True)
    values = [burst_value(index) for index in range(1_000)]
    for value in values:
        fill.observe(value)
    file = BotFile(bot.path)
    assert file.weights("fill") == [1] * 64 and file.dropped("fill") == 1_000 - 64
    assert file.dropped_values("fill") == (sum(values[64:]), max(values[64:]))
    assert expect_exact(file, "fill", values) == 0
    with open(bot.path, "rb") as raw:
        raw.seek(0x0B0)
        assert struct.unpack("<I", raw.read(4))[0] == 0, "sample_above: it never samples"
    bot.close()


def test_a_thread_without_a_lane_keeps_its_drops_sum_and_largest(ring_dir, backend):
    bot = ringside.Bot("laneless", ring_dir, lane_capacity=16, max_lanes=1, _backend=backend)
    fill = bot.histogram("fill")
    fill.observe(1)  # this thread takes the one lane
    values = [burst_value(index) for index in range(100)]
    thread = threading.Thread(target=lambda: [fill.observe(value) for value in values])
    thread.start()
    thread.join()
    file = BotFile(bot.path)
    assert file.dropped("fill") == 100 and file.dropped_values("fill") == (sum(values), max(values))
    bot.close()


@pytest.mark.parametrize("percent", [0, 101, -5, "50"])
def test_the_threshold_is_checked(ring_dir, backend, percent):
    with pytest.raises(ringside.RingValueError, match="sample_above_percent"):
        ringside.Bot("bad", ring_dir, sample_above_percent=percent, _backend=backend)


def test_pool_threads_that_burst_once_and_wait_are_counted_while_they_wait(ring_dir):
    """Each pool thread bursts, then blocks holding its lane: its last calls, gathered, are in the
    file already (nothing waits for the thread to call again or exit)."""
    need_extension()
    bot = ringside.Bot("pool", ring_dir, lane_capacity=256, _backend=_ringside)
    fill = bot.histogram("fill")
    declare_consumer(bot.path, 4242, True)
    threads, calls = 4, 50_000
    release = threading.Event()
    started = threading.Barrier(threads + 1)

    def burst(thread):
        for index in range(thread * calls, (thread + 1) * calls):
            fill.observe(burst_value(index))
        started.wait()
        release.wait()  # idle, holding the lane

    with ThreadPoolExecutor(max_workers=threads) as pool:
        for thread in range(threads):
            pool.submit(burst, thread)
        started.wait()
        try:
            file = BotFile(bot.path)
            assert expect_exact(file, "fill", [burst_value(index) for index in range(threads * calls)]) > 0
        finally:
            release.set()
    bot.close()


def test_a_seeded_mix_of_drops_and_sampling_is_exact(ring_dir):
    """Bursts of any size into the smallest lane, drained by any amount between them (none, at
    times): calls == records + gathered + drops, each part's sum and largest exact."""
    need_extension()
    bot = ringside.Bot("mixed", ring_dir, lane_capacity=16, _backend=_ringside)
    fill = bot.histogram("fill")
    declare_consumer(bot.path, 4242, True)
    generator = random.Random(39)
    values = []
    read_at = 0x80  # the lane's read cursor, in lane 0's header (a consumer's one store)
    lanes_offset = struct.unpack_from("<Q", open(bot.path, "rb").read(0x38), 0x30)[0]
    written = []

    def cursors(raw):
        """The lane's write and read cursors, as the open file holds them now."""
        raw.seek(lanes_offset)
        write = struct.unpack("<Q", raw.read(8))[0]
        raw.seek(lanes_offset + read_at)
        return write, struct.unpack("<Q", raw.read(8))[0]

    for _ in range(300):
        # Now and then a long burst: a full lane tries 1 call in 32,768 (SAMPLING), and drops it.
        long = 40_000 if generator.randrange(40) == 0 else 0
        for _ in range(generator.randrange(2_000) + long):
            value = generator.randrange(10_000_000)
            fill.observe(value)
            values.append(value)
        # Drain up to 20 records: read them, then move the read cursor past them, as a consumer does.
        file = BotFile(bot.path)
        with open(bot.path, "r+b") as raw:
            write, read = cursors(raw)
            taken = min(write - read, generator.randrange(20))
            all_values = file.values("fill")  # the lane's records, oldest first (up to 16)
            written += all_values[len(all_values) - (write - read):][:taken]
            raw.seek(lanes_offset + read_at)
            raw.write(struct.pack("<Q", read + taken))
    file = BotFile(bot.path)
    with open(bot.path, "rb") as raw:
        write, read = cursors(raw)
    left = file.values("fill")
    written += left[len(left) - (write - read):]
    gathered, gathered_sum, gathered_max = file.gathered("fill")
    dropped_sum, dropped_max = file.dropped_values("fill")
    assert gathered > 0 and file.dropped("fill") > 0, "sampled, and dropped"
    assert len(written) + gathered + file.dropped("fill") == len(values)
    assert sum(written) + gathered_sum + dropped_sum == sum(values)
    assert max(max(written), gathered_max, dropped_max) == max(values)
    bot.close()


def test_eight_threads_of_a_million_into_lanes_of_a_million_are_never_sampled(ring_dir):
    """A lane samples in its top 1/32 at the most: records that fit below it are written as they
    are, whatever the consumer does (here: nothing at all)."""
    need_extension()
    bot = ringside.Bot("eight", ring_dir, lane_capacity=1 << 20, _backend=_ringside)
    fill = bot.histogram("fill")
    declare_consumer(bot.path, 4242, True)
    threads, calls = 8, 1_000_000
    claimed = threading.Barrier(threads)

    def burst(thread):
        # Each thread's first call claims its lane; none goes on before all have one, or a thread
        # that finished first would hand its full lane to one that had not begun.
        fill.observe(thread * calls)
        claimed.wait()
        for index in range(thread * calls + 1, (thread + 1) * calls):
            fill.observe(index)

    workers = [threading.Thread(target=burst, args=(thread,)) for thread in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    file = BotFile(bot.path)
    assert file.gathered("fill")[0] == 0 and file.dropped("fill") == 0
    assert set(file.weights("fill")) == {1}
    assert sorted(file.values("fill")) == list(range(threads * calls))
    bot.close()


BURST_IDLE = """
import struct, sys, time, ringside
from ringside import _ringside
bot = ringside.Bot("idle", sys.argv[1], lane_capacity=256, _backend=_ringside)
fill = bot.histogram("fill")
print("attached", flush=True)
sys.stdin.readline()
for index in range(int(sys.argv[2])):
    fill.observe(1 + (index * 2_654_435_761) % 1_000_000)
print("done", flush=True)
while True:
    time.sleep(60)  # idle with the bot attached, until killed
"""


def test_a_burst_then_idle_then_sigkill_is_exact_in_the_collector(ring_dir, collector):
    """The real collector: a bot bursts far past the drain, idles with its lane held, and is
    killed; its count, sum and largest are exact while it idles and after."""
    need_extension()
    calls = 300_000
    values = [burst_value(index) for index in range(calls)]
    process = subprocess.Popen([sys.executable, "-c", BURST_IDLE, ring_dir, str(calls)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "attached"
        # The collector attaches before the burst, so the lane may sample.
        collector.wait_for("the collector to attach the bot",
                           lambda: any(ring["name"] == "idle" for ring in collector.latest().get("rings", [])))
        process.stdin.write("go\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "done"

        def exact(document):
            series = next((s for s in document.get("series", []) if s["metric"] == "fill"), None)
            if series is None or series["total_count"] + series["dropped_records"] != calls:
                return None
            if series["total_sum"] + series["dropped_sum"] != sum(values):
                return None
            return series

        idle = collector.wait_for("every call counted while the bot idles", lambda: exact(collector.latest()), timeout=30)
        assert idle["sampled_records"] > 0, idle
        assert max(idle["total_max"], idle["dropped_max"]) == max(values)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

        def dead_and_exact():
            document = collector.latest()
            ring = next((r for r in document.get("rings", []) if r["name"] == "idle"), None)
            return exact(document) if ring is not None and not ring["alive"] else None

        killed = collector.wait_for("the bot seen dead, every call counted", dead_and_exact, timeout=30)
        assert killed["total_count"] == idle["total_count"]
        assert max(killed["total_max"], killed["dropped_max"]) == max(values)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)

