"""Ringside for Python: write telemetry into a Ringside ring, the format of ringside.h, version 1.

Standard library only. A bot attaches to a ring by name (a memory-mapped file in /dev/shm),
registers its metrics once, then records; the ringside-collector drains the ring like any other:

    import ringside
    ring = ringside.Ring("py-bot")                       # /dev/shm/ringside.py-bot
    fill = ring.histogram("order_fill_latency", unit="ns", labels={"symbol": "AAPL"})
    orders = ring.counter("orders", labels={"side": "buy"})
    exposure = ring.gauge("gross_exposure")
    fill.record(elapsed_ns)                              # an int in the metric's unit
    orders.increment()
    exposure.set(1.25e6)

The rules are the Swift library's and ringside_producer.h's: the file is created O_EXCL|O_NOFOLLOW
with mode 0600 and its space reserved with posix_fallocate (a full /dev/shm fails at attach, never
as SIGBUS later); the producer holds an open-file-description lock on byte 0 (F_OFD_SETLK), which
dies with the process; a half-created file (version 0) is initialised under the lock; an existing
ring is validated and re-attached with its records, counters and metrics; a full ring drops the
new record and counts it. One Ring is one producer: use it from one thread.

MEMORY ORDERING. The format needs two release stores: a record's 32 bytes must be visible before
the write cursor that publishes them, and a registry entry before the metric count. Python cannot
ask for a release store. This module relies on:

  1. x86-64 (TSO): a store is never reordered with an earlier store, so "write the record, then
     store the cursor" is a release store in hardware, as long as the cursor store is one
     instruction; and a load is never reordered with later loads or stores, so reading the
     collector's cursor before reusing the slots below it is an acquire load;
  2. CPython: assigning an element of a memoryview cast to 'Q' (or 'I') at an aligned offset is
     one aligned 8-byte (4-byte) store (memoryview's pack_single is a fixed-size memcpy, which
     the compiler emits as one mov), so the collector never sees a torn cursor; and the stores
     of one bytecode complete before the next bytecode's (each is an opaque C call).

Neither holds on arm64 (which reorders stores) or is promised by other interpreters, so the module
refuses to attach elsewhere, raising RingError, unless RINGSIDE_PYTHON_UNSAFE_ORDERING=1 is set:
that override is UNSAFE (the collector may read a record before its bytes land, and reject it as
invalid or, worse, read a stale value); it exists for experiments only.

COST: about 0.5 us a call on Debian's CPython 3.11 (0.7 to 1.2 us on an interpreter built without
PGO); `python3 ringside.py --bench` measures it on your machine. A clock read, one struct.pack_into
and three memoryview stores, each a C call from the interpreter: use the C or Swift producer on
paths where that matters.

The corresponding C header is Sources/CRingside/include/ringside_producer.h.
"""

import errno
import fcntl
import mmap
import os
import platform
import re
import stat
import struct
import sys
import time

__all__ = ["Ring", "RingError", "Histogram", "Counter", "Gauge", "check_memory_ordering"]

# MARK: - The format (ringside.h)

MAGIC = 0x45444953474E4952  # "RINGSIDE" little-endian
FORMAT_VERSION = 1
HEADER_SIZE = 4096
RECORD_SIZE = 32
REGISTRY_ENTRY_SIZE = 512
NAME_MAX, LABELS_MAX, HELP_MAX = 104, 256, 128
DEFAULT_CAPACITY = 1 << 17
MIN_CAPACITY_LOG2, MAX_CAPACITY_LOG2 = 4, 28
DEFAULT_MAX_METRICS, MAX_MAX_METRICS = 256, 4096
LOCK_BYTE_PRODUCER = 0
FILE_PREFIX = "ringside."

KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM = 1, 2, 3
UNITS = {"none": 0, "ns": 1, "us": 2, "ms": 3, "s": 4, "bytes": 5}

# Header fields: byte offsets, and their index in the 8-byte (Q) or 4-byte (I) views.
_LAYOUT = struct.Struct("<QIIIIIIQQQQQ")  # magic .. created_monotonic_ns, at 0x000
_Q_WRITE_CURSOR = 0x080 // 8
_Q_DROPPED = 0x088 // 8
_Q_HEARTBEAT = 0x090 // 8
_Q_PRODUCER_START = 0x098 // 8
_Q_READ_CURSOR = 0x100 // 8
_I_VERSION = 0x008 // 4
_I_PRODUCER_PID = 0x0A0 // 4
_I_METRIC_COUNT = 0x0A4 // 4
_I_ATTACHES = 0x0A8 // 4
# A registry entry's fixed part: index, kind, unit, reserved, sample_every, three lengths.
_ENTRY = struct.Struct("<IBBHIHHH")
# A record: timestamp_ns, value, sequence, then metric, kind, flags and reserved packed by the
# writer into one little-endian 8-byte word (fewer arguments to pack). Gauges pack a double.
_RECORD = struct.Struct("<QQQQ")
_GAUGE_RECORD = struct.Struct("<QdQQ")
# struct flock on Linux x86-64: l_type, l_whence, (pad), l_start, l_len, l_pid, (pad).
_FLOCK = struct.Struct("hh4xqqi4x")

_CLOCK_MONOTONIC_COARSE = getattr(time, "CLOCK_MONOTONIC_COARSE", 6)  # Linux's value
_F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", 37)
_IDENTIFIER = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_RING_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}\Z")

UNSAFE_ORDERING_VARIABLE = "RINGSIDE_PYTHON_UNSAFE_ORDERING"


class RingError(Exception):
    """Why a ring cannot be attached or a metric registered, naming the ring and what to do."""


def check_memory_ordering(machine=None, implementation=None):
    """Raises RingError unless this interpreter and CPU give the ordering the format needs.

    See the module's documentation; RINGSIDE_PYTHON_UNSAFE_ORDERING=1 skips the check (unsafe).
    """
    if os.environ.get(UNSAFE_ORDERING_VARIABLE) == "1":
        return
    machine = (machine or platform.machine()).lower()
    implementation = implementation or platform.python_implementation()
    if machine not in ("x86_64", "amd64"):
        raise RingError(
            "ringside.py needs x86-64, whose stores are not reordered with other stores; "
            f"this is {machine}, where Python cannot publish a record safely. Use the C or Swift "
            f"producer, or set {UNSAFE_ORDERING_VARIABLE}=1 to run anyway (unsafe)")
    if implementation != "CPython" or sys.byteorder != "little" or not sys.platform.startswith("linux"):
        raise RingError(
            f"ringside.py needs CPython on Linux (one store per aligned memoryview write); this is "
            f"{implementation} on {sys.platform}. Set {UNSAFE_ORDERING_VARIABLE}=1 to run anyway (unsafe)")


def _encode_labels(labels):
    """'key=value' lines sorted by key, as the registry stores them."""
    lines = []
    for key in sorted(labels or {}):
        value = str(labels[key])
        if not _IDENTIFIER.match(key) or key.startswith("__"):
            raise ValueError(f'label key "{key}" must match [a-zA-Z_][a-zA-Z0-9_]* and not start with "__"')
        if "\n" in value or "\0" in value:
            raise ValueError(f'label "{key}" has a newline or NUL in its value')
        lines.append(f"{key}={value}")
    encoded = "\n".join(lines).encode("utf-8")
    if len(encoded) > LABELS_MAX:
        raise ValueError(f"the labels take {len(encoded)} bytes; at most {LABELS_MAX} are allowed")
    return encoded


# MARK: - The ring

class Ring:
    """A bot's ring, attached as its one producer.

    Args:
        name: 1 to 200 of [A-Za-z0-9._-]; the file is <directory>/ringside.<name>.
        directory: default $RINGSIDE_DIR, else /dev/shm.
        capacity: records (a power of two, 16 to 2^28); None: 131,072 for a new ring, whatever an
            existing one holds (a number: an existing ring must match).
        max_metrics: 1 to 4096; None: 256 for a new ring, whatever an existing one holds.
        mode: the permission bits of a new file.
    Raises RingError: another producer attached, a corrupt or incompatible file, a full
    directory, a file of another user, a symbolic link, or an unsafe platform.
    With RINGSIDE_DISABLED=1 the ring is disabled: handles check their arguments and write nothing.
    """

    def __init__(self, name, directory=None, capacity=None, max_metrics=None, mode=0o600):
        if not isinstance(name, str) or not _RING_NAME.match(name) or name in (".", ".."):
            raise RingError(f"ring {name!r}: a ring name is 1 to 200 of [A-Za-z0-9._-]")
        if capacity is not None and (capacity < 1 << MIN_CAPACITY_LOG2 or capacity > 1 << MAX_CAPACITY_LOG2
                                     or capacity & (capacity - 1)):
            raise RingError(f"ring {name}: capacity {capacity} must be a power of two from 16 to 2^28 records")
        if max_metrics is not None and not 1 <= max_metrics <= MAX_MAX_METRICS:
            raise RingError(f"ring {name}: max_metrics {max_metrics} must be from 1 to {MAX_MAX_METRICS}")
        self.name = name
        self._metrics = {}  # (name, encoded labels) -> (index, kind, unit, sample_every)
        self._fd = -1
        self._mm = None
        if os.environ.get("RINGSIDE_DISABLED", "").lower() in ("1", "true", "yes"):
            self.path = None
            self._max_metrics = max_metrics or DEFAULT_MAX_METRICS
            return
        check_memory_ordering()
        directory = directory or os.environ.get("RINGSIDE_DIR") or "/dev/shm"
        self.path = os.path.join(directory, FILE_PREFIX + name)
        for _ in range(8):  # a ring removed or replaced between our open and our lock: again
            if self._attach_once(capacity, max_metrics, mode):
                break
        else:
            raise RingError(f"ring {name}: attach: the file kept being replaced")
        self._map_state()

    @property
    def enabled(self):
        return self._mm is not None

    def _attach_once(self, capacity, max_metrics, mode):
        path = self.path
        created = True
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        except FileExistsError:
            created = False
            try:
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                return False
            except OSError as error:
                raise self._open_error(error) from None
        except OSError as error:
            raise self._open_error(error) from None
        try:
            if created:
                os.fchmod(fd, mode)  # exactly the mode asked for, whatever the umask
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise RingError(f"ring {self.name}: {path} is not a regular file")
            if info.st_uid != os.geteuid():
                raise RingError(f"ring {self.name}: {path} is owned by uid {info.st_uid}, not {os.geteuid()}; "
                                "rings are private to their user")
            try:
                fcntl.fcntl(fd, _F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, LOCK_BYTE_PRODUCER, 1, 0))
            except OSError as error:
                if error.errno in (errno.EAGAIN, errno.EACCES):
                    pid = struct.unpack("<i", os.pread(fd, 4, 0xA0).ljust(4, b"\0"))[0]
                    raise RingError(f"ring {self.name}: another producer is attached (pid {pid}); "
                                    "a ring has one producer") from None
                raise RingError(f"ring {self.name}: lock {path}: {error.strerror}") from None
            # Under the lock the file changes only through us: is it still the one at the path?
            info = os.fstat(fd)
            try:
                at_path = os.lstat(path)
            except FileNotFoundError:
                os.close(fd)
                return False
            if (info.st_ino, info.st_dev) != (at_path.st_ino, at_path.st_dev):
                os.close(fd)
                return False
            size = info.st_size
            header = os.pread(fd, _LAYOUT.size, 0) if size >= HEADER_SIZE else b""
            ready = len(header) == _LAYOUT.size and struct.unpack_from("<I", header, 8)[0] != 0
            if ready:
                capacity_log2, registry_capacity = self._validate(header, size)
                if (capacity and capacity != 1 << capacity_log2) or (max_metrics and max_metrics != registry_capacity):
                    raise RingError(f"ring {self.name}: it holds {1 << capacity_log2} records and {registry_capacity} "
                                    f"metrics; asked for {capacity} and {max_metrics}")
            else:
                capacity_log2 = (capacity or DEFAULT_CAPACITY).bit_length() - 1
                registry_capacity = max_metrics or DEFAULT_MAX_METRICS
                size = HEADER_SIZE + registry_capacity * REGISTRY_ENTRY_SIZE + (RECORD_SIZE << capacity_log2)
                try:
                    # From zeros (a half-created file may hold anything); every page reserved now.
                    os.ftruncate(fd, 0)
                    os.posix_fallocate(fd, 0, size)
                except OSError as error:
                    if created:
                        os.unlink(path)
                    if error.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise RingError(f"ring {self.name}: no space for {size} bytes at {path} "
                                        "(is /dev/shm full?)") from None
                    raise RingError(f"ring {self.name}: reserve {size} bytes for {path}: {error.strerror}") from None
            # MAP_POPULATE (Python 3.10+): map every page now, not on the hot path's first touch.
            self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                                 mmap.PROT_READ | mmap.PROT_WRITE)
            self._fd = fd
            self._size = size
            self._capacity_log2 = capacity_log2
            self._max_metrics = registry_capacity
            if not ready:
                self._initialise()
            return True
        except BaseException:
            if self._fd != fd:
                os.close(fd)
            raise

    def _open_error(self, error):
        if error.errno == errno.ELOOP:
            return RingError(f"ring {self.name}: {self.path} is a symbolic link; Ringside never follows links")
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return RingError(f"ring {self.name}: no space at {self.path} (is /dev/shm full?)")
        return RingError(f"ring {self.name}: open {self.path}: {error.strerror} (errno {error.errno})")

    def _validate(self, header, size):
        """The capacity_log2 and registry capacity of a valid existing header, else RingError."""
        (magic, version, header_size, record_size, capacity_log2, registry_capacity, entry_size,
         registry_offset, records_offset, file_size, _, _) = _LAYOUT.unpack(header)

        def corrupt(problem):
            return RingError(f"ring {self.name}: {self.path} is corrupt: {problem}")
        if magic != MAGIC:
            raise corrupt(f"bad magic {magic:#x}")
        if version != FORMAT_VERSION:
            raise corrupt(f"format version {version}, this module writes {FORMAT_VERSION}")
        if (header_size, record_size, entry_size) != (HEADER_SIZE, RECORD_SIZE, REGISTRY_ENTRY_SIZE):
            raise corrupt("bad header, record or registry entry size")
        if not MIN_CAPACITY_LOG2 <= capacity_log2 <= MAX_CAPACITY_LOG2 or not 1 <= registry_capacity <= MAX_MAX_METRICS:
            raise corrupt("bad capacity_log2 or registry_capacity")
        expected_records = HEADER_SIZE + registry_capacity * REGISTRY_ENTRY_SIZE
        expected_size = expected_records + (RECORD_SIZE << capacity_log2)
        if (registry_offset, records_offset, file_size) != (HEADER_SIZE, expected_records, expected_size):
            raise corrupt("bad registry_offset, records_offset or file_size")
        if size != expected_size:
            raise corrupt(f"the file has {size} bytes; its header says {expected_size}")
        return capacity_log2, registry_capacity

    def _initialise(self):
        mm = self._mm
        records_offset = HEADER_SIZE + self._max_metrics * REGISTRY_ENTRY_SIZE
        _LAYOUT.pack_into(mm, 0, MAGIC, 0, HEADER_SIZE, RECORD_SIZE, self._capacity_log2, self._max_metrics,
                          REGISTRY_ENTRY_SIZE, HEADER_SIZE, records_offset, self._size,
                          time.clock_gettime_ns(time.CLOCK_REALTIME), time.clock_gettime_ns(time.CLOCK_MONOTONIC))
        # "Release", written last: on x86-64 the layout's stores are visible before this one.
        memoryview(mm).cast("I")[_I_VERSION] = FORMAT_VERSION

    def _map_state(self):
        mm = self._mm
        self._q = memoryview(mm).cast("Q")
        self._i = memoryview(mm).cast("I")
        q, i = self._q, self._i
        self._records_offset = HEADER_SIZE + self._max_metrics * REGISTRY_ENTRY_SIZE
        self._mask = (1 << self._capacity_log2) - 1
        write, read, count = q[_Q_WRITE_CURSOR], q[_Q_READ_CURSOR], i[_I_METRIC_COUNT]
        if read > write or write - read > self._mask + 1 or count > self._max_metrics:
            self.close()
            raise RingError(f"ring {self.name}: {self.path} is corrupt: cursors or metric count out of range")
        for index in range(count):
            offset = HEADER_SIZE + index * REGISTRY_ENTRY_SIZE
            entry_index, kind, unit, _, sample_every, name_length, labels_length, help_length = \
                _ENTRY.unpack_from(mm, offset)
            if (entry_index != index or kind not in (1, 2, 3) or unit > 5 or sample_every < 1
                    or name_length > NAME_MAX or labels_length > LABELS_MAX or help_length > HELP_MAX):
                self.close()
                raise RingError(f"ring {self.name}: {self.path} is corrupt: registry entry {index} is invalid")
            name = bytes(mm[offset + 0x18:offset + 0x18 + name_length]).decode("utf-8", "replace")
            labels = bytes(mm[offset + 0x80:offset + 0x80 + labels_length])
            self._metrics[(name, labels)] = (index, kind, unit, sample_every)
        self._state = [write, read]  # the next cursor, and the consumer's as last seen
        i[_I_PRODUCER_PID] = os.getpid()
        q[_Q_PRODUCER_START] = time.clock_gettime_ns(time.CLOCK_REALTIME)
        i[_I_ATTACHES] = (i[_I_ATTACHES] + 1) & 0xFFFFFFFF
        q[_Q_HEARTBEAT] = time.clock_gettime_ns(_CLOCK_MONOTONIC_COARSE)

    def close(self):
        """Unmaps the ring and releases its lock; its records stay for the collector."""
        if self._mm is not None:
            self._q.release()
            self._i.release()
            self._mm.close()
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)  # releases the lock
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # MARK: - Registration

    def histogram(self, name, unit="none", labels=None, help="", sample_every=1):
        """Registers (or finds again) a histogram; record() takes ints in `unit` (ns, us, ms, s, bytes, none)."""
        return Histogram(self, *self._register(name, KIND_HISTOGRAM, unit, labels, help, sample_every))

    def counter(self, name, labels=None, help="", sample_every=1):
        """Registers (or finds again) a counter: increments that add up to a total."""
        return Counter(self, *self._register(name, KIND_COUNTER, "none", labels, help, sample_every))

    def gauge(self, name, unit="none", labels=None, help=""):
        """Registers (or finds again) a gauge: a float set now and then."""
        return Gauge(self, *self._register(name, KIND_GAUGE, unit, labels, help, 1))

    def _register(self, name, kind, unit, labels, help, sample_every):
        def invalid(reason):
            return RingError(f"ring {self.name}: metric {name}: {reason}")
        if not isinstance(name, str) or not _IDENTIFIER.match(name) or len(name.encode()) > NAME_MAX:
            raise invalid(f"a name matches [a-zA-Z_][a-zA-Z0-9_]* and has at most {NAME_MAX} bytes")
        if unit not in UNITS:
            raise invalid(f"unknown unit {unit!r}; one of {', '.join(UNITS)}")
        try:
            encoded = _encode_labels(labels)
        except ValueError as error:
            raise invalid(str(error)) from None
        help_bytes = (help or "").encode("utf-8")
        if len(help_bytes) > HELP_MAX or b"\0" in help_bytes:
            raise invalid(f"the help text must be at most {HELP_MAX} bytes without NUL")
        if not isinstance(sample_every, int) or sample_every < 1 or sample_every > 0xFFFFFFFF:
            raise invalid("sample_every must be an integer of at least 1")
        unit_code = UNITS[unit]
        existing = self._metrics.get((name, encoded))
        if existing:
            index, old_kind, old_unit, old_every = existing
            if (old_kind, old_unit, old_every) != (kind, unit_code, sample_every):
                raise RingError(f"ring {self.name}: metric {name} exists with another kind, unit or sampling")
            return index, sample_every
        index = len(self._metrics)
        if index >= self._max_metrics:
            raise RingError(f"ring {self.name}: the registry is full ({self._max_metrics} metrics)")
        if self._mm is not None:
            mm = self._mm
            offset = HEADER_SIZE + index * REGISTRY_ENTRY_SIZE
            name_bytes = name.encode("utf-8")
            mm[offset:offset + REGISTRY_ENTRY_SIZE] = bytes(REGISTRY_ENTRY_SIZE)
            _ENTRY.pack_into(mm, offset, index, kind, unit_code, 0, sample_every,
                             len(name_bytes), len(encoded), len(help_bytes))
            mm[offset + 0x18:offset + 0x18 + len(name_bytes)] = name_bytes
            mm[offset + 0x80:offset + 0x80 + len(encoded)] = encoded
            mm[offset + 0x180:offset + 0x180 + len(help_bytes)] = help_bytes
            # "Release": the entry's stores are visible before the count's (x86-64, see above).
            self._i[_I_METRIC_COUNT] = index + 1
        self._metrics[(name, encoded)] = (index, kind, unit_code, sample_every)
        return index, sample_every

    # MARK: - Counters of this ring

    @property
    def records_written(self):
        return self._q[_Q_WRITE_CURSOR] if self._mm is not None else 0

    @property
    def records_dropped(self):
        return self._q[_Q_DROPPED] if self._mm is not None else 0

    # MARK: - The hot path

    def _writer(self, index, kind, pack, sample_every):
        """The write function of one metric: a closure over the mapping, so a call costs one
        Python call. Returns True if a record was written; False when sampling skipped the call,
        the ring was full (a counted drop) or the ring is disabled."""
        if self._mm is None:
            return lambda value: False
        mm, q, mask, base, state = self._mm, self._q, self._mask, self._records_offset, self._state
        # CLOCK_MONOTONIC rather than the format's CLOCK_MONOTONIC_COARSE: the same origin, and
        # from Python the cheaper call (clock_gettime_ns(id) parses its argument).
        clock = time.monotonic_ns
        # The record's last 8 bytes (metric, kind, flags 0, reserved 0) as one little-endian word.
        tail = index | kind << 32
        # Header fields as locals: a closure's cell is cheaper than a module global.
        read_at, dropped_at, write_at, heartbeat_at = _Q_READ_CURSOR, _Q_DROPPED, _Q_WRITE_CURSOR, _Q_HEARTBEAT

        def write(value):
            cursor = state[0]
            if cursor - state[1] > mask:
                state[1] = q[read_at]
                if cursor - state[1] > mask:
                    q[dropped_at] += 1  # only this producer writes it
                    return False
            now = clock()
            pack(mm, base + ((cursor & mask) << 5), now, value, cursor, tail)  # a record is 32 bytes
            state[0] = cursor + 1
            q[write_at] = cursor + 1  # "release" (x86-64 TSO): publishes the record above
            q[heartbeat_at] = now
            return True

        if sample_every == 1:
            return write
        left = 1

        def sampled(value):
            nonlocal left
            if left > 1:
                left -= 1
                return False
            left = sample_every
            return write(value)
        return sampled


class Histogram:
    """A histogram's handle: record(value) takes a non-negative int in the metric's unit."""
    __slots__ = ("index", "record")

    def __init__(self, ring, index, sample_every):
        self.index = index
        self.record = ring._writer(index, KIND_HISTOGRAM, _RECORD.pack_into, sample_every)


class Counter:
    """A counter's handle: increment(by=1)."""
    __slots__ = ("index", "_write")

    def __init__(self, ring, index, sample_every):
        self.index = index
        self._write = ring._writer(index, KIND_COUNTER, _RECORD.pack_into, sample_every)

    def increment(self, by=1):
        return self._write(by)


class Gauge:
    """A gauge's handle: set(value) takes a float."""
    __slots__ = ("index", "set")

    def __init__(self, ring, index, sample_every):
        self.index = index
        self.set = ring._writer(index, KIND_GAUGE, _GAUGE_RECORD.pack_into, 1)


# MARK: - The benchmark: python3 ringside.py --bench

def _bench(calls, repeats):
    """Nanoseconds per call of each handle's call, best of `repeats` runs of `calls` calls."""
    import shutil
    import tempfile
    directory = tempfile.mkdtemp(prefix="ringside-pybench.", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        with Ring("bench", directory=directory, capacity=1 << 20) as ring:
            histogram = ring.histogram("latency", unit="ns")
            counter = ring.counter("orders")
            gauge = ring.gauge("exposure")
            clock = time.perf_counter_ns

            def consume():
                # The benchmark is its own consumer, between timed runs: the ring never fills.
                ring._q[_Q_READ_CURSOR] = ring._q[_Q_WRITE_CURSOR]

            rows = {
                "histogram.record": lambda n: [histogram.record(v) for v in range(n)],
                "counter.increment": lambda n: [counter.increment() for _ in range(n)],
                "gauge.set": lambda n: [gauge.set(0.5) for _ in range(n)],
                "time.perf_counter_ns": lambda n: [clock() for _ in range(n)],
                "empty loop": lambda n: [None for _ in range(n)],
            }
            results = {}
            for row, body in rows.items():
                best = None
                for _ in range(repeats):
                    consume()
                    start = time.perf_counter_ns()
                    body(calls)
                    elapsed = (time.perf_counter_ns() - start) / calls
                    best = elapsed if best is None else min(best, elapsed)
                results[row] = best
            results["dropped"] = ring.records_dropped
            return results
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main(argv):
    import json
    if argv[:1] != ["--bench"]:
        print("usage: ringside.py --bench [--calls N] [--repeats N] [--json]", file=sys.stderr)
        return 2
    calls = int(argv[argv.index("--calls") + 1]) if "--calls" in argv else 200_000
    repeats = int(argv[argv.index("--repeats") + 1]) if "--repeats" in argv else 5
    results = _bench(calls, repeats)
    if "--json" in argv:
        print(json.dumps({"python": platform.python_version(), "machine": platform.machine(), **results}))
        return 0
    print(f"CPython {platform.python_version()} on {platform.machine()}: ns per call, best of {repeats} x {calls:,}"
          " (the loop's own cost included; 'empty loop' shows it)")
    for row, value in results.items():
        if row != "dropped":
            print(f"  {row:<22} {value:8.1f}")
    print(f"  dropped {results['dropped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
