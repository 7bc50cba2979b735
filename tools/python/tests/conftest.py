"""Fixtures of ringside's Python suite: the real collector binary, ring directories of each
test's own under /dev/shm, both backends (the C extension and the pure module), and BotFile, which
reads a bot file (a worker's too) as it lies on disk.

RINGSIDE_COLLECTOR names the collector binary; else the package's build folder is searched
(.build/debug, then .build/release, from `swift build`). Without it the tests that need it skip,
or fail under CI=true, as do the C extension's tests when the extension was not built."""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import pytest

import ringside
from ringside import _pure

try:
    from ringside import _ringside
except ImportError:
    _ringside = None

# The OTLP receiver and its fixtures, shared by test_otlp and test_otlp_tls.
pytest_plugins = ("otlp_peer",)

REPOSITORY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
# The benchmarks' modules are the tests' too: test_gunicorn serves the side-by-side benchmark's app.
sys.path.append(os.path.join(REPOSITORY, "tools", "python", "bench"))
IN_CI = os.environ.get("CI", "").lower() == "true"


def missing(what):
    """Fails under CI=true, else skips, saying what is missing."""
    if IN_CI:
        pytest.fail(f"{what} (CI=true: the suite needs it)")
    pytest.skip(what)


def pytest_report_header(config):
    return [f"ringside {ringside.__version__} from {os.path.dirname(ringside.__file__)}; "
            f"C extension {'built' if _ringside is not None else 'NOT built'}; collector {_collector_path() or 'not found'}"]


def _collector_path():
    named = os.environ.get("RINGSIDE_COLLECTOR")
    if named:
        return named if os.access(named, os.X_OK) else None
    for configuration in ("debug", "release"):
        candidate = os.path.join(REPOSITORY, ".build", configuration, "ringside-collector")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(params=["extension", "pure"])
def backend(request):
    """Each test that takes it runs on both backends."""
    if request.param == "pure":
        return _pure
    if _ringside is None:
        missing("the C extension ringside._ringside is not built (pip install ./tools/python with a C compiler and Python.h)")
    return _ringside


@pytest.fixture
def ring_dir():
    directory = tempfile.mkdtemp(prefix="ringside-pytest.", dir="/dev/shm")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _attached(request, backend, ring_dir, suffix="", **options):
    """A bot named for the test's module (test_steps: "steps"), closed at the test's end."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_") + suffix
    attached = ringside.Bot(name, ring_dir, _backend=backend, **options)
    yield attached
    attached.close()


@pytest.fixture
def bot(request, backend, ring_dir):
    """A bot named for the test's module, on each backend."""
    yield from _attached(request, backend, ring_dir)


@pytest.fixture
def strict_bot(request, backend, ring_dir):
    """A strict bot (strict=True, or RINGSIDE_STRICT=1): a bad value raises, for tests; named for the
    test's module and "-strict"."""
    yield from _attached(request, backend, ring_dir, "-strict", strict=True)


def find_series(latest, ring, metric, **labels):
    """The series of `metric` with exactly `labels` in ring `ring` of one /latest page, or None.
    A condition on several series reads them from one page: pages fetched one after another may
    be of different passes (a series seen before its records and another after them)."""
    for entry in latest["series"]:
        if entry["ring"] == ring and entry["metric"] == metric and entry["labels"] == labels:
            return entry
    return None


class Collector:
    """A ringside-collector process draining one directory, and its HTTP endpoints."""

    def __init__(self, binary, directory, *arguments):
        self.process = subprocess.Popen([binary, "--dir", directory, "--listen", "127.0.0.1:0", "--poll", "10ms", *arguments],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        self.address = None
        ready = threading.Event()

        def read_log():
            for line in self.process.stderr:
                self.log.append(line.rstrip())
                found = re.search(r"listening on (http://[0-9.:]+)", line)
                if found:
                    self.address = found.group(1)
                    ready.set()
            ready.set()
        threading.Thread(target=read_log, daemon=True).start()
        if not ready.wait(30) or self.address is None:
            self.stop()
            raise AssertionError("the collector did not start: " + "\n".join(self.log))

    def get(self, path):
        with urllib.request.urlopen(self.address + path, timeout=10) as response:
            return response.read().decode()

    def latest(self):
        return json.loads(self.get("/latest"))

    def series(self, ring, metric, **labels):
        """The /latest series of `metric` with exactly `labels` in ring `ring`, or None."""
        return find_series(self.latest(), ring, metric, **labels)

    def wait_for(self, what, condition, timeout=20):
        """Polls condition() until it returns something true; fails saying `what` otherwise."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = condition()
            if last:
                return last
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; last saw {last!r}")

    def wait_until_equal(self, what, read, want, timeout=20):
        """Polls read() until it returns `want`; fails saying `what` and what it read last otherwise."""
        deadline = time.monotonic() + timeout
        while (last := read()) != want and time.monotonic() < deadline:
            time.sleep(0.05)
        assert last == want, f"timed out waiting for {what}: want {want!r}, read {last!r}"

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def dump_tool():
    """The ringside-dump binary: $RINGSIDE_DUMP, else beside the collector (`swift build` makes
    both); skipped, or failed under CI=true, without it."""
    named = os.environ.get("RINGSIDE_DUMP")
    collector = _collector_path()
    candidate = named or (os.path.join(os.path.dirname(collector), "ringside-dump") if collector else None)
    if candidate is None or not os.access(candidate, os.X_OK):
        missing("ringside-dump is not built: run `swift build` or set RINGSIDE_DUMP")
    return candidate


@pytest.fixture
def collector(ring_dir):
    binary = _collector_path()
    if binary is None:
        missing("ringside-collector is not built: run `swift build` or set RINGSIDE_COLLECTOR")
    running = Collector(binary, ring_dir)
    yield running
    running.stop()


def run_python(code, env=None, timeout=60):
    """Runs `code` in a new interpreter with this one's ringside; returns the CompletedProcess."""
    environment = dict(os.environ)
    environment.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=environment)


class BotFile:
    """A bot file as it is on disk, read by the format (ringside.h) without taking any lock: its
    registry (and each entry's gauge merge policy, value form and scale), its counters' totals, its
    gauges' values, the values of the records its lanes hold and their exemplars, its metric cells'
    `clamped`, and its lanes' thread names (none drained: every test that reads a file this way runs
    no collector on it)."""

    # rs_gauge_merge's codes, by the name Bot.gauge(merge=...) takes
    MERGE_NAMES = ("last", "sum", "max", "min", "per_worker")

    def __init__(self, path):
        with open(path, "rb") as file:
            data = file.read()
        (magic, version, _, _, capacity_log2, _, _, registry_offset, cells_offset, lanes_offset, _, _,
         lane_size, lane_records_offset, _, _, _, lane_gather_offset, _) = struct.unpack_from("<QIIIIIIQQQQQQIIIIII", data, 0)
        assert magic == 0x45444953474E4952 and version in (3, 4), f"{path}: not a bot file of format version 3 or 4"
        self.version = version  # 3, or 4 once a signed or scaled metric is registered (VALUES in ringside.h)
        lanes, count = struct.unpack_from("<II", data, 0x80)
        self.pid = struct.unpack_from("<i", data, 0x98)[0]
        self.workers_refused = struct.unpack_from("<Q", data, 0xA8)[0]  # the bot's own file: workers refused
        self.mode = os.stat(path).st_mode & 0o777
        self.capacity = 1 << capacity_log2
        # (index, name, kind, labels) of each registry entry, in order: kind 1 counter, 2 gauge, 3 histogram
        self.registry = []
        self.merges = []  # each entry's gauge_merge byte (0x006), in order: an rs_gauge_merge code
        self.forms = []  # each entry's form byte (0x007), in order: 1 for a signed histogram, else 0
        self.scales = []  # each entry's scale (0x012, an int8), in order: its values' steps are 10^scale
        self.entries = []  # each entry's 512 bytes as stored
        for index in range(count):
            at = registry_offset + 512 * index
            (stored, kind, _, merge, form, _, name_length, labels_length,
             _, scale) = struct.unpack_from("<IBBBBIHHHb", data, at)
            name = data[at + 0x18:at + 0x18 + name_length].decode()
            labels = data[at + 0x80:at + 0x80 + labels_length].decode()
            self.registry.append((stored, name, kind, labels))
            self.merges.append(merge)
            self.forms.append(form)
            self.scales.append(scale)
            self.entries.append(data[at:at + 512])
        # Each metric cell: gauge bits, gauge set, unlaned, unlaned_sum, unlaned_max, clamped (64 bytes).
        self._cells = [struct.unpack_from("<QQQQQQ", data, cells_offset + 64 * index) for index in range(count)]
        # And its exemplars_refused (0x38): a histogram's exemplars refused (EXEMPLARS in ringside.h).
        self._exemplars_refused = [struct.unpack_from("<Q", data, cells_offset + 64 * index + 0x38)[0]
                                   for index in range(count)]
        # The operator's words (CONTROL in ringside.h): each metric cell's `control` (0x30), in
        # registry order, and the header's `bot_control` (0x180).
        self.controls = [struct.unpack_from("<I", data, cells_offset + 64 * index + 0x30)[0] for index in range(count)]
        self.bot_control = struct.unpack_from("<I", data, 0x180)[0]
        self._lane_cells = []
        # Each lane's gather cells (SAMPLING AND GATHERING in ringside.h), by metric: calls, sum,
        # latest, max (not yet taken), dropped_sum, dropped_max.
        self._gather = []
        self._records = []  # (metric index, value) of every value's record, lane by lane
        self._spans = []  # (metric index, value, timestamp_ns) of every span's record (RS_FLAG_SPAN), lane by lane
        self._weights = []  # each value's record's bucket weight, 2^k for k in its flags' bits 4 to 7 (SAMPLING)
        # [metric index, value, flags, exemplar bytes] of every value recorded with an exemplar
        self._exemplars = []
        self.thread_names = []  # each lane's thread_name (0x28), its NUL padding dropped
        self.cell_writes = []  # each lane's cell_writes (0x24): counter increments made through it
        for lane in range(lanes):
            at = lanes_offset + lane * lane_size
            write = struct.unpack_from("<Q", data, at)[0]
            self._lane_cells.append(struct.unpack_from(f"<{count}Q", data, at + 256))
            self._gather.append([struct.unpack_from("<6Q", data, at + lane_gather_offset + 64 * index) for index in range(count)])
            self.thread_names.append(data[at + 0x28:at + 0x48].rstrip(b"\0").decode())
            self.cell_writes.append(struct.unpack_from("<I", data, at + 0x24)[0])
            parts = 0  # exemplar records still due after the last value's
            first = max(0, write - self.capacity)
            for cursor in range(first, write):
                record = at + lane_records_offset + 32 * (cursor & (self.capacity - 1))
                stamp, value, sequence, tail = struct.unpack_from("<QQQQ", data, record)
                metric, kind, flags, length = tail & 0xFFFFFFFF, (tail >> 32) & 0xFF, (tail >> 40) & 0xFF, tail >> 48
                if kind == 4 and parts == 0 and 0 < first and cursor < first + 4:
                    continue  # the end of an exemplar whose value the lane wrapped over
                if kind == 4:  # an exemplar record: 16 of the exemplar's bytes, as they lie
                    assert parts > 0 and (sequence, metric, flags, length) == (cursor, self._exemplars[-1][0], 0, 0), \
                        f"{path}: lane {lane}: exemplar record at cursor {cursor} out of place"
                    self._exemplars[-1][3] += data[record:record + 16]
                    parts -= 1
                    continue
                assert parts == 0, f"{path}: lane {lane}: a value at cursor {cursor} before its exemplar's end"
                if kind == 2:  # a gauge's record holds a double
                    value = struct.unpack_from("<d", data, record + 8)[0]
                assert flags & 0x0C == 0, f"{path}: lane {lane}: flags 0x{flags:02x} at cursor {cursor} hold bits 2 or 3"
                self._records.append((metric, value))
                if flags & 0x01:  # RS_FLAG_SPAN: stamped with the span's end
                    self._spans.append((metric, value, stamp))
                self._weights.append(1 << (flags >> 4))
                if flags & 0x02:  # RS_FLAG_EXEMPLAR: `length` bytes follow, 16 a record
                    self._exemplars.append([metric, value, flags, b"", length])
                    parts = (length + 15) // 16
            assert parts == 0, f"{path}: lane {lane}: an exemplar's records missing at the end"
        for exemplar in self._exemplars:
            metric, value, flags, stored, length = exemplar
            assert stored[length:] == bytes(len(stored) - length), f"{path}: an exemplar's padding is not zero"
            exemplar[3:] = [stored[:length].decode()]

    def index(self, name, labels=""):
        found = [entry[0] for entry in self.registry if entry[1] == name and entry[3] == labels]
        assert found, f"no metric {name}{{{labels}}} in {self.registry}"
        return found[0]

    def merge(self, name, labels=""):
        """A metric's gauge merge policy, by name: "last", "sum", "max", "min" or "per_worker" (the
        code itself if it is none of them)."""
        code = self.merges[self.index(name, labels)]
        return self.MERGE_NAMES[code] if code < len(self.MERGE_NAMES) else code

    def counter(self, name, labels=""):
        """A counter's total: its cells over every lane, plus what threads without one added."""
        index = self.index(name, labels)
        return sum(cells[index] for cells in self._lane_cells) + self._cells[index][2]

    def gauge(self, name, labels=""):
        """A gauge's last value, or None if it was never set in this file."""
        bits, was_set = self._cells[self.index(name, labels)][:2]
        return struct.unpack("<d", struct.pack("<Q", bits))[0] if was_set else None

    def values(self, name, labels=""):
        """The values of a histogram's (or gauge's) records, lane by lane, each lane in order."""
        index = self.index(name, labels)
        return [value for metric, value in self._records if metric == index]

    def signed_values(self, name, labels=""):
        """A signed histogram's record values, decoded from offset binary (VALUES in ringside.h), in
        the order of values(): whole numbers of its steps."""
        return [signed(value) for value in self.values(name, labels)]

    def clamped(self, name, labels=""):
        """A histogram's or counter's values it could not hold, clamped or not recorded: its metric
        cell's `clamped` (VALUES in ringside.h)."""
        return self._cells[self.index(name, labels)][5]

    def exemplars_refused(self, name, labels=""):
        """A histogram's exemplars refused, its values recorded without them: its metric cell's
        `exemplars_refused` (EXEMPLARS in ringside.h)."""
        return self._exemplars_refused[self.index(name, labels)]

    def spans(self, name, labels=""):
        """(value, timestamp_ns) of each of a histogram's spans (records flagged RS_FLAG_SPAN), lane
        by lane, each lane in order: the duration and the end."""
        index = self.index(name, labels)
        return [(value, stamp) for metric, value, stamp in self._spans if metric == index]

    def weights(self, name, labels=""):
        """The bucket weights of a histogram's records, in the order of values(): 1, or 2^k for a
        record written while its lane sampled, which stands in its bucket for itself and the 2^k - 1
        calls gathered before it (SAMPLING AND GATHERING in ringside.h)."""
        index = self.index(name, labels)
        return [weight for (metric, _), weight in zip(self._records, self._weights) if metric == index]

    def dropped(self, name, labels=""):
        """A histogram's or gauge's records dropped: its cells over every lane, plus unlaned."""
        return self.counter(name, labels)

    def dropped_values(self, name, labels=""):
        """(sum, largest) of a histogram's dropped records' values: its lanes' gather cells and
        what threads without a lane dropped (DROPPED VALUES in ringside.h)."""
        index = self.index(name, labels)
        total, largest = self._cells[index][3], self._cells[index][4]
        for cells in self._gather:
            total += cells[index][4]
            largest = max(largest, cells[index][5])
        return total, largest

    def gathered(self, name, labels=""):
        """(calls, sum, largest) of a histogram's calls its lanes gathered rather than wrote, as no
        consumer took them: their gather cells (SAMPLING AND GATHERING in ringside.h)."""
        index = self.index(name, labels)
        cells = [lane[index] for lane in self._gather]
        return sum(c[0] for c in cells), sum(c[1] for c in cells), max((c[3] for c in cells), default=0)

    def exemplars(self, name, labels=""):
        """(value, flags, exemplar text) of each of a histogram's values recorded with an
        exemplar, lane by lane, each lane in order."""
        index = self.index(name, labels)
        return [(value, flags, text) for metric, value, flags, text in self._exemplars if metric == index]


# The operator's control words (CONTROL in ringside.h).
CONTROL_OFF, CONTROL_BOT_OFF = 0x80000000, 0x40000000


def set_control(path, name, word, labels=""):
    """Stores `word` in the control word of metric `name` of the bot file at `path`, as the
    operator's tool does (one aligned 4-byte store)."""
    cells_offset = struct.unpack_from("<Q", open(path, "rb").read(0x30), 0x28)[0]
    with open(path, "r+b") as file:
        os.pwrite(file.fileno(), struct.pack("<I", word), cells_offset + 64 * BotFile(path).index(name, labels) + 0x30)


def set_bot_control(path, word):
    """Stores `word` in the bot_control of the bot file at `path` (0x180)."""
    with open(path, "r+b") as file:
        os.pwrite(file.fileno(), struct.pack("<I", word), 0x180)


def signed(offset):
    """A signed value from its offset binary, (v as u64) ^ 2^63 (VALUES in ringside.h)."""
    return (offset ^ (1 << 63)) - (1 << 64 if offset < (1 << 63) else 0)


def offset(value):
    """A signed value's offset binary (VALUES in ringside.h)."""
    return (value & ((1 << 64) - 1)) ^ (1 << 63)


def bot_files(directory, bot):
    """The files of bot `bot` in `directory`, by name: "ringside.<bot>" and its workers' (<bot>@<pid>,
    or <bot>@<pid>.<n>: WORKERS in ringside.h)."""
    return sorted(name for name in os.listdir(directory)
                  if name == f"ringside.{bot}" or re.fullmatch(f"ringside\\.{re.escape(bot)}@[0-9]+(\\.[0-9]+)?", name))
