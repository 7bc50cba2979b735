"""The doorbell (DOORBELL in ringside.h) on both backends: an attached process says in the header's
`rings_doorbell` (0x0B4) that it rings; a record, a counter increment or a gauge set that finds the
header's `doorbell` (0x140) set clears it (and wakes the collector: the end-to-end test, against the
real collector, sees its doorbell's wakes move); with the word 0, a call leaves it 0. A forked
child registers anew and rings through its worker file. Nothing here is timed: waits are bounded
generously, and only what the files and the collector's counters say is asserted."""

import mmap
import os
import re
import struct
import time

import pytest

from conftest import Collector, _collector_path, missing

RINGS_DOORBELL, DOORBELL = 0x0B4, 0x140


class Header:
    """The bot file's header through a mapping of the test's own, as the collector sees it."""

    def __init__(self, path):
        with open(path, "r+b") as file:
            self.mm = mmap.mmap(file.fileno(), 4096)

    def word(self, offset):
        return struct.unpack_from("<I", self.mm, offset)[0]

    def ring(self):
        """Plays the sleeping collector: sets the doorbell."""
        struct.pack_into("<I", self.mm, DOORBELL, 1)

    def close(self):
        self.mm.close()


@pytest.fixture
def header(bot):
    mapped = Header(bot.path)
    yield mapped
    mapped.close()


def test_an_attached_process_says_it_rings(bot, header):
    assert header.word(RINGS_DOORBELL) == 1  # membarrier's registration works on this kernel
    assert header.word(DOORBELL) == 0


def calls(bot):
    """Each call that publishes a record or moves a counter, by name: the hot paths and the slow
    ones (an exemplar, a float in seconds, steps of a resolution, a thread's first call); a span's
    stop has a test of its own."""
    histogram, seconds = bot.histogram("latency_ns", unit="ns"), bot.histogram("latency_s", unit="s")
    signed, counter = bot.histogram("drift", resolution=0.01, signed=True), bot.counter("orders")
    fractional, gauge = bot.counter("fees_usd", resolution=1e-6), bot.gauge("exposure")
    return {
        "observe": lambda: histogram.observe(1200),
        "observe with an exemplar": lambda: histogram.observe(1300, exemplar={"order_id": "A17"}),
        "observe in seconds": lambda: seconds.observe(0.0012),
        "signed observe": lambda: signed.observe(-3.5),
        "counter inc": lambda: counter.inc(),
        "counter inc of steps": lambda: fractional.inc(0.37),
        "gauge set": lambda: gauge.set(1.5),
        "gauge inc": lambda: gauge.inc(2),
    }


def test_a_record_an_increment_or_a_gauge_clears_a_set_doorbell(bot, header):
    for name, call in calls(bot).items():
        header.ring()
        call()  # the first is the thread's first call: the slow path, which claims the lane
        assert header.word(DOORBELL) == 0, f"{name} left the doorbell set"


def test_a_span_clears_a_set_doorbell(bot, header):
    histogram = bot.histogram("span_ns", unit="ns")
    histogram.observe(1)  # the lane claimed
    header.ring()
    with histogram.time():
        pass
    assert header.word(DOORBELL) == 0


def test_calls_leave_a_doorbell_at_rest_alone(bot, header):
    for name, call in calls(bot).items():
        call()
        assert header.word(DOORBELL) == 0, f"{name} set the doorbell"


def test_a_forked_child_rings_through_its_worker_file(bot, ring_dir):
    counter = bot.counter("orders")
    counter.inc()
    planted_read, planted_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a worker of the bot once it records; then records again when told
        status = 1
        try:
            os.close(planted_write)
            counter.inc()
            os.read(planted_read, 1)
            counter.inc()
            status = 0
        finally:
            os._exit(status)
    os.close(planted_read)
    worker = os.path.join(ring_dir, f"ringside.{bot.name}@{pid}")
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(worker) and time.monotonic() < deadline:
            time.sleep(0.01)
        header = Header(worker)
        # The file is made before its header is filled in: the word is stored as the child attaches.
        while header.word(RINGS_DOORBELL) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert header.word(RINGS_DOORBELL) == 1  # the child registered for itself
        header.ring()
        os.write(planted_write, b"x")
    finally:
        os.close(planted_write)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert header.word(DOORBELL) == 0
    header.close()


def family(collector, name):
    found = re.search(rf"^{name} (\S+)$", collector.get("/metrics"), re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.parametrize("what", ["observe", "counter inc", "gauge set"])
def test_a_sleeping_collector_is_woken_by_the_doorbell(bot, ring_dir, what):
    binary = _collector_path()
    if binary is None:
        missing("ringside-collector is not built: run `swift build` or set RINGSIDE_COLLECTOR")
    call = calls(bot)[what]
    call()  # the lane claimed, and the file announced by the first record
    collector = Collector(binary, ring_dir, "--poll", "10s")  # the longest poll: a wake is the doorbell's
    try:
        collector.wait_for("the collector asleep on the doorbell",
                           lambda: family(collector, "ringside_collector_doorbell_sleeps_total") > 0)
        before = family(collector, "ringside_collector_doorbell_wakes_total")

        def woken():
            # A call while the collector is between sleeps is drained by its look, and wakes
            # nothing: the next one, after it fell asleep again, does.
            call()
            deadline = time.monotonic() + 1
            while time.monotonic() < deadline:
                if family(collector, "ringside_collector_doorbell_wakes_total") > before:
                    return True
                time.sleep(0.02)
            return False
        collector.wait_for(f"a wake by {what}", woken)
    finally:
        collector.stop()
