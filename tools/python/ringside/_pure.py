"""ringside._pure: the pure-Python backend of the ringside package, for where the C extension
could not be built. Standard library only; it writes the Ringside format (ringside.h, version 4)
itself, with the same rules, values and errors as the extension, which wraps ringside_producer.h.

A process attaches its bot by name (one memory-mapped file in /dev/shm), registers its metrics
once, then records from any thread. Each thread writes a lane of its own, and the
ringside-collector drains them as it drains every other producer's. The package's classes
(ringside/__init__.py) call this module's Bot.register() and Bot.handle(); values are converted as
ringside/_values.py says.

RULES, those of ringside_producer.h (the C library, which the Swift library wraps, follows them
too): the file is created O_CREAT|O_EXCL|O_NOFOLLOW with mode 0600 unless asked, and every page it
uses is reserved with posix_fallocate before use (the header part at attach, each lane when it is
added), so a full /dev/shm fails as an error and never as SIGBUS later. A bot never waits on a file
it did not make: every os.open of a path in the directory adds O_NONBLOCK and O_NOCTTY, and only a
regular file of this user is used: a FIFO, a device, a directory or a socket another user put at a
bot's name is refused at once, naming what it is and its owner. The process holds an
open-file-description lock on byte 0 (F_OFD_SETLK), which dies with it; after locking, the file
must still be the one at the path, else attach opens it again. A half-created file (version 0) is
initialised under the lock; an existing one is validated field by field and attached with its
cells, metrics and lanes (all retired: their process is gone); a file of another format version
(1 is the single-ring format before lanes) is refused, naming both versions. As the C library's,
a file is made format 3 and becomes format 4 just before its first signed or scaled metric is
published (VALUES in ringside.h): a reader of format 3 alone then refuses it rather than misread it.

THREADS: attach, registration and close may be called from any thread; the handles' calls from
any thread at once. A thread's first call claims a lane under the bot's lock: the lowest one no
live thread holds, else a new one appended to the file (at most max_lanes). When the thread ends,
CPython drops its threading.local values before join() returns, and the lane is retired then for
the next thread (a lane whose thread is no longer alive is taken over anyway). A thread that finds
every lane taken records without one: its counter increments and gauge values are still kept
exactly, and its histogram and gauge records are counted as dropped, all in the metric's shared
cell (`unlaned`). Counters write no records: an increment adds to the lane's cell of the metric.
A full lane drops the new record and counts it (the lane's dropped_total and its cell of the
metric); it never blocks or overwrites. A lane claimed by a thread carries the thread's name
(threading's, as ringside/_threadname.py encodes it), written before the lane's state.

EXEMPLARS (EXEMPLARS in ringside.h): observe(value, exemplar) and stop(token, exemplar) write the
value's record flagged RS_FLAG_EXEMPLAR with the exemplar's length, then its bytes (checked and
encoded by ringside/_exemplars.py first) in exemplar records, 16 bytes each, and publish them all
with one store of write_cursor; a lane without room for all of them drops the value whole, one
counted drop.

CONTROL (CONTROL in ringside.h): every call loads its metric's control word (the metric cell's
`control`, which the operator's tool writes) once its thread has its lane: the hot paths through the
lane's header view, one subscript and a branch; a nonzero word sends the call the slow way, which
records and counts nothing for RS_CONTROL_OFF or RS_CONTROL_BOT_OFF (`clamped` neither), and samples
a histogram 1 in 2^n through its lane's gather cells (the lane's `calls`, as the C library's
adaptive sampling counts them) while the consumer reads gather cells; a histogram's call under any
control is recorded without its exemplar. A new metric starts with the bot's BOT_OFF (bot_control,
read again after metric_count's store and a full fence), and in a worker file with the same metric's
word in the bot's own file.

WORKERS AND FORK (WORKERS in ringside.h): a bot is one process's, or several processes' as its
workers. attach(worker=True) writes a file of the process's own, <name>@<pid>, which the collector
merges with the bot's other files. In a child made by os.fork() (multiprocessing's fork, a
ProcessPoolExecutor's), every bot of the parent is let go of at once: the child unmaps and closes
its copy of the file, since either would keep the parent's lock alive and hide the parent's death.
At the child's first record, registration or lane claim through one of them, the child becomes its
worker: it reads the parent's registry through a read-only descriptor of its own (only if the
path still names the file the parent attached), creates (or adopts, as attach() does) the file
<name>@<childpid> with the parent's shape and mode, and copies the parent's entries into it at the
same indices (whole: a gauge's merge policy with them), so the handles it inherited work
unchanged; an entry an adopted file holds already must be the parent's in every field, the policy
included. A child that never records creates nothing and says nothing. If the worker file cannot
be made, the child writes nothing to that bot (its calls return False or None; registering raises
RingError) and says why once on stderr. A child that closes the bot is told it is closed, as
anywhere. Gauges' inc and dec start from 0 in the child, as in any new process.

DOORBELL (DOORBELL in ringside.h): a collector that sleeps is woken by the first record, counter
increment or gauge set written after it fell asleep. At each attach (a worker file's too) the
process registers for the collector's barrier (membarrier REGISTER_GLOBAL_EXPEDITED, through
ctypes, once per process: a forked child registers anew) and stores in the header's
`rings_doorbell` 1 if that worked, else 0 (no ctypes, another CPU, a kernel without membarrier:
never raised, the process then never rings and its file is drained at the collector's poll).
After each record published (the store of write_cursor) and each increment (the store of
cell_writes) a call loads the header's `doorbell` through its lane's header view, one subscript and
a branch; a nonzero word (the collector asleep) is stored back as 0 and woken with one FUTEX_WAKE
(not private) on its address, computed once per mapping; the GIL serialises the process's threads,
and a second wake would be harmless. A failed wake is ignored: a call never raises or blocks
because of the doorbell. A thread without a lane writes no record and never rings.

MEMORY ORDERING. The format needs release stores: a record's 32 bytes before the write_cursor that
publishes them; a new lane's pages and zeroed header before lanes_allocated; a registry entry
before metric_count; a lane's owner and claim count before its state (and, when a lane is retired
or taken over, its last holder's records and cells before the state says so); gauge_bits before
gauge_set; the layout before version. It needs an acquire load of a lane's read_cursor (the
collector has finished with the slots below it before they are reused). Python cannot ask for
either. This module relies on:

  1. x86-64 (TSO): a store is never reordered with an earlier store, so "write the data, then
     store the flag" is a release store in hardware, as long as the flag's store is one
     instruction; a load is never reordered with later loads or stores, so a plain load is an
     acquire load. TSO is also multi-copy atomic, so this holds across threads: what one thread
     stored before another took the GIL (or the bot's lock) from it is visible to the collector
     before anything the second thread stores next. Retiring a thread's lane from another thread,
     taking over a dead thread's lane, and gauges set from several threads rely on it;
  2. CPython: assigning an element of a memoryview cast to 'Q', 'I' or 'd' at an aligned offset
     is one aligned 8-byte (4-byte) store (memoryview's pack_single is a fixed-size memcpy, which
     the compiler emits as one mov), so the collector never sees a torn cursor, count, state or
     gauge; and the stores of one bytecode complete before the next bytecode's (each is an opaque
     C call). A record itself is written by struct.pack_into, in any byte order: the cursor
     store after it publishes it. A lane's header and cells have one writer at a time (the thread
     holding it), so `cell += n` (a load, an add, a store) is exact there. `unlaned`, which any
     thread without a lane may add to, would need an atomic add, which Python lacks: those adds
     take the bot's lock instead (only this process writes the file).

Neither holds on arm64 (which reorders stores) or is promised by other interpreters, so the module
refuses to attach elsewhere, raising RingError, unless RINGSIDE_PYTHON_UNSAFE_ORDERING=1 is set:
that override is UNSAFE (the collector may read a record before its bytes land, and reject it as
invalid or, worse, read a stale value); it exists for experiments only.

RINGSIDE_DISABLED=1 (or true, yes) in the environment gives bots that create no file and write
nothing; their handles still check their arguments.

COST: an observation or a gauge set costs about 0.3 to 0.6 us on CPython 3.11, a counter increment
0.1 to 0.2 us (no record: a load and a store of the lane's cell); `python -m ringside.bench`
measures it beside prometheus_client. An observation is a thread-local read, a clock read, one
struct.pack_into, two memoryview stores and the doorbell's load, each a C call from the
interpreter: the C extension does the same in one. One with an exemplar costs about 4 times as much: the exemplar is checked and
encoded in Python, and each of its records is one more struct.pack_into. A thread's first call
claims its lane (about 2 ms when a lane of 2 MiB is added to the file, tens of us when one is
reused); a thread without a lane pays about 1.5 us a call (an exception, then the lock).

The corresponding C header is Sources/CRingside/include/ringside_producer.h.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import platform
import re
import secrets
import stat
import struct
import sys
import threading
import time
import weakref
from typing import Any, Callable

from ._backend import Converter
from ._errors import RingError, RingValueError
from ._exemplars import EXEMPLAR_BYTES_PER_RECORD, Encoder
from ._threadname import THREAD_NAME_MAX, encoded as thread_name_bytes
from ._values import (
    FORM_SIGNED,
    I64_MAX,
    KIND_COUNTER,
    KIND_GAUGE,
    KIND_HISTOGRAM,
    OFFSET_BINARY_BIAS,
    POWERS_OF_TEN,
    SCALE_MAX,
    SCALE_MIN,
    UNIT_CODES as UNITS,
    merge_phrase,
    steps_per_unit,
    values_phrase,
)

__all__ = ["attach", "Bot", "check_memory_ordering", "span_clock"]

# MARK: - The format (ringside.h)

MAGIC = 0x45444953474E4952  # "RINGSIDE" little-endian
FORMAT_VERSION = 4
FORMAT_VERSION_MIN = 3  # a file is made format 3, and 4 at its first signed or scaled metric (VALUES)
HEADER_SIZE = 4096
RECORD_SIZE = 32
REGISTRY_ENTRY_SIZE = 512
METRIC_CELL_SIZE = 64
GATHER_CELL_SIZE = 64  # a histogram's calls gathered on a lane, and its values the lane dropped
LANE_HEADER_SIZE = 256
PAGE_SIZE = 4096
NAME_MAX, LABELS_MAX, HELP_MAX = 104, 256, 128
DEFAULT_LANE_CAPACITY = 1 << 16
MIN_CAPACITY_LOG2, MAX_CAPACITY_LOG2 = 4, 28
DEFAULT_MAX_METRICS, MAX_MAX_METRICS = 256, 4096
DEFAULT_MAX_LANES, MAX_LANES = 64, 1024
LOCK_BYTE_PRODUCER = 0
FILE_PREFIX = "ringside."
WORKER_SEPARATOR = "@"  # worker 4242 of bot "bot-a" writes "<dir>/ringside.bot-a@4242"
# ... or "<dir>/ringside.bot-a@4242.<n>", n random, when its own name is unusable (WORKERS in ringside.h)
WORKER_SUFFIX_SEPARATOR = "."
WORKER_NAME_ATTEMPTS = 8
DEFAULT_MAX_WORKERS, MAX_WORKERS = 256, 65536  # worker files of a bot before a new worker continues a gone one's
_H_WORKERS_REFUSED = 0x0A8  # the bot's file: processes refused a worker file, added atomically by each

LANE_UNUSED, LANE_ACTIVE, LANE_RETIRED = 0, 1, 2
FLAG_SPAN = 0x01  # a record's value is a duration measured with the precise clock
FLAG_EXEMPLAR = 0x02  # exemplar records follow the value's: its `exemplar_length` bytes
FLAG_WEIGHT_SHIFT = 4  # bits 4 to 7 of a record's flags: k, 2^k - 1 calls gathered before it (SAMPLING)
WEIGHT_LOG2_MAX = 15
# A metric cell's `control` word and the header's `bot_control` (CONTROL in ringside.h): written by
# the operator's tool, read by the producer at every call.
CONTROL_OFF, CONTROL_BOT_OFF, CONTROL_SAMPLE = 0x80000000, 0x40000000, 0x1F
CONTROL_STOPS = CONTROL_OFF | CONTROL_BOT_OFF  # either: the call records nothing and counts nothing
KIND_EXEMPLAR = 4  # an exemplar record's kind: 16 of an exemplar's bytes

_U64 = (1 << 64) - 1
_U32 = (1 << 32) - 1

# The header's layout line, 0x000 to 0x068: magic .. lane_header_size, lane_gather_offset, gather_cell_size.
_LAYOUT = struct.Struct("<QIIIIIIQQQQQQIIIIII")
_HEADER_STRUCT_SIZE = 0x1C0  # sizeof(rs_header): the layout, producer, consumer and control lines
# Header fields: their index in the 8-byte (Q) or 4-byte (I) view of the header mapping.
_I_VERSION = 0x008 // 4
_I_LANES_ALLOCATED = 0x080 // 4
_I_METRIC_COUNT = 0x084 // 4
_Q_HEARTBEAT = 0x088 // 8
_Q_PRODUCER_START = 0x090 // 8
_I_PRODUCER_PID = 0x098 // 4  # an int32; a pid is positive, so its unsigned store is the same bits
_I_ATTACHES = 0x09C // 4
_Q_LANES_EXHAUSTED = 0x0A0 // 8
_I_SAMPLE_ABOVE = 0x0B0 // 4  # records in a lane past which its histograms are sampled: 0, never
_I_RINGS_DOORBELL = 0x0B4 // 4  # 1 while the attached process rings the doorbell (DOORBELL); 0: never
_DOORBELL = 0x140  # a byte offset: the collector's "I sleep, wake me" word, alone on its line
_I_DOORBELL = _DOORBELL // 4
_I_CONSUMER_PID, _I_WEIGHTS_READER_PID = 0x100 // 4, 0x104 // 4  # both the consumer's pid: it reads gather cells
_I_BOT_CONTROL = 0x180 // 4  # RS_CONTROL_BOT_OFF while the operator has the bot off (CONTROL)
# A metric cell's fields, from the cell's index in the header's Q view: a gauge's value, and what
# threads without a lane could not keep (with a histogram's dropped values' sum and largest).
_CELL_GAUGE_BITS, _CELL_GAUGE_SET, _CELL_UNLANED, _CELL_UNLANED_SUM, _CELL_UNLANED_MAX = 0, 1, 2, 3, 4
_CELL_CLAMPED = 5  # values a metric could not take as given: clamped, rounded or not recorded (VALUES)
_CELL_EXEMPLARS_REFUSED = 0x38 // 8  # a histogram's exemplars refused, its values recorded without them
_CELL_WORDS = METRIC_CELL_SIZE // 8
_CELL_CONTROL_I, _CELL_I_WORDS = 0x30 // 4, METRIC_CELL_SIZE // 4  # a cell's `control`, in the header's I view
# A gather cell's fields (SAMPLING AND GATHERING in ringside.h), from its index in the lane's Q
# view: this backend never samples a filling lane; it gathers only the calls an operator's control
# samples (CONTROL in ringside.h), and writes a dropped record's value's sum and largest.
_GATHER_CALLS, _GATHER_SUM, _GATHER_LATEST, _GATHER_MAX = 0, 1, 2, 3
_GATHER_DROPPED_SUM, _GATHER_DROPPED_MAX = 4, 5
_GATHER_WORDS = GATHER_CELL_SIZE // 8
# A lane header's fields, in the lane mapping's Q and I views; then one 8-byte cell per metric.
_LQ_WRITE = 0x00 // 8
_LQ_DROPPED = 0x08 // 8
_LQ_HEARTBEAT = 0x10 // 8
_LI_STATE = 0x18 // 4
_LI_OWNER = 0x1C // 4  # an int32 thread id, stored like the pid
_LI_CLAIMS = 0x20 // 4
_LI_CELL_WRITES = 0x24 // 4  # counter increments made through the lane, wrapping: a reader sees a counter move
_L_THREAD_NAME = 0x28  # a byte offset: the holder's name, THREAD_NAME_MAX bytes, NUL-padded
_LQ_GATHERED = 0x48 // 8  # calls gathered on the lane, all histograms
_LQ_READ = 0x80 // 8
_LQ_CELLS = LANE_HEADER_SIZE // 8
# A registry entry's fixed part: index, kind, unit, gauge_merge, form, sample_every, three lengths, scale.
_ENTRY = struct.Struct("<IBBBBIHHHb")
MERGE_LAST, MERGE_PER_WORKER, MERGE_POLICIES = 0, 4, 5  # rs_gauge_merge: last, sum, max, min, per worker
# A record: timestamp_ns, value, sequence, then metric, kind, flags and reserved packed by the
# writer into one little-endian 8-byte word (fewer arguments to pack). Gauges pack a double.
_RECORD = struct.Struct("<QQQQ")
_GAUGE_RECORD = struct.Struct("<QdQQ")
# An exemplar record: 16 of the exemplar's bytes as they lie (in timestamp_ns then value; the last
# record's zero-padded by "16s"), its sequence, then metric and kind packed as above.
_EXEMPLAR_RECORD = struct.Struct("<16sQQ")
# struct flock on Linux x86-64: l_type, l_whence, (pad), l_start, l_len, l_pid, (pad).
_FLOCK = struct.Struct("hh4xqqi4x")

_CLOCK_MONOTONIC_COARSE = getattr(time, "CLOCK_MONOTONIC_COARSE", 6)  # Linux's value
_F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", 37)
_IDENTIFIER = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_IDENTIFIER_BYTES = re.compile(rb"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_BOT_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}\Z")

UNSAFE_ORDERING_VARIABLE = "RINGSIDE_PYTHON_UNSAFE_ORDERING"

# The doorbell's system calls (DOORBELL in ringside.h), by CPU: membarrier's and futex's numbers.
_SYSCALL_NUMBERS = {"x86_64": (324, 202), "amd64": (324, 202), "aarch64": (283, 98), "arm64": (283, 98)}
_MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED = 4
_FUTEX_WAKE = 1  # not FUTEX_PRIVATE_FLAG (128): the collector waits on the file's page, from its own process
_INT_MAX = 0x7FFFFFFF


def _page_round_up(size: int) -> int:
    return (size + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1)


class _Geometry:
    """Every offset of a file, computed from its free choices as rs_geometry_of does."""
    __slots__ = ("registry_offset", "cells_offset", "lanes_offset", "lane_gather_offset", "lane_records_offset",
                 "lane_size")

    def __init__(self, capacity_log2: int, registry_capacity: int) -> None:
        self.registry_offset = HEADER_SIZE
        self.cells_offset = HEADER_SIZE + registry_capacity * REGISTRY_ENTRY_SIZE
        self.lanes_offset = _page_round_up(self.cells_offset + registry_capacity * METRIC_CELL_SIZE)
        # The gather cells start on a cache line of their own, after the lane cells.
        self.lane_gather_offset = (LANE_HEADER_SIZE + registry_capacity * 8 + 63) & ~63
        self.lane_records_offset = _page_round_up(self.lane_gather_offset + registry_capacity * GATHER_CELL_SIZE)
        self.lane_size = _page_round_up(self.lane_records_offset + (RECORD_SIZE << capacity_log2))


def _coarse_ns() -> int:
    return time.clock_gettime_ns(_CLOCK_MONOTONIC_COARSE)


# MARK: - Errors and checks

def check_memory_ordering(machine: str | None = None, implementation: str | None = None) -> None:
    """Raises RingError unless this interpreter and CPU give the ordering the format needs.

    See the module's documentation; RINGSIDE_PYTHON_UNSAFE_ORDERING=1 skips the check (unsafe).
    """
    if os.environ.get(UNSAFE_ORDERING_VARIABLE) == "1":
        return
    machine = (machine or platform.machine()).lower()
    implementation = implementation or platform.python_implementation()
    if machine not in ("x86_64", "amd64"):
        raise RingError(
            "ringside's pure-Python backend needs x86-64, whose stores are not reordered with other stores; "
            f"this is {machine}, where Python cannot publish a record safely. Install the package with a C compiler "
            f"(the C extension has no such limit), or set {UNSAFE_ORDERING_VARIABLE}=1 to run anyway (unsafe)")
    if implementation != "CPython" or sys.byteorder != "little" or not sys.platform.startswith("linux"):
        raise RingError(
            f"ringside's pure-Python backend needs CPython on Linux (one store per aligned memoryview write); this is "
            f"{implementation} on {sys.platform}. Set {UNSAFE_ORDERING_VARIABLE}=1 to run anyway (unsafe)")


class _Doorbell:
    """This process's registration for the collector's barrier, and its one system call: the
    wake. `pid` is the process that registered (0: none yet; a forked child registers anew)."""
    pid = 0
    rings = False
    syscall: Any = None  # libc's syscall(), once registered
    long: Any = None  # ctypes.c_long: every argument is passed as a long
    futex = 0  # SYS_futex


def _register_for_doorbell() -> bool:
    """Whether this process rings the doorbell: registers it for membarrier's global expedited
    barrier, once per process. Never raises: a failure (no ctypes, an unknown CPU, a kernel or
    seccomp filter that refuses) only means the process never rings."""
    pid = os.getpid()
    if _Doorbell.pid == pid:
        return _Doorbell.rings
    rings = False
    try:
        import ctypes
        numbers = _SYSCALL_NUMBERS.get(platform.machine().lower())
        if numbers is not None:
            syscall = ctypes.CDLL(None, use_errno=True).syscall
            syscall.restype = ctypes.c_long
            long = ctypes.c_long
            rings = syscall(long(numbers[0]), long(_MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED), long(0), long(0)) == 0
            _Doorbell.syscall, _Doorbell.long, _Doorbell.futex = syscall, long, numbers[1]
    except Exception:  # no ctypes, no libc: the file is drained at the collector's poll
        rings = False
    _Doorbell.pid, _Doorbell.rings = pid, rings
    return rings


def _doorbell_address(header: mmap.mmap) -> int:
    """The address of the header's `doorbell` in this mapping, for the wake; 0 if it cannot be
    had. The ctypes view that gives it is dropped at once, so the mapping can still be closed."""
    try:
        import ctypes
        return ctypes.addressof(ctypes.c_uint32.from_buffer(header, _DOORBELL))
    except Exception:
        return 0


def _ring(lane: _Lane) -> None:
    """The collector sleeps and asked to be woken: the word back to 0, then one FUTEX_WAKE on it
    (cold, once a sleep). Never raises: a hot path that called it has written its record."""
    try:
        lane.hi[_I_DOORBELL] = 0
        if lane.bell:
            long = _Doorbell.long
            _Doorbell.syscall(long(_Doorbell.futex), long(lane.bell), long(_FUTEX_WAKE), long(_INT_MAX), long(0),
                              long(0), long(0))
    except Exception:  # a closed lane, a failed call: the collector wakes at its poll
        pass


def _labels_problem(encoded: bytes) -> str | None:
    """Why stored labels are invalid ("key=value" lines sorted strictly by key), or None."""
    if len(encoded) > LABELS_MAX:
        return f"the labels take {len(encoded)} bytes, more than {LABELS_MAX}"
    if not encoded:
        return None
    if b"\0" in encoded:
        return "the labels hold a NUL byte"
    previous = None
    for line in encoded.split(b"\n"):
        key, equals, _ = line.partition(b"=")
        if not equals:
            return f"label {line!r} is not key=value"
        if not _IDENTIFIER_BYTES.match(key) or key.startswith(b"__"):
            return f"label key {key!r} must match [a-zA-Z_][a-zA-Z0-9_]* and not start with \"__\""
        if previous is not None and previous >= key:
            return f"label keys are not sorted strictly: {key!r} comes after {previous!r}"
        previous = key
    return None


_KIND_NAMES = {KIND_COUNTER: "a counter", KIND_GAUGE: "a gauge", KIND_HISTOGRAM: "a histogram"}
_UNIT_NAMES = {code: name for name, code in UNITS.items()}


class _Metric:
    """A registered metric as this process knows it: what the slow path and the messages need.
    `convert` (ringside/_values.py) turns a value the hot path did not take into the value stored,
    or raises the error naming the metric and the value; `encode_exemplar` (ringside/_exemplars.py,
    histograms only) an exemplar into its bytes; Bot.handle() sets them."""
    __slots__ = ("bot", "index", "name", "kind", "unit", "sample_every", "labels", "merge", "form", "scale",
                 "convert", "encode_exemplar", "steps", "steps_per_unit")
    convert: Converter
    encode_exemplar: Encoder | None
    steps: bool  # a metric of steps (VALUES in _values.py): its values rounded, clamped and counted
    steps_per_unit: float  # 10^-scale, as the C producer's rs_metric holds it

    def __init__(self, bot: str, index: int, name: str, kind: int, unit: int, sample_every: int, labels: bytes,
                 merge: int, form: int = 0, scale: int = 0) -> None:
        self.bot, self.index, self.name, self.kind = bot, index, name, kind
        self.unit, self.sample_every, self.labels, self.merge = unit, sample_every, labels, merge
        self.form, self.scale = form, scale  # its values' (VALUES in ringside.h): 0 and 0 for whole units
        self.steps, self.steps_per_unit = False, 1.0  # handle() says


def _same_metric(a: _Metric, b: _Metric) -> bool:
    """The same metric: name, labels, kind, unit, sampling, a gauge's merge policy and its values."""
    return ((a.name, a.labels, a.kind, a.unit, a.sample_every, a.merge, a.form, a.scale)
            == (b.name, b.labels, b.kind, b.unit, b.sample_every, b.merge, b.form, b.scale))


def _read_entry(bot: str, buffer: bytes | memoryview, offset: int, index: int) -> _Metric | str:
    """Registry entry `index`, at `offset` of `buffer`, checked as a reader would: the metric, or
    why the entry is invalid."""
    (entry_index, kind, unit, merge, form, sample_every, name_length, labels_length,
     help_length, scale) = _ENTRY.unpack_from(buffer, offset)
    name = bytes(buffer[offset + 0x18:offset + 0x18 + min(name_length, NAME_MAX)])
    labels = bytes(buffer[offset + 0x80:offset + 0x80 + min(labels_length, LABELS_MAX)])
    help_bytes = bytes(buffer[offset + 0x180:offset + 0x180 + min(help_length, HELP_MAX)])
    problem = (f"its index field says {entry_index}" if entry_index != index
               else f"unknown kind {kind}" if kind not in _KIND_NAMES
               else f"unknown unit {unit}" if unit not in _UNIT_NAMES
               else "sample_every is 0" if sample_every < 1
               else f"gauge merge policy {merge} on {_KIND_NAMES[kind]}"
               if merge >= MERGE_POLICIES or (kind != KIND_GAUGE and merge != MERGE_LAST)
               else f"value form {form} on {_KIND_NAMES[kind]}"
               if form > FORM_SIGNED or (form == FORM_SIGNED and kind != KIND_HISTOGRAM)
               else f"scale {scale} on {_KIND_NAMES[kind]}"
               if not SCALE_MIN <= scale <= SCALE_MAX or (kind == KIND_GAUGE and scale != 0)
               else f"its name is not an identifier of 1 to {NAME_MAX} bytes"
               if name_length > NAME_MAX or not _IDENTIFIER_BYTES.match(name)
               else f"labels length {labels_length}" if labels_length > LABELS_MAX
               else _labels_problem(labels) or (
                   f"its help is longer than {HELP_MAX} bytes or holds a NUL"
                   if help_length > HELP_MAX or b"\0" in help_bytes else None))
    return problem or _Metric(bot, index, name.decode("ascii"), kind, unit, sample_every, labels, merge, form, scale)


# MARK: - Lanes

class _Lane:
    """One lane as this process sees it: its own mapping, views, and its writer's state.

    Only the thread holding it (`holder`) writes its records and cells; claims and retirements
    happen under the bot's lock. `close()` leaves `index` and `state` None and the views released,
    so a handle's hot path that still holds the lane fails into the slow path, which says why.
    `bell` is the address of the header's `doorbell` when this process rings it, else 0.
    `hd`, `hq` and `hi` are the header views of the lane's file, for the metric cells (a gauge's
    value, a metric's control word): a hot path reaches them through the lane it holds, so never
    through a file the process let go of (a forked child's parent's), whose views are released.
    `calls` is the control's sampling (CONTROL in ringside.h), in this process's memory: per
    metric, its calls on the lane since its last record there, while an operator samples it.
    """
    __slots__ = ("index", "mm", "mv", "q", "i", "state", "holder", "hd", "hq", "hi", "calls", "bell")

    def __init__(self, index: int, mm: mmap.mmap, hd: memoryview[float], hq: memoryview[int],
                 hi: memoryview[int]) -> None:
        # Any: an int and a list, or None once closed (any use by a hot path then raises into the slow path).
        self.index: Any = index
        self.mm = mm
        self.mv = memoryview(mm)
        self.q = self.mv.cast("Q")
        self.i = self.mv.cast("I")
        self.hd, self.hq, self.hi = hd, hq, hi  # the bot's: released with its header mapping, not here
        self.calls: dict[int, int] = {}  # metric index -> calls gathered since its last record here
        self.state: Any = [0, 0]  # the next cursor to publish, and the consumer's cursor as last seen
        self.holder: threading.Thread | None = None  # the thread holding it (process-private), or None
        self.bell = 0  # set by the bot once it registered for the doorbell (DOORBELL)

    def refresh_read(self) -> int:
        """The consumer's cursor, read again: only when the lane looks full (an acquire load: see
        MEMORY ORDERING; the collector finished with the slots below it before storing it)."""
        read = self.state[1] = self.q[_LQ_READ]
        return read

    def close(self) -> None:
        self.index = self.state = None
        for view in (self.q, self.i, self.mv):
            view.release()
        self.mm.close()  # unmaps, and closes the duplicate descriptor mmap keeps


class _LaneRelease:
    """Kept in a thread's threading.local beside its lane. CPython drops a thread's locals as the
    thread ends (before join() returns), and __del__ then retires the lane for the next thread."""
    __slots__ = ("bot", "lane", "thread")

    def __init__(self, bot: Bot, lane: _Lane, thread: threading.Thread) -> None:
        self.bot = weakref.ref(bot)  # the bot is not kept alive by its threads
        self.lane = lane
        self.thread = thread

    def __del__(self) -> None:
        try:
            bot = self.bot()
            if bot is not None:
                bot._release(self.lane, self.thread)
        except Exception:  # at interpreter exit the module may be half gone: the lock dies anyway
            pass


# The bots of this process, for the fork handler; weak: a bot dropped without close() goes too.
_BOTS: weakref.WeakSet[Bot] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for bot in list(_BOTS):
        bot._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _worker_pid_of(entry: str, name: str) -> int | None:
    """The pid a directory entry names if it is a worker file of bot `name` (ringside.<name>@<pid>,
    or ringside.<name>@<pid>.<n>: WORKERS in ringside.h)."""
    prefix = FILE_PREFIX + name + WORKER_SEPARATOR
    if not entry.startswith(prefix):
        return None
    digits, dot, suffix = entry[len(prefix):].partition(WORKER_SUFFIX_SEPARATOR)
    if not _is_number(digits, 0x7FFFFFFF) or (dot and not _is_number(suffix, _U32)):
        return None
    return int(digits)


def _is_number(text: str, most: int) -> bool:
    """1 to 10 ASCII digits without a leading 0, at most `most`."""
    return (0 < len(text) <= 10 and text.isascii() and text.isdigit() and text[0] != "0"
            and int(text) <= most)


class _NoSpace(RingError):
    """A file that could not be made or grown for want of room (a RingError to callers)."""


# Every open of a path in the bot's directory, besides the access mode: never follow a link, never
# wait (a FIFO or a device planted at a bot's name opens at once, to be refused by its type), never
# make a terminal the process's controlling one. O_NONBLOCK changes nothing on a regular file.
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

_FILE_KINDS = {stat.S_IFREG: "a regular file", stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a FIFO (named pipe)",
               stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
               stat.S_IFSOCK: "a socket"}


def _not_regular(name: str, path: str, info: os.stat_result) -> RingError:
    """The error for `path`, which is not a regular file (`info`, its fstat or lstat): its type and owner."""
    kind = _FILE_KINDS.get(stat.S_IFMT(info.st_mode), "a file of an unknown type")
    return RingError(f"bot {name}: {path} is {kind} owned by uid {info.st_uid}, not a regular file of uid "
                     f"{os.geteuid()}; a bot opens only regular files of its own user (have it removed, or attach "
                     "another name)")


def _lstat_or_none(path: str) -> os.stat_result | None:
    """What is at `path` (a link itself, never followed), or None when nothing can be seen there."""
    try:
        return os.lstat(path)
    except OSError:
        return None


def _is_ours(directory: str, entry: str) -> bool:
    """Whether `entry` is a regular file of this process's user (never following a link)."""
    try:
        info = os.lstat(os.path.join(directory, entry))
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()


def _process_lives(pid: int) -> bool:
    """Whether process `pid` exists (another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _count_refused_worker(directory: str, name: str) -> bool:
    """Adds 1 to the bot's file's workers_refused, if the file is there and whole: True if counted."""
    try:
        fd = os.open(os.path.join(directory, FILE_PREFIX + name), os.O_RDWR | _OPEN_FLAGS)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_size < HEADER_SIZE:
            return False
        with mmap.mmap(fd, HEADER_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as header:
            magic, version = struct.unpack_from("<QI", header, 0)
            if magic != MAGIC or not FORMAT_VERSION_MIN <= version <= FORMAT_VERSION:
                return False
            # Python has no atomic add on shared memory: a plain read and write, so two refusals at
            # the same instant may count once (the C library adds atomically).
            count = struct.unpack_from("<Q", header, _H_WORKERS_REFUSED)[0]
            struct.pack_into("<Q", header, _H_WORKERS_REFUSED, (count + 1) & 0xFFFFFFFFFFFFFFFF)
            return True
    except OSError:
        return False
    finally:
        os.close(fd)


_FENCE_LOCK = threading.Lock()


def _full_fence() -> None:
    """A full memory fence, which Python lacks: taking and releasing a lock runs an atomic
    read-modify-write (a locked instruction on x86-64: glibc's semaphores, CPython's mutexes),
    which orders every store before it with every load after it."""
    with _FENCE_LOCK:
        pass


def _bot_file_controls(directory: str, name: str) -> tuple[int, dict[tuple[str, bytes], int]] | None:
    """The bot's own file's bot_control, and the control word of each metric it has published by
    (name, labels) (CONTROL in ringside.h), for a worker file's new metrics; None when the file is
    missing, not this user's regular file, or not a valid bot file. Read only, through a read-only
    mapping: each word is one aligned load, as the operator's tool stores it."""
    try:
        fd = os.open(os.path.join(directory, FILE_PREFIX + name), os.O_RDONLY | _OPEN_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_size < HEADER_SIZE:
            return None
        layout = os.pread(fd, _LAYOUT.size, 0)
        (magic, version, header_size, _, capacity_log2, registry_capacity, entry_size, registry_offset,
         cells_offset, lanes_offset) = _LAYOUT.unpack(layout)[:10]
        if (magic != MAGIC or not FORMAT_VERSION_MIN <= version <= FORMAT_VERSION or header_size != HEADER_SIZE
                or entry_size != REGISTRY_ENTRY_SIZE or not MIN_CAPACITY_LOG2 <= capacity_log2 <= MAX_CAPACITY_LOG2
                or not 1 <= registry_capacity <= MAX_MAX_METRICS):
            return None
        g = _Geometry(capacity_log2, registry_capacity)
        if (registry_offset, cells_offset, lanes_offset) != (g.registry_offset, g.cells_offset, g.lanes_offset) \
                or info.st_size < g.lanes_offset:
            return None
        with mmap.mmap(fd, g.lanes_offset, mmap.MAP_SHARED, mmap.PROT_READ) as mapped:
            view = memoryview(mapped)
            words = view.cast("I")
            try:
                bot_control = words[_I_BOT_CONTROL]
                count = words[_I_METRIC_COUNT]  # "acquire" (x86-64): its entries were stored before it
                controls: dict[tuple[str, bytes], int] = {}
                for index in range(min(count, registry_capacity)):
                    metric = _read_entry(name, view, g.registry_offset + index * REGISTRY_ENTRY_SIZE, index)
                    if not isinstance(metric, str):
                        controls[(metric.name, metric.labels)] = words[(g.cells_offset + index * METRIC_CELL_SIZE) // 4
                                                                       + _CELL_CONTROL_I]
            finally:
                words.release()
                view.release()
        return bot_control, controls
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def _disabled_by_environment() -> bool:
    return os.environ.get("RINGSIDE_DISABLED", "").lower() in ("1", "true", "yes")


def span_clock() -> str:
    """What this backend's spans are timed with: CLOCK_MONOTONIC (the extension reads the TSC where
    it serves: THE SPAN CLOCK in ringside.h; a TSC read from Python would cost more than it saves)."""
    return "monotonic: the pure-Python backend times spans with time.monotonic_ns()"


# MARK: - The bot

def attach(name: str, directory: str | None = None, lane_capacity: int | None = None,
           max_metrics: int | None = None, max_lanes: int | None = None, mode: int = 0o600,
           worker: bool = False, max_workers: int | None = None, sample_above_percent: int | None = None) -> Bot:
    """Attaches to the bot `name` as its process, or as one of its workers, creating its file if it
    does not exist.

    Args:
        name: 1 to 200 of [A-Za-z0-9._-]; the file is <directory>/ringside.<name>, or a worker's
            <directory>/ringside.<name>@<pid>.
        directory: default $RINGSIDE_DIR, else /dev/shm.
        lane_capacity: records a lane holds (a power of two, 16 to 2^28); None: 65,536 for a new
            file, whatever an existing one has (a number: an existing file must match).
        max_metrics: 1 to 4096; None: 256 for a new file, whatever an existing one has.
        max_lanes: threads recording at once, 1 to 1024; None: 64 for a new file, whatever an
            existing one has.
        mode: the permission bits of a new file.
        worker: write the bot as one of its workers, beside other processes that write it: a file
            of this process's own, <name>@<pid>, which the collector merges with the bot's others.
        sample_above_percent: checked (1 to 100): this backend never samples a filling lane
            (SAMPLING in ringside.h; its full lanes drop, counted, as before); 100 also keeps the
            operator's control from sampling its histograms, as the C library's lanes then keep no
            sampling state (CONTROL in ringside.h: every call is written).
    Returns a Bot. Raises RingError: another process holds the bot, a corrupt or incompatible file
    (another format version or layout), a full directory, another user's file, a symbolic link,
    or an unsafe platform. With RINGSIDE_DISABLED=1 the bot creates no file and writes nothing.
    """
    return Bot(name, directory=directory, lane_capacity=lane_capacity, max_metrics=max_metrics,
               max_lanes=max_lanes, mode=mode, worker=worker, max_workers=max_workers,
               sample_above_percent=sample_above_percent)


class Bot:
    """A bot's file, attached by this process (see attach())."""
    # Set as the file is laid out (_set_shape) and mapped (_map_header): a disabled bot has none.
    _directory: str
    _capacity_log2: int
    _geometry: _Geometry
    _mask: int
    _hv: memoryview
    _hq: memoryview[int]
    _hi: memoryview[int]
    _hd: memoryview[float]
    _cells_q: int
    _control_i: int
    _gather_q: int

    def __init__(self, name: str, directory: str | None = None, lane_capacity: int | None = None,
                 max_metrics: int | None = None, max_lanes: int | None = None, mode: int = 0o600,
                 worker: bool = False, max_workers: int | None = None, sample_above_percent: int | None = None) -> None:
        if not isinstance(name, str) or not _BOT_NAME.match(name) or name in (".", ".."):
            raise RingValueError(f"bot {name!r}: a bot name is 1 to 200 of [A-Za-z0-9._-], not . or ..")
        if lane_capacity is not None and (
                not isinstance(lane_capacity, int) or lane_capacity & (lane_capacity - 1)
                or not 1 << MIN_CAPACITY_LOG2 <= lane_capacity <= 1 << MAX_CAPACITY_LOG2):
            raise RingValueError(f"bot {name}: lane_capacity {lane_capacity} must be a power of two from 16 to 2^28 records")
        if max_metrics is not None and (not isinstance(max_metrics, int) or not 1 <= max_metrics <= MAX_MAX_METRICS):
            raise RingValueError(f"bot {name}: max_metrics {max_metrics} must be from 1 to {MAX_MAX_METRICS}")
        if max_lanes is not None and (not isinstance(max_lanes, int) or not 1 <= max_lanes <= MAX_LANES):
            raise RingValueError(f"bot {name}: max_lanes {max_lanes} must be from 1 to {MAX_LANES}")
        if max_workers is not None and (not isinstance(max_workers, int) or not 1 <= max_workers <= MAX_WORKERS):
            raise RingValueError(f"bot {name}: max_workers {max_workers} must be from 1 to {MAX_WORKERS}")
        if sample_above_percent is not None and (
                not isinstance(sample_above_percent, int) or not 1 <= sample_above_percent <= 100):
            raise RingValueError(f"bot {name}: sample_above_percent {sample_above_percent} must be from 1 to 100 "
                                 "(100: never sample)")
        if not isinstance(mode, int) or mode & ~0o777:
            raise RingValueError(f"bot {name}: mode {mode!r} must hold permission bits only (0 to 0o777)")
        self.name = name
        self._control_samples = sample_above_percent != 100  # the operator's sampling applies (CONTROL)
        self._path: str | None = None  # the file written: the bot's, or this process's as a worker
        self._metrics: dict[tuple[str, bytes], _Metric] = {}  # (name, encoded labels) -> _Metric
        self._entries: list[_Metric] = []  # _Metric by index
        # sampled histograms: index -> each lane's calls left before the next written
        self._countdowns: dict[int, list[int]] = {}
        self._laneless_countdowns: dict[int, int] = {}  # the same for threads without a lane (under the lock)
        self._lock = threading.RLock()  # registration, lane claims and releases, `unlaned`
        self._local = threading.local()  # .lane: this thread's _Lane (None: no lane); .release
        self._lanes: list[_Lane] = []
        self._fd = -1
        self._header: mmap.mmap | None = None  # the mapping of [0, lanes_offset): None when disabled
        self._bell = 0  # the address of the header's doorbell while this process rings it (DOORBELL), else 0
        self._closed = False
        self._forked = False  # a forked child's, until its first record makes it a worker of the bot
        self._said_no_worker = False  # the forked child could not make its worker file, and said why
        self._said_laneless = False
        self._owner_pid = os.getpid()
        self._max_lanes = 0
        self._max_workers = max_workers or DEFAULT_MAX_WORKERS  # for a forked child's worker file too
        # The attached file, as fstat saw it: a forked child reads the registry of this very file,
        # not of one put at its path since; and its permission bits, for the child's worker file.
        self._file_identity = (0, 0)
        self._file_mode = mode
        self._gauge_lock = threading.Lock()  # gauges' inc and dec: their running values
        self._gauge_values: list[list[float]] = []  # each gauge's value as this process last set it
        if _disabled_by_environment():
            self._registry_capacity = max_metrics or DEFAULT_MAX_METRICS
            return
        check_memory_ordering()
        directory = directory or os.environ.get("RINGSIDE_DIR") or "/dev/shm"
        self._directory = directory
        file_name = FILE_PREFIX + name + (f"{WORKER_SEPARATOR}{os.getpid()}" if worker else "")
        self._path = os.path.join(directory, file_name)
        if worker:
            self._attach_worker_file(lane_capacity, max_metrics, max_lanes, mode)
        else:
            self._attach_path(lane_capacity, max_metrics, max_lanes, mode)
        _BOTS.add(self)

    def _attach_path(self, lane_capacity: int | None, max_metrics: int | None, max_lanes: int | None, mode: int) -> None:
        """Attaches the file at self._path (creating it, or adopting it as it is)."""
        for _ in range(8):  # a file removed or replaced between our open and our lock: again
            if self._attach_once(self._path or "", lane_capacity, max_metrics, max_lanes, mode):
                return
        raise RingError(f"bot {self.name}: {self._path} kept being replaced while attaching (8 attempts)")

    def _attach_worker_file(self, lane_capacity: int | None, max_metrics: int | None, max_lanes: int | None,
                            mode: int) -> None:
        """Attaches this process's worker file (self._path, <name>@<pid>) within the bound, as
        ringside_producer.c does (see WORKERS in ringside.h): while the directory holds fewer than
        max_workers worker files of the bot of this user (its own aside), its own, or when that
        name is unusable (another user's file planted there, say) one of WORKER_NAME_ATTEMPTS
        random <name>@<pid>.<n>; past the bound, or when none serves, the file of a worker of
        this user that is gone, whose totals it continues (self._path names it then); when every
        one is held, RingError, counted in the bot's file (workers_refused)."""
        try:
            names = os.listdir(self._directory)
        except OSError:
            return self._attach_path(lane_capacity, max_metrics, max_lanes, mode)  # the attach says what is wrong
        others = [entry for entry in names
                  if _worker_pid_of(entry, self.name) not in (None, os.getpid()) and _is_ours(self._directory, entry)]
        own, unusable = self._path or "", ""
        if len(others) < self._max_workers:
            candidates = [own] + [f"{own}{WORKER_SUFFIX_SEPARATOR}{secrets.randbelow(_U32) + 1}"
                                  for _ in range(WORKER_NAME_ATTEMPTS)]
            for candidate in candidates:
                self._path = candidate
                try:
                    return self._attach_path(lane_capacity, max_metrics, max_lanes, mode)
                except RingError as error:
                    if isinstance(error, _NoSpace):  # another name would not cure it
                        self._path = own
                        raise
                    # Unusable (another user's file, a link, one held by a live process): the next.
                    unusable = str(error)
        for entry in others:
            if _process_lives(_worker_pid_of(entry, self.name) or 0):
                continue  # its worker's while that process lives, even before it holds the lock
            self._path = os.path.join(self._directory, entry)
            try:
                return self._attach_path(lane_capacity, max_metrics, max_lanes, mode)
            except RingError:
                continue  # held, or not one to continue: the next
        self._path = own
        counted = ("; counted in the bot's file (workers_refused)" if _count_refused_worker(self._directory, self.name)
                   else "; not counted: the bot's own file is missing")
        if len(others) < self._max_workers:
            raise RingError(f"bot {self.name}: its worker file {own} and {WORKER_NAME_ATTEMPTS} other names were "
                            f"unusable (the last: {unusable}), and no gone worker's file is free to continue{counted}")
        raise RingError(f"bot {self.name}: the bot has {len(others)} worker files (max_workers), each held by a live worker"
                        + counted)

    def __repr__(self) -> str:
        state = ("closed" if self._closed else "forked" if self._forked
                 else "disabled" if self._header is None else self._path)
        return f"<ringside.Bot {self.name} ({state})>"

    @property
    def enabled(self) -> bool:
        """True while this process's records are kept: it writes a file of the bot, or it is a
        forked child whose first record will make its worker file (not one that could not)."""
        if self._forked:
            return not self._said_no_worker and not self._closed
        return self._header is not None and not self._closed

    @property
    def path(self) -> str | None:
        """The file this process writes: the bot's, or its own as a worker (<name>@<pid>); None when
        disabled or closed, and in a forked child until its first record makes it a worker."""
        return self._path if self._header is not None else None

    # MARK: Attaching

    def _attach_once(self, path: str, lane_capacity: int | None, max_metrics: int | None, max_lanes: int | None,
                     mode: int) -> bool:
        created = True
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, mode)
        except FileExistsError:
            created = False
            try:
                fd = os.open(path, os.O_RDWR | _OPEN_FLAGS)
            except FileNotFoundError:
                return False  # removed between the two opens
            except OSError as error:
                raise self._open_error(error) from None
        except OSError as error:
            raise self._open_error(error) from None
        try:
            if created:
                os.fchmod(fd, mode)  # exactly the mode asked for, whatever the umask
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _not_regular(self.name, path, info)
            if info.st_uid != os.geteuid():
                raise RingError(f"bot {self.name}: {path} is owned by uid {info.st_uid}, not {os.geteuid()}; "
                                "bot files are private to their user")
            self._lock_producer_byte(fd)
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
            version = struct.unpack_from("<I", header, 8)[0] if len(header) == _LAYOUT.size else 0
            self._fd = fd
            if version == 0:
                self._create(path, created, lane_capacity, max_metrics, max_lanes)
            else:
                self._adopt(header, size, lane_capacity, max_metrics, max_lanes)
            self._file_identity = (info.st_dev, info.st_ino)
            self._file_mode = info.st_mode & 0o777
            return True
        except BaseException:
            self._unmap()
            self._fd = -1
            os.close(fd)
            raise

    def _open_error(self, error: OSError) -> RingError:
        if error.errno == errno.ELOOP:
            return RingError(f"bot {self.name}: {self._path} is a symbolic link; Ringside never follows links")
        if error.errno in (errno.EISDIR, errno.ENXIO, errno.ENODEV):
            # A directory (opened to write), a socket or a device without a driver: said as what it is.
            info = _lstat_or_none(self._path or "")
            if info is not None and not stat.S_ISREG(info.st_mode):
                return _not_regular(self.name, self._path or "", info)
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return _NoSpace(f"bot {self.name}: no space at {self._path} (is {self._directory} full?)")
        return RingError(f"bot {self.name}: open {self._path}: {error.strerror} (errno {error.errno})")

    def _lock_producer_byte(self, fd: int) -> None:
        try:
            fcntl.fcntl(fd, _F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, LOCK_BYTE_PRODUCER, 1, 0))
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES):
                header = os.pread(fd, 0xA4, 0).ljust(0xA4, b"\0")
                # Format version 1 kept the pid at 0xA0.
                at = 0xA0 if struct.unpack_from("<I", header, 8)[0] == 1 else 0x98
                pid = struct.unpack_from("<i", header, at)[0]
                raise RingError(f"bot {self.name}: another producer is attached (pid {pid}); a bot has one process, "
                                "or several as its workers (attach with the worker option)") from None
            raise RingError(f"bot {self.name}: lock {self._path}: {error.strerror} (errno {error.errno})") from None

    def _set_shape(self, capacity_log2: int, registry_capacity: int, max_lanes: int) -> None:
        self._capacity_log2 = capacity_log2
        self._registry_capacity = registry_capacity
        self._max_lanes = max_lanes
        self._geometry = _Geometry(capacity_log2, registry_capacity)
        self._mask = (1 << capacity_log2) - 1

    def _map(self, size: int, offset: int = 0) -> mmap.mmap:
        # MAP_POPULATE (Python 3.10+): map every page now, not on the hot path's first touch.
        return mmap.mmap(self._fd, size, mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                         mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)

    def _map_header(self) -> None:
        self._header = self._map(self._geometry.lanes_offset)
        self._hv = memoryview(self._header)
        self._hq = self._hv.cast("Q")
        self._hi = self._hv.cast("I")
        self._hd = self._hv.cast("d")  # gauge_bits, stored as the double they are
        self._cells_q = self._geometry.cells_offset // 8
        self._control_i = self._geometry.cells_offset // 4 + _CELL_CONTROL_I  # metric 0's control word, in _hi
        self._gather_q = self._geometry.lane_gather_offset // 8  # in a lane's Q view

    def _space_error(self, size: int, error: OSError) -> RingError:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return _NoSpace(f"bot {self.name}: no space for {size} bytes at {self._path} (is {self._directory} full?)")
        return RingError(f"bot {self.name}: reserve {size} bytes for {self._path}: {error.strerror} "
                         f"(errno {error.errno})")

    def _create(self, path: str, created: bool, lane_capacity: int | None, max_metrics: int | None,
                max_lanes: int | None) -> None:
        """A new file, or one whose creation never finished (version 0): lay it out under the lock."""
        self._set_shape((lane_capacity or DEFAULT_LANE_CAPACITY).bit_length() - 1,
                        max_metrics or DEFAULT_MAX_METRICS, max_lanes or DEFAULT_MAX_LANES)
        g = self._geometry
        try:
            # From zeros (a half-created file may hold anything); the header part reserved now.
            os.ftruncate(self._fd, 0)
            os.posix_fallocate(self._fd, 0, g.lanes_offset)
            self._map_header()
        except OSError as error:
            if created:
                os.unlink(path)  # ours, and we still hold its lock
            raise self._space_error(g.lanes_offset, error) from None
        _LAYOUT.pack_into(self._hv, 0, MAGIC, 0, HEADER_SIZE, RECORD_SIZE, self._capacity_log2,
                          self._registry_capacity, REGISTRY_ENTRY_SIZE, g.registry_offset, g.cells_offset,
                          g.lanes_offset, time.clock_gettime_ns(time.CLOCK_REALTIME),
                          time.clock_gettime_ns(time.CLOCK_MONOTONIC), g.lane_size, g.lane_records_offset,
                          self._max_lanes, METRIC_CELL_SIZE, LANE_HEADER_SIZE, g.lane_gather_offset, GATHER_CELL_SIZE)
        # "Release", written last: on x86-64 the layout's stores are visible before this one.
        self._hi[_I_VERSION] = FORMAT_VERSION_MIN  # 4 at its first signed or scaled metric (_upgrade_for)
        self._start()

    def _adopt(self, header: bytes, size: int, lane_capacity: int | None, max_metrics: int | None,
               max_lanes: int | None) -> None:
        """An existing file: validated field by field, then taken over with its lanes retired."""
        (magic, version, header_size, record_size, capacity_log2, registry_capacity, entry_size,
         registry_offset, cells_offset, lanes_offset, _, _, lane_size, lane_records_offset, lanes,
         cell_size, lane_header_size, lane_gather_offset, gather_cell_size) = _LAYOUT.unpack(header)

        def corrupt(problem: str) -> RingError:
            return RingError(f"bot {self.name}: {self._path} is corrupt: {problem}")
        if magic != MAGIC:
            raise corrupt(f"bad magic {magic:#018x} (not a Ringside file)")
        if not FORMAT_VERSION_MIN <= version <= FORMAT_VERSION:
            before = {1: " (one ring per file, before lanes)", 2: " (before gather cells)"}.get(version, "")
            raise RingError(f"bot {self.name}: {self._path}: it is format version {version}{before}; this module "
                            f"reads and writes versions {FORMAT_VERSION_MIN} and {FORMAT_VERSION} (a lane per thread, "
                            "gather cells): remove the file")
        if not MIN_CAPACITY_LOG2 <= capacity_log2 <= MAX_CAPACITY_LOG2:
            raise corrupt(f"capacity_log2 is {capacity_log2}, not {MIN_CAPACITY_LOG2} to {MAX_CAPACITY_LOG2}")
        if not 1 <= registry_capacity <= MAX_MAX_METRICS:
            raise corrupt(f"registry_capacity is {registry_capacity}, not 1 to {MAX_MAX_METRICS}")
        if not 1 <= lanes <= MAX_LANES:
            raise corrupt(f"max_lanes is {lanes}, not 1 to {MAX_LANES}")
        g = _Geometry(capacity_log2, registry_capacity)
        for field, value, expected in (
                ("header_size", header_size, HEADER_SIZE), ("record_size", record_size, RECORD_SIZE),
                ("registry_entry_size", entry_size, REGISTRY_ENTRY_SIZE),
                ("metric_cell_size", cell_size, METRIC_CELL_SIZE),
                ("lane_header_size", lane_header_size, LANE_HEADER_SIZE),
                ("gather_cell_size", gather_cell_size, GATHER_CELL_SIZE),
                ("lane_gather_offset", lane_gather_offset, g.lane_gather_offset),
                ("registry_offset", registry_offset, g.registry_offset), ("cells_offset", cells_offset, g.cells_offset),
                ("lanes_offset", lanes_offset, g.lanes_offset), ("lane_size", lane_size, g.lane_size),
                ("lane_records_offset", lane_records_offset, g.lane_records_offset)):
            if value != expected:
                raise corrupt(f"{field} is {value}, expected {expected}")
        if size < g.lanes_offset:
            raise corrupt(f"it has {size} bytes, less than the {g.lanes_offset} before its lanes")
        if ((lane_capacity and lane_capacity != 1 << capacity_log2)
                or (max_metrics and max_metrics != registry_capacity) or (max_lanes and max_lanes != lanes)):
            raise RingError(f"bot {self.name}: {self._path} holds lanes of {1 << capacity_log2} records, "
                            f"{registry_capacity} metrics and {lanes} lanes; asked for lanes of "
                            f"{lane_capacity or 'any'} records, {max_metrics or 'any'} metrics and "
                            f"{max_lanes or 'any'} lanes (remove the file to make it again, losing its contents)")
        self._set_shape(capacity_log2, registry_capacity, lanes)
        self._map_header()
        self._load_registry(corrupt)
        self._map_lanes(size, corrupt)
        # Valid: only now is anything written. The process that held the lanes is gone (it held the lock).
        for lane in self._lanes:
            self._retire(lane)
        self._start()

    def _load_registry(self, corrupt: Callable[[str], RingError]) -> None:
        count = self._hi[_I_METRIC_COUNT]
        if count > self._registry_capacity:
            raise corrupt(f"metric_count {count} exceeds registry_capacity {self._registry_capacity}")
        for index in range(count):
            metric = _read_entry(self.name, self._hv, HEADER_SIZE + index * REGISTRY_ENTRY_SIZE, index)
            if isinstance(metric, str):
                raise corrupt(f"registry entry {index}: {metric}")
            self._metrics[(metric.name, metric.labels)] = metric
            self._entries.append(metric)
            if metric.kind == KIND_HISTOGRAM and metric.sample_every > 1:
                self._countdowns[index] = [1] * self._max_lanes

    def _map_lanes(self, size: int, corrupt: Callable[[str], RingError]) -> None:
        g, allocated = self._geometry, self._hi[_I_LANES_ALLOCATED]
        if allocated > self._max_lanes:
            raise corrupt(f"lanes_allocated {allocated} exceeds max_lanes {self._max_lanes}")
        needed = g.lanes_offset + allocated * g.lane_size
        if size < needed:
            raise corrupt(f"it has {size} bytes, but its {allocated} lanes need {needed}")
        capacity = 1 << self._capacity_log2
        for index in range(allocated):
            lane = _Lane(index, self._map(g.lane_size, g.lanes_offset + index * g.lane_size), self._hd, self._hq, self._hi)
            self._lanes.append(lane)
            write, read = lane.q[_LQ_WRITE], lane.q[_LQ_READ]
            if read > write:
                raise corrupt(f"lane {index}'s read_cursor {read} is past its write_cursor {write}")
            if write - read > capacity:
                raise corrupt(f"lane {index}'s cursors (read {read}, write {write}) hold more records than "
                              f"its capacity of {capacity}")

    def _start(self) -> None:
        """The producer's line of a freshly attached file: hints for readers (the lock is the truth)."""
        hq, hi = self._hq, self._hi
        hi[_I_PRODUCER_PID] = os.getpid()
        hq[_Q_PRODUCER_START] = time.clock_gettime_ns(time.CLOCK_REALTIME)
        hi[_I_ATTACHES] = (hi[_I_ATTACHES] + 1) & _U32
        hq[_Q_HEARTBEAT] = _coarse_ns()
        hi[_I_SAMPLE_ABOVE] = 0  # this backend never samples a filling lane (SAMPLING in ringside.h)
        rings = _register_for_doorbell()
        self._bell = _doorbell_address(self._header) if rings and self._header is not None else 0
        hi[_I_RINGS_DOORBELL] = 1 if rings else 0
        for lane in self._lanes:
            lane.bell = self._bell

    def _unmap(self) -> None:
        """Releases every view, then unmaps: a mapping would keep the file, and its lock, alive."""
        for lane in self._lanes:
            if lane.state is not None:
                lane.close()
        if self._header is not None:
            for view in (self._hq, self._hi, self._hd, self._hv):
                view.release()
            self._header.close()
            self._header = None

    def close(self) -> None:
        """Retires every lane, unmaps the bot and releases its lock; its records stay for the collector.
        No thread may use the bot afterwards: its handles' calls then raise RingError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._header is not None and not self._forked and os.getpid() == self._owner_pid:
                for lane in self._lanes:
                    self._retire(lane)
            self._unmap()
            if self._fd >= 0:
                os.close(self._fd)  # with the mappings gone, this releases the producer lock
                self._fd = -1
        _BOTS.discard(self)

    def __enter__(self) -> Bot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _after_fork(self) -> None:
        """In a forked child (the forking thread, the only one): locks a thread of the parent may
        have held are made anew, the gauges' running values start from 0 as in any new process,
        and the parent's file is let go of."""
        self._lock = threading.RLock()
        self._gauge_lock = threading.Lock()
        for current in self._gauge_values:
            current[0] = 0.0
        self._disown()

    def _disown(self) -> None:
        """In a forked child: the file is the parent's. Write nothing to it and let go of it, the
        descriptor and the mappings (either would keep the parent's lock alive, and hide the
        parent's death); the child's first record, registration or lane claim makes it a worker of
        the bot (_become_worker)."""
        self._said_no_worker = False  # a child of a child that could not make its file tries anew
        if self._header is None or self._closed or self._forked:
            return
        self._forked = True
        # The forking thread's lane is the parent's: its next call claims one of the worker file.
        # (Dropping its release is harmless: _release leaves a lane of another process alone.)
        for name in ("lane", "release"):
            if hasattr(self._local, name):
                delattr(self._local, name)
        try:
            self._unmap()
        except BufferError:
            pass  # an export we cannot release: the mapping stays, but nothing writes through it
        os.close(self._fd)
        self._fd = -1

    def _become_worker(self) -> None:
        """In a forked child, at its first record, registration or lane claim through the bot its
        parent attached: the child becomes a worker of the bot, as ringside_producer.c's child
        does. It writes a file of its own, <name>@<pid>, of the parent's shape and mode, which
        starts with the parent's registry at the same indices, so the handles it inherited keep
        working; the collector merges it with the bot's other files. If that fails, the child
        writes nothing to the bot, says why once on stderr, and this raises RingError (again
        without a word at the next calls). A no-op unless forked."""
        with self._lock:
            if not self._forked:
                return
            if self._said_no_worker:
                raise RingError(f"bot {self.name}: this forked child could not make its worker file (said on stderr)")
            try:
                self._attach_worker()
            except (RingError, OSError, ValueError) as error:
                self._said_no_worker = True
                why = str(error) if isinstance(error, RingError) else f"bot {self.name}: {error}"
                # The line names the bot once: the reason's own "bot NAME: " is left out, as C does.
                prefix = f"bot {self.name}: "
                reason = why[len(prefix):] if why.startswith(prefix) else why
                # os.write, not print: sys.stderr's lock may have been a parent thread's.
                os.write(2, f"ringside: bot {self.name}: this forked child (pid {os.getpid()}) writes nothing: {reason}\n"
                         .encode())
                if isinstance(error, RingError):
                    raise
                raise RingError(str(why)) from None

    def _attach_worker(self) -> None:
        """_become_worker's work, under the lock: reads the parent's registry, attaches (creates,
        or adopts, as attach() does) the worker file and gives it the parent's entries."""
        parent_entries = self._read_attached_registry()
        known, known_metrics, known_countdowns = self._entries, self._metrics, dict(self._countdowns)
        self._entries, self._metrics, self._lanes = [], {}, []
        parent_path = self._path
        self._path = os.path.join(self._directory, f"{FILE_PREFIX}{self.name}{WORKER_SEPARATOR}{os.getpid()}")
        self._owner_pid = os.getpid()
        self._said_laneless = False
        try:
            # As attach(): the parent's shape and mode; an existing file must match.
            self._attach_worker_file(1 << self._capacity_log2, self._registry_capacity, self._max_lanes, self._file_mode)
            self._take_registry(parent_entries, known, known_countdowns)
        except BaseException:
            # Nothing written through the bot: what was mapped is let go of (a file made stays,
            # as the C library leaves it), and the bot is the forked child's again.
            try:
                self._unmap()
            except BufferError:
                pass
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._entries, self._metrics, self._lanes, self._path = known, known_metrics, [], parent_path
            self._countdowns.update(known_countdowns)
            raise
        self._forked = False

    def _read_attached_registry(self) -> list[bytes]:
        """The registry entries of the file the bot attached, read through a descriptor of our own,
        read only (it takes no lock and writes nothing), if its path still names that file."""
        path, name = self._path, self.name

        def not_attached(now: os.stat_result) -> RingError:
            kind = _FILE_KINDS.get(stat.S_IFMT(now.st_mode), "a file of an unknown type")
            return RingError(f"bot {name}: {path} is no longer the file the parent attached: its registry is gone (it is "
                             f"now {kind} owned by uid {now.st_uid})")

        try:
            fd = os.open(str(path), os.O_RDONLY | _OPEN_FLAGS)
        except OSError as error:
            now = _lstat_or_none(str(path))  # a socket (ENXIO), say: what is there is not the parent's file
            if now is not None and (now.st_dev, now.st_ino) != self._file_identity:
                raise not_attached(now) from None
            raise RingError(f"bot {name}: open the parent's file {path}: {error.strerror} (errno {error.errno})") from None
        try:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != self._file_identity:
                raise not_attached(info)
            header = os.pread(fd, _HEADER_STRUCT_SIZE, 0)
            if len(header) != _HEADER_STRUCT_SIZE:
                raise RingError(f"bot {name}: read {path}: {os.strerror(errno.EIO)} (errno {errno.EIO})")
            registry_offset = struct.unpack_from("<Q", header, 0x20)[0]
            count = struct.unpack_from("<I", header, _I_METRIC_COUNT * 4)[0]
            if count > self._registry_capacity or registry_offset != HEADER_SIZE:
                raise RingError(f"bot {name}: {path} is corrupt: metric_count {count}, registry_offset {registry_offset}")
            registry = os.pread(fd, count * REGISTRY_ENTRY_SIZE, registry_offset) if count else b""
            if len(registry) != count * REGISTRY_ENTRY_SIZE:
                raise RingError(f"bot {name}: read the registry of {path}: {os.strerror(errno.EIO)} (errno {errno.EIO})")
        except OSError as error:
            raise RingError(f"bot {name}: read {path}: {error.strerror} (errno {error.errno})") from None
        finally:
            os.close(fd)
        return [registry[at:at + REGISTRY_ENTRY_SIZE] for at in range(0, len(registry), REGISTRY_ENTRY_SIZE)]

    def _take_registry(self, entries: list[bytes], known: list[_Metric], known_countdowns: dict[int, list[int]]) -> None:
        """Gives the worker file the parent's entries, at the same indices: an entry the file holds
        already (a dead process's file, adopted) must be the same metric. Then this process's
        metrics are the ones its handles hold. Under the lock."""
        had = len(self._entries)
        for index, raw in enumerate(entries):
            metric = _read_entry(self.name, raw, 0, index)
            if isinstance(metric, str):
                raise RingError(f"bot {self.name}: the parent's registry entry {index}: {metric}")
            if index < had:
                if not _same_metric(self._entries[index], metric):
                    raise RingError(f"bot {self.name}: {self._path} holds another metric at index {index} than the "
                                    "parent's registry")
                continue
            offset = HEADER_SIZE + index * REGISTRY_ENTRY_SIZE
            self._hv[offset:offset + REGISTRY_ENTRY_SIZE] = raw
            self._upgrade_for(metric)
            self._entries.append(metric)
            self._metrics[(metric.name, metric.labels)] = metric
            if metric.kind == KIND_HISTOGRAM and metric.sample_every > 1:
                self._countdowns[index] = [1] * self._max_lanes
        if len(entries) > had:
            self._publish(self._entries[had:])
        # The metrics this process registered before the fork are the parent's first entries:
        # keep its objects (handles hold them, and their sampling countdowns, which start again
        # in the worker file's lanes, as a new file's do).
        for index, metric in enumerate(known):
            if index >= len(self._entries) or not _same_metric(self._entries[index], metric):
                raise RingError(f"bot {self.name}: {self._path} holds another metric at index {index} than the "
                                "parent's registry")
            self._entries[index] = metric
            self._metrics[(metric.name, metric.labels)] = metric
            if index in known_countdowns:
                countdowns = self._countdowns[index] = known_countdowns[index]
                countdowns[:] = [1] * len(countdowns)
        self._laneless_countdowns.clear()

    def _publish(self, metrics: list[_Metric]) -> None:
        """Publishes the registry's new entries `metrics` (the last ones, written) with one store of
        metric_count, each starting with the control the operator has set (CONTROL in ringside.h):
        the bot's BOT_OFF, and in a worker file the word of the same metric in the bot's own file.
        The tool writes a published metric's word only, so an unpublished one's is ours to store
        plainly; the control is read again after the count's store and a full fence (the tool
        fences between its store and its read of metric_count), and what it adds by then is or'ed
        in. Python has no atomic or: that one is a load and a store, a rare race (the operator
        turning the bot off while this registers) in which a change the tool makes to the same new
        word at the same instant could be lost, where the C library's atomic or loses nothing."""
        controls = self._controls_for(metrics)
        for metric, word in zip(metrics, controls):
            self._hi[self._control_i + _CELL_I_WORDS * metric.index] = word
        # "Release": the entries' stores are visible before the count's (x86-64, see above).
        self._hi[_I_METRIC_COUNT] = metrics[-1].index + 1
        _full_fence()
        for metric, word in zip(metrics, self._controls_for(metrics)):
            at = self._control_i + _CELL_I_WORDS * metric.index
            held = self._hi[at]
            if word & ~held:
                self._hi[at] = held | word

    def _controls_for(self, metrics: list[_Metric]) -> list[int]:
        """The control words new metrics start with: BOT_OFF if this file's bot_control has it, and
        in a worker file the word of the same metric (name and labels) in the bot's own file and
        that file's BOT_OFF (none if that file is missing or not a valid bot file)."""
        bot_off = self._hi[_I_BOT_CONTROL] & CONTROL_BOT_OFF
        if os.path.basename(self._path or "") == FILE_PREFIX + self.name:
            return [bot_off] * len(metrics)
        found = _bot_file_controls(self._directory, self.name)
        if found is None:
            return [bot_off] * len(metrics)
        bot_control, words = found
        bot_off |= bot_control & CONTROL_BOT_OFF
        return [bot_off | words.get((metric.name, metric.labels), 0) for metric in metrics]

    def _check_usable(self) -> None:
        if self._closed:
            raise RingError(f"bot {self.name} is closed")

    # MARK: Lanes

    def _retire(self, lane: _Lane) -> None:
        """Marks a lane free here and retired in the file. Under the lock (or alone, at attach)."""
        lane.holder = None
        lane.i[_LI_OWNER] = 0
        # "Release": a reader that sees RETIRED sees the records and cells stored before it.
        lane.i[_LI_STATE] = LANE_RETIRED

    def _release(self, lane: _Lane, thread: threading.Thread) -> None:
        """A thread ended: retire its lane, unless it was taken over, closed, or is the parent's."""
        if os.getpid() != self._owner_pid or lane.state is None:
            return  # a forked child drops the parent's threads' locals: their lanes are the parent's
        with self._lock:
            if not self._closed and not self._forked and lane.holder is thread and lane.state is not None:
                self._retire(lane)

    def _claim(self) -> _Lane | None:
        """The calling thread's lane, claimed now (None: no lane), kept in its threading.local."""
        thread = threading.current_thread()
        with self._lock:
            self._check_usable()
            if self._forked:
                return None
            lane = self._take_lane_locked(thread)
        self._local.lane = lane
        if lane is not None:
            self._local.release = _LaneRelease(self, lane, thread)
        return lane

    def _take_lane_locked(self, thread: threading.Thread) -> _Lane | None:
        for lane in self._lanes:
            holder = lane.holder
            if holder is None or not holder.is_alive():
                if holder is not None:
                    self._retire(lane)  # its thread ended unseen: retired first, as its exit would have
                self._hand_over(lane, thread)
                return lane
        if len(self._lanes) < self._max_lanes:
            try:
                lane = self._add_lane_locked()
            except (OSError, ValueError) as error:
                self._say_laneless(error)
                return None
            self._hand_over(lane, thread)
            return lane
        self._hq[_Q_LANES_EXHAUSTED] += 1  # a statistic only this process writes, under the lock
        return None

    def _add_lane_locked(self) -> _Lane:
        g, index = self._geometry, len(self._lanes)
        offset = g.lanes_offset + index * g.lane_size
        # The file grows by the lane, reserved first: a full /dev/shm fails here, never as SIGBUS.
        os.posix_fallocate(self._fd, offset, g.lane_size)
        lane = _Lane(index, self._map(g.lane_size, offset), self._hd, self._hq, self._hi)
        lane.bell = self._bell
        # A process that died while adding this lane may have written its header or cells.
        lane.mm[:g.lane_records_offset] = bytes(g.lane_records_offset)
        self._lanes.append(lane)
        # "Release" (x86-64): one aligned 4-byte store, after the lane's pages and zeroed header.
        self._hi[_I_LANES_ALLOCATED] = index + 1
        return lane

    def _hand_over(self, lane: _Lane, thread: threading.Thread) -> None:
        q, i = lane.q, lane.i
        # Go on from the lane's cursors: its last writer is done (it released the lane under
        # this lock, or ended, or was another process, gone before we took the file's lock).
        lane.state[0], lane.state[1] = q[_LQ_WRITE], q[_LQ_READ]
        lane.holder = thread
        lane.calls.clear()  # as the C library's holder ends its sampling: what it gathered is counted
        now = _coarse_ns()
        i[_LI_CLAIMS] = (i[_LI_CLAIMS] + 1) & _U32
        i[_LI_OWNER] = threading.get_native_id()
        lane.mm[_L_THREAD_NAME:_L_THREAD_NAME + THREAD_NAME_MAX] = thread_name_bytes(thread.name).ljust(THREAD_NAME_MAX, b"\0")
        q[_LQ_HEARTBEAT] = now
        # "Release": a reader that sees ACTIVE sees the owner, its name and claim count stored before it.
        i[_LI_STATE] = LANE_ACTIVE
        self._hq[_Q_HEARTBEAT] = now

    def _say_laneless(self, error: Exception) -> None:
        if self._said_laneless:
            return
        self._said_laneless = True
        print(f"ringside: bot {self.name}: lane {len(self._lanes)} could not be added to {self._path}: {error}: "
              "a thread without a lane keeps its counts and gauges, and counts its records as dropped",
              file=sys.stderr)

    # MARK: Registration

    def register(self, name: str, kind: int, unit: int, labels: bytes, help: str, sample_every: int,
                 merge: int, form: int = 0, scale: int = 0) -> int:
        """Registers (or finds again) a metric and returns its index: `unit` is an rs_unit code,
        `labels` the stored encoding ("key=value" lines sorted by key), `help` a str, `merge` an
        rs_gauge_merge code (0, the value set last, but for gauges), `form` and `scale` its values'
        (VALUES in ringside.h). The same metric asked again with another kind, unit, sampling,
        values or merge policy is a conflict."""
        def invalid(reason: str) -> RingValueError:
            return RingValueError(f"bot {self.name}: metric {name}: {reason}")
        if not isinstance(name, str) or not _IDENTIFIER.match(name) or len(name.encode()) > NAME_MAX:
            raise RingValueError(f"bot {self.name}: metric name {name!r} must match [a-zA-Z_][a-zA-Z0-9_]* "
                                 f"and have at most {NAME_MAX} bytes")
        if unit not in _UNIT_NAMES:
            raise invalid(f"unknown unit code {unit!r}")
        problem = _labels_problem(labels)
        if problem:
            raise invalid(problem)
        help_bytes = (help or "").encode("utf-8")
        if len(help_bytes) > HELP_MAX or b"\0" in help_bytes:
            raise invalid(f"the help text must be at most {HELP_MAX} bytes, without NUL")
        if not isinstance(sample_every, int) or not 1 <= sample_every <= _U32 or (kind != KIND_HISTOGRAM and sample_every != 1):
            raise invalid(f"sample_every {sample_every!r} must be an integer from 1 to 2^32-1 (1 but for histograms)")
        if not isinstance(form, int) or not 0 <= form <= FORM_SIGNED:
            raise invalid(f"unknown value form {form!r}")
        if form == FORM_SIGNED and kind != KIND_HISTOGRAM:
            raise invalid("only a histogram takes signed values (a counter never goes back; a gauge is a double)")
        if not isinstance(scale, int) or not SCALE_MIN <= scale <= SCALE_MAX:
            raise invalid(f"scale {scale!r} is not from {SCALE_MIN} to {SCALE_MAX}")
        if kind == KIND_GAUGE and scale != 0:
            raise invalid("a gauge is a double: it takes no scale")
        if not isinstance(merge, int) or not 0 <= merge < MERGE_POLICIES:
            raise invalid(f"unknown gauge merge policy {merge!r}")
        if kind != KIND_GAUGE and merge != MERGE_LAST:
            raise invalid("only a gauge has a merge policy")
        if merge == MERGE_PER_WORKER and any(line.startswith(b"pid=") for line in labels.split(b"\n")):
            raise invalid("a per-worker gauge is labelled pid by the collector: it cannot have a label named pid")
        with self._lock:
            self._check_usable()
            self._become_worker()  # in a forked child: a worker file of its own first (else raises)
            existing = self._metrics.get((name, labels))
            if existing:
                shown = "{" + labels.decode().replace("\n", ",") + "}" if labels else ""
                if (existing.kind, existing.unit, existing.sample_every) != (kind, unit, sample_every):
                    raise RingError(
                        f"bot {self.name}: metric {name}{shown} is already registered as {_KIND_NAMES[existing.kind]} "
                        f"in {_UNIT_NAMES[existing.unit]} sampled 1 in {existing.sample_every}; asked for "
                        f"{_KIND_NAMES[kind]} in {_UNIT_NAMES[unit]} sampled 1 in {sample_every}")
                if (existing.form, existing.scale) != (form, scale):
                    raise RingError(f"bot {self.name}: metric {name}{shown} is already registered with "
                                    f"{values_phrase(existing.form == FORM_SIGNED, existing.scale)}; asked for "
                                    f"{values_phrase(form == FORM_SIGNED, scale)}")
                if existing.merge != merge:
                    raise RingError(f"bot {self.name}: gauge {name}{shown} is already registered merging its workers by "
                                    f"{merge_phrase(existing.merge)}; asked for {merge_phrase(merge)}")
                if self._header is not None:  # a retired entry registered again is live again (RETIRING A SERIES)
                    at = self._retired_i(existing.index)
                    if self._hi[at] & 1:
                        self._hi[at] = (self._hi[at] + 1) & _U32  # "release": x86-64's plain store
                return existing.index
            index = len(self._entries)
            if index >= self._registry_capacity:
                raise RingError(f"bot {self.name}: metric {name}: the registry is full ({self._registry_capacity} "
                                "metrics); a bot file made with a larger max_metrics holds more")
            metric = _Metric(self.name, index, name, kind, unit, sample_every, labels, merge, form, scale)
            if self._header is not None:
                mm = self._header
                offset = HEADER_SIZE + index * REGISTRY_ENTRY_SIZE
                name_bytes = name.encode("ascii")
                mm[offset:offset + REGISTRY_ENTRY_SIZE] = bytes(REGISTRY_ENTRY_SIZE)
                _ENTRY.pack_into(mm, offset, index, kind, unit, merge, form, sample_every,
                                 len(name_bytes), len(labels), len(help_bytes), scale)
                mm[offset + 0x18:offset + 0x18 + len(name_bytes)] = name_bytes
                mm[offset + 0x80:offset + 0x80 + len(labels)] = labels
                mm[offset + 0x180:offset + 0x180 + len(help_bytes)] = help_bytes
                self._upgrade_for(metric)
                self._publish([metric])
            if sample_every > 1:
                self._countdowns[index] = [1] * max(self._max_lanes, 1)
            self._metrics[(name, labels)] = metric
            self._entries.append(metric)
            return index

    def _retired_i(self, index: int) -> int:
        """Where entry `index`'s `retired` word (0x014) is in the header's I view."""
        return (HEADER_SIZE + index * REGISTRY_ENTRY_SIZE + 0x14) // 4

    def retire(self, index: int) -> None:
        """Retires the series at `index` (RETIRING A SERIES in ringside.h), as ringside_producer.c's
        rs_bot_retire: a gauge's gauge_set stored 0, then the entry's `retired` word made odd.
        Registering it again revives it."""
        with self._lock:
            self._check_usable()
            self._become_worker()
            if self._header is None:
                return  # disabled: nothing is written
            if not isinstance(index, int) or not 0 <= index < len(self._entries):
                raise RingValueError(f"bot {self.name}: retire: metric index {index!r} is not registered "
                                     f"({len(self._entries)} are)")
            at = self._retired_i(index)
            if self._hi[at] & 1:
                return
            if self._entries[index].kind == KIND_GAUGE:
                self._hq[self._cells_q + _CELL_WORDS * index + _CELL_GAUGE_SET] = 0
            self._hi[at] = (self._hi[at] + 1) & _U32  # "release": after gauge_set

    def _upgrade_for(self, metric: _Metric) -> None:
        """Makes the file format 4 just before the first entry format 3 cannot say (signed or scaled
        values) is published, as ringside_producer.c's rsp_upgrade_for_entry: the layout is the
        same, and a reader of format 3 alone then refuses the file rather than misread it."""
        if (metric.form or metric.scale) and self._hi[_I_VERSION] < FORMAT_VERSION:
            self._hi[_I_VERSION] = FORMAT_VERSION  # "release": before metric_count's store

    def handle(self, index: int, kind: int, scale: int, whole_only: bool, convert: Converter,
               encode_exemplar: Encoder | None, steps: tuple[int, int] | None = None) -> _Handle:
        """The calls of metric `index`: observe, start and stop for a histogram (values times
        `scale`, floats rounded; `whole_only` is the converter's business here), inc for a counter, set, inc
        and dec for a gauge. Values the hot path does not take go through `convert`; a histogram's
        exemplars through `encode_exemplar`. `steps`: None, or the (form, scale) of a metric of
        steps, whose values are turned into its entry's steps as the C producer's
        rs_bot_record_value and rs_bot_count_value do."""
        with self._lock:
            self._check_usable()
            metric = self._entries[index]
            metric.convert = convert
            metric.encode_exemplar = encode_exemplar
            metric.steps = steps is not None and kind != KIND_GAUGE
            metric.steps_per_unit = steps_per_unit(metric.scale)
        if metric.steps and kind == KIND_HISTOGRAM:
            return _Handle(observe=self._steps_observe(metric), start=time.monotonic_ns, stop=self._histogram_stop(metric))
        if metric.steps:
            return _Handle(inc=self._steps_increment(metric))
        if kind == KIND_HISTOGRAM:
            return _Handle(observe=self._histogram_observe(metric, scale),
                           start=time.monotonic_ns, stop=self._histogram_stop(metric))
        if kind == KIND_COUNTER:
            return _Handle(inc=self._counter_increment(metric))
        return _Handle(**self._gauge_calls(metric))

    # MARK: Counters of this bot

    def _readable(self) -> bool:
        self._check_usable()
        return self._header is not None and not self._forked

    @property
    def lanes_allocated(self) -> int:
        """Lanes of the bot, as this process mapped them (a thread's first call may add one); not
        the file's count, which any process of the user could write."""
        return len(self._lanes) if self._readable() else 0

    @property
    def metric_count(self) -> int:
        """Registry entries published."""
        return self._hi[_I_METRIC_COUNT] if self._readable() else len(self._entries)

    @property
    def records_written(self) -> int:
        """Records published, summed over the lanes."""
        return sum(lane.q[_LQ_WRITE] for lane in list(self._lanes)) if self._readable() else 0

    @property
    def records_dropped(self) -> int:
        """Records lost, summed over the lanes (full lanes), plus the histogram and gauge records
        of threads that found no lane."""
        if not self._readable():
            return 0
        lost = sum(lane.q[_LQ_DROPPED] for lane in list(self._lanes))
        return lost + sum(self._hq[self._cells_q + _CELL_WORDS * m.index + _CELL_UNLANED]
                          for m in list(self._entries) if m.kind != KIND_COUNTER)

    # MARK: The slow path

    def _slow(self, metric: _Metric, value: Any, sample: bool, raw: bool = True, flags: int = 0,
              exemplar: Any = None) -> bool | None:
        """Every call the hot path does not finish: a thread's first call, a thread without a
        lane, a full lane, a bad value, a closed, disabled or forked bot, an exemplar. `sample`: the
        call has not been through sampling yet; `raw`: the value is the caller's, not yet converted;
        `flags`: the record's RS_FLAG_*; `exemplar`: the caller's, or None. Returns what the
        handle's call returns."""
        if raw:
            value = metric.convert(value)
            if value is None:  # a bad value, counted: nothing to record (BAD VALUES in _values.py)
                return None if metric.kind == KIND_COUNTER else False
        encoded = self._encode_exemplar(metric, exemplar)  # b"" if refused (counted); strict: raises
        self._check_usable()  # closed: RingError, in a forked child too, as the extension's calls
        if self._forked or os.getpid() != self._owner_pid:
            if not self._forked and self._header is not None:
                self._after_fork()  # a fork the at-fork handler did not see
            try:
                self._become_worker()
            except RingError:
                return False  # no worker file: nothing written (said once on stderr)
        if self._header is None:
            return False  # disabled
        kind, index = metric.kind, metric.index
        lane: _Lane | None = self._local.lane if hasattr(self._local, "lane") else self._claim()
        # The operator's control (CONTROL in ringside.h), read once the thread has its lane (a forked
        # child is a worker by now), as the C library reads it, before anything else: off, the call
        # records and counts nothing, a value it cannot hold neither.
        control = self._hi[self._control_i + _CELL_I_WORDS * index]
        if control & CONTROL_STOPS:
            return None if kind == KIND_COUNTER else False  # off: nothing recorded, nothing counted
        if metric.steps:
            value, clamped = _stored(metric, value)
            if clamped:
                with self._lock:  # Python's stand-in for the atomic add: only this process writes the file
                    self._check_usable()
                    at = self._cells_q + _CELL_WORDS * index + _CELL_CLAMPED
                    self._hq[at] = (self._hq[at] + 1) & _U64
            if value is None:
                return None if kind == KIND_COUNTER else False  # a NaN, or a counter's increment below 0
        if control and kind == KIND_HISTOGRAM:
            encoded = b""  # a call under the operator's control is recorded without its exemplar
        if kind == KIND_GAUGE:
            cell = self._cells_q + _CELL_WORDS * index
            self._hd[cell + _CELL_GAUGE_BITS] = value
            self._hq[cell + _CELL_GAUGE_SET] = 1  # "release": after gauge_bits
        if lane is None:
            # No lane: what the thread cannot keep apart goes to the metric's shared cell, under
            # the lock, Python's stand-in for an atomic add.
            unlaned = self._cells_q + _CELL_WORDS * index + _CELL_UNLANED
            with self._lock:
                self._check_usable()
                if kind == KIND_COUNTER:
                    self._hq[unlaned] = (self._hq[unlaned] + value) & _U64
                    return None
                if sample and metric.sample_every > 1:
                    left = self._laneless_countdowns.get(index, 1)
                    self._laneless_countdowns[index] = left - 1 if left > 1 else metric.sample_every
                    if left > 1:
                        return False
                self._hq[unlaned] += 1  # a record dropped: no lane to write it to
                if kind == KIND_HISTOGRAM:  # and its value's sum and largest (DROPPED VALUES in ringside.h)
                    self._hq[unlaned + 1] = (self._hq[unlaned + 1] + value) & _U64
                    self._hq[unlaned + 2] = max(self._hq[unlaned + 2], value)
            return False
        q = lane.q
        if kind == KIND_COUNTER:
            q[_LQ_CELLS + index] = (q[_LQ_CELLS + index] + value) & _U64  # 2^64 wraps, as in C
            lane.i[_LI_CELL_WRITES] = (lane.i[_LI_CELL_WRITES] + 1) & _U32
            if lane.hi[_I_DOORBELL]:  # the collector sleeps (DOORBELL)
                _ring(lane)
            return None
        if sample and metric.sample_every > 1:
            countdowns = self._countdowns[index]
            left = countdowns[lane.index]
            countdowns[lane.index] = left - 1 if left > 1 else metric.sample_every
            if left > 1:
                return False
        if control & CONTROL_SAMPLE and kind == KIND_HISTOGRAM and self._control_samples and self._consumer_reads_weights():
            k = self._control_sample(lane, index, value, min(control & CONTROL_SAMPLE, WEIGHT_LOG2_MAX))
            if k < 0:
                return False  # gathered
            flags |= k << FLAG_WEIGHT_SHIFT
        if encoded:
            return self._write_exemplar(lane, index, value, encoded, flags)
        # The hot path's steps, spelled out (see _histogram_observe).
        state, mask = lane.state, self._mask
        cursor = state[0]
        if cursor - state[1] > mask and cursor - lane.refresh_read() > mask:
            self._drop(lane, index, kind, value)
            return False
        now = time.monotonic_ns()
        offset = self._geometry.lane_records_offset + ((cursor & mask) << 5)
        if kind == KIND_GAUGE:
            _GAUGE_RECORD.pack_into(lane.mv, offset, now, value, cursor, index | KIND_GAUGE << 32)
        else:
            _RECORD.pack_into(lane.mv, offset, now, value, cursor, index | KIND_HISTOGRAM << 32 | flags << 40)
        state[0] = cursor + 1
        q[_LQ_WRITE] = cursor + 1  # "release": publishes the record above
        q[_LQ_HEARTBEAT] = now
        if lane.hi[_I_DOORBELL]:  # the collector sleeps (DOORBELL)
            _ring(lane)
        return True

    def _consumer_reads_weights(self) -> bool:
        """Whether the file's consumer reads gather cells: it stored its pid in both fields."""
        pid = self._hi[_I_CONSUMER_PID]
        return pid != 0 and self._hi[_I_WEIGHTS_READER_PID] == pid

    def _control_sample(self, lane: _Lane, index: int, value: int, n: int) -> int:
        """A histogram's call while the operator samples it 1 in 2^n (CONTROL in ringside.h), as
        the C library's adaptive sampling counts a metric's calls on a lane: the call that makes
        them a power of two and at least 2^n is written, carrying k = log2(calls) (returned; the
        count starts again), and every other one is gathered (returns -1)."""
        calls = lane.calls.get(index, 0) + 1
        if calls < 1 << n or calls & (calls - 1):
            lane.calls[index] = calls
            self._gather(lane, index, value)
            return -1
        lane.calls.pop(index, None)
        return calls.bit_length() - 1

    def _gather(self, lane: _Lane, index: int, value: int) -> None:
        """Gathers a histogram's call (SAMPLING AND GATHERING in ringside.h): its gather cell's
        calls, sum, latest value and largest not yet taken, and the lane's gathered, no record.
        Only the lane's holder writes these but `max`, which the consumer takes by exchanging it
        with 0: a plain load and store serves, as the store (after the load saw a smaller value)
        overwrites either that value or the 0 the consumer left after taking it. The count is
        stored after the value ("release": x86-64, see MEMORY ORDERING)."""
        q = lane.q
        cell = self._gather_q + _GATHER_WORDS * index
        q[cell + _GATHER_SUM] = (q[cell + _GATHER_SUM] + value) & _U64
        q[cell + _GATHER_LATEST] = value
        if value > q[cell + _GATHER_MAX]:
            q[cell + _GATHER_MAX] = value
        q[cell + _GATHER_CALLS] = (q[cell + _GATHER_CALLS] + 1) & _U64
        q[_LQ_GATHERED] = (q[_LQ_GATHERED] + 1) & _U64

    def _drop(self, lane: _Lane, index: int, kind: int, value: int) -> None:
        """A full lane drops a record: counted in the lane and in its cell of the metric, and a
        histogram's value added to its gather cell's dropped sum and largest (DROPPED VALUES in
        ringside.h). Only the lane's holder calls it: its loads and stores are exact."""
        q = lane.q
        q[_LQ_DROPPED] += 1
        q[_LQ_CELLS + index] += 1
        if kind == KIND_HISTOGRAM:
            cell = self._gather_q + _GATHER_WORDS * index
            q[cell + _GATHER_DROPPED_SUM] = (q[cell + _GATHER_DROPPED_SUM] + value) & _U64
            if value > q[cell + _GATHER_DROPPED_MAX]:
                q[cell + _GATHER_DROPPED_MAX] = value

    def _write_exemplar(self, lane: _Lane, index: int, value: int, encoded: bytes, flags: int) -> bool:
        """A histogram's value with its exemplar (EXEMPLARS in ringside.h): the value's record
        flagged RS_FLAG_EXEMPLAR with the exemplar's length, then its checked bytes in 16-byte
        exemplar records, all published by one store of write_cursor; or, in a lane without room
        for all of them, one counted drop (the lane's and its cell of the metric). Only the lane's
        holder calls it, with a value in range."""
        q, state, mask = lane.q, lane.state, self._mask
        extra = (len(encoded) + EXEMPLAR_BYTES_PER_RECORD - 1) // EXEMPLAR_BYTES_PER_RECORD
        cursor = state[0]
        if cursor + extra - state[1] > mask and cursor + extra - lane.refresh_read() > mask:
            self._drop(lane, index, KIND_HISTOGRAM, value)
            return False
        now = time.monotonic_ns()
        mv, base = lane.mv, self._geometry.lane_records_offset
        _RECORD.pack_into(mv, base + ((cursor & mask) << 5), now, value, cursor,
                          index | KIND_HISTOGRAM << 32 | (flags | FLAG_EXEMPLAR) << 40 | len(encoded) << 48)
        tail = index | KIND_EXEMPLAR << 32
        for k in range(1, extra + 1):  # part k: bytes 16(k-1) to 16k, in the slot after the last (the lane may wrap)
            at = (k - 1) * EXEMPLAR_BYTES_PER_RECORD
            _EXEMPLAR_RECORD.pack_into(mv, base + (((cursor + k) & mask) << 5), encoded[at:at + EXEMPLAR_BYTES_PER_RECORD],
                                       cursor + k, tail)
        state[0] = cursor + 1 + extra
        q[_LQ_WRITE] = cursor + 1 + extra  # "release": publishes the records above, all at once
        q[_LQ_HEARTBEAT] = now
        if lane.hi[_I_DOORBELL]:  # the collector sleeps (DOORBELL)
            _ring(lane)
        return True

    def _encode_exemplar(self, metric: _Metric, exemplar: Any) -> bytes:
        """An exemplar's checked bytes: b"" for None, and for one refused (counted by the encoder;
        a strict bot's raises, naming its problem)."""
        if exemplar is None:
            return b""
        if metric.encode_exemplar is None:
            raise TypeError(f"bot {self.name}: metric {metric.name}: only a histogram records an exemplar")
        return metric.encode_exemplar(exemplar) or b""

    def count_refused(self, index: int, exemplar: bool) -> None:
        """Counts a value metric `index` could not take as given (its cell's `clamped`), or an
        exemplar refused (`exemplars_refused`), as the C producer counts them: nothing while the
        metric or the bot is off, or the bot closed (its call then raises) or disabled."""
        if self._closed:
            return
        if self._forked or os.getpid() != self._owner_pid:  # as _slow: a forked child counts in its own file
            if not self._forked and self._header is not None:
                self._after_fork()
            try:
                self._become_worker()
            except RingError:
                return
        with self._lock:  # Python's stand-in for the atomic add: only this process writes the file
            if self._closed or self._header is None or not 0 <= index < len(self._entries):
                return
            if self._hi[self._control_i + _CELL_I_WORDS * index] & CONTROL_STOPS:
                return
            at = self._cells_q + _CELL_WORDS * index + (_CELL_EXEMPLARS_REFUSED if exemplar else _CELL_CLAMPED)
            self._hq[at] = (self._hq[at] + 1) & _U64

    # MARK: The hot paths

    # Each handle's call is a closure over the bot's constants, so a call costs one Python call (and
    # the record's write is spelled out in each closure: a shared function would be a second call).
    # It finishes the common case (a thread holding a lane with room, an exact int or float) and
    # leaves every other case to _slow: any exception on the way (no lane yet: AttributeError; a
    # closed lane or a bad value: TypeError, ValueError, OverflowError, struct.error) lands there
    # too, with the caller's value, and _slow says what went wrong. The clock is CLOCK_MONOTONIC
    # rather than the format's CLOCK_MONOTONIC_COARSE: the same origin, and from Python the
    # cheaper call (clock_gettime_ns(id) parses its argument).

    def _inert(self, metric: _Metric) -> Callable[..., bool | None]:
        """A disabled bot's call: converts (so checks) its argument, and a histogram's exemplar,
        writes nothing."""
        if metric.kind == KIND_HISTOGRAM:
            def observe(value: Any, exemplar: Any = None) -> bool:
                self._check_usable()
                metric.convert(value)
                self._encode_exemplar(metric, exemplar)
                return False
            return observe

        def call(value: Any = 1) -> bool | None:
            self._check_usable()
            metric.convert(value)
            return False if metric.kind != KIND_COUNTER else None
        return call

    def _histogram_observe(self, metric: _Metric, scale: int) -> Callable[..., bool | None]:
        if self._header is None:
            return self._inert(metric)
        local, mask, slow, clock, pack = self._local, self._mask, self._slow, time.monotonic_ns, _RECORD.pack_into
        base = self._geometry.lane_records_offset
        tail = metric.index | KIND_HISTOGRAM << 32  # metric, kind, flags 0, reserved 0: one word
        write_at, heartbeat_at = _LQ_WRITE, _LQ_HEARTBEAT
        ring, bell_at = _ring, _I_DOORBELL
        float_scale = float(scale)
        encode, write_exemplar, index = self._encode_exemplar, self._write_exemplar, metric.index
        control_at = self._control_i + _CELL_I_WORDS * index  # nonzero: the operator's control, the slow way

        def observe_exemplar(value: Any, exemplar: Any) -> bool | None:
            # A value with an exemplar: an int (times the unit's scale), or a float in s, ms or us,
            # then the exemplar, checked; anything else, and a thread's first call, the slow way.
            kind = value.__class__
            try:
                stored = value * scale if kind is int else round(value * float_scale) if kind is float and scale != 1 else -1
            except (OverflowError, ValueError):  # an infinite or NaN float
                stored = -1
            if not 0 <= stored <= _U64:
                return slow(metric, value, False, exemplar=exemplar)  # the converter says why
            encoded = encode(metric, exemplar)
            try:
                lane = local.lane
            except AttributeError:
                lane = None
            if not encoded:  # refused and counted: the value without it
                return slow(metric, stored, False, raw=False)
            if lane is None or lane.state is None or lane.hi[control_at]:  # no lane yet, or none; a closed or
                return slow(metric, stored, False, raw=False, exemplar=exemplar)  # forked bot; a control
            return write_exemplar(lane, index, stored, encoded, 0)

        def observe(value: Any, exemplar: Any = None) -> bool | None:
            # Nanoseconds, bytes or none: an int is stored as it is; a float goes to the converter.
            if exemplar is not None:
                return observe_exemplar(value, exemplar)
            try:
                lane = local.lane
                state = lane.state
                cursor = state[0]
                if not lane.hi[control_at] and (cursor - state[1] <= mask or cursor - lane.refresh_read() <= mask):
                    now = clock()
                    pack(lane.mv, base + ((cursor & mask) << 5), now, value, cursor, tail)  # 32-byte records
                    state[0] = cursor + 1
                    q = lane.q
                    q[write_at] = cursor + 1  # "release" (x86-64 TSO): publishes the record above
                    q[heartbeat_at] = now
                    if lane.hi[bell_at]:  # the collector sleeps (DOORBELL): cold
                        ring(lane)
                    return True
            except Exception:
                pass
            return slow(metric, value, False)

        def observe_scaled(value: Any, exemplar: Any = None) -> bool | None:
            # Seconds, milliseconds or microseconds: stored as nanoseconds.
            if exemplar is not None:
                return observe_exemplar(value, exemplar)
            try:
                kind = value.__class__
                if kind is float:
                    stored = round(value * float_scale)
                elif kind is int:
                    stored = value * scale
                else:
                    raise TypeError  # the converter says why (never `value * scale`: a list would repeat)
                lane = local.lane
                state = lane.state
                cursor = state[0]
                if not lane.hi[control_at] and (cursor - state[1] <= mask or cursor - lane.refresh_read() <= mask):
                    now = clock()
                    pack(lane.mv, base + ((cursor & mask) << 5), now, stored, cursor, tail)
                    state[0] = cursor + 1
                    q = lane.q
                    q[write_at] = cursor + 1  # "release": publishes the record above
                    q[heartbeat_at] = now
                    if lane.hi[bell_at]:  # the collector sleeps (DOORBELL): cold
                        ring(lane)
                    return True
            except Exception:
                pass
            return slow(metric, value, False)

        if scale != 1:
            observe = observe_scaled
        every = metric.sample_every
        if every == 1:
            return observe
        countdowns = self._countdowns[metric.index]  # per lane, as the C library keeps them
        write = observe

        def sampled(value: Any, exemplar: Any = None) -> bool | None:
            if exemplar is not None:
                return slow(metric, value, True, exemplar=exemplar)  # samples, as it writes the exemplar
            try:
                lane = local.lane
                n = lane.index
                left = countdowns[n]
                controlled = lane.hi[control_at]
            except Exception:
                return slow(metric, value, True)  # no lane yet, or none; a closed or forked bot
            if controlled:
                return slow(metric, value, True)  # the operator's control: before the sampling
            if left > 1:
                countdowns[n] = left - 1
                if not ((value.__class__ is int or value.__class__ is float) and value >= 0):
                    metric.convert(value)  # a skipped call refuses a bad value too
                return False
            countdowns[n] = every
            return write(value)
        return sampled

    def _steps_observe(self, metric: _Metric) -> Callable[..., bool | None]:
        """observe(value, exemplar=None) of a histogram of steps (VALUES in _values.py): an int or
        float in range is turned into steps here and written as _histogram_observe's observe
        writes; anything else (a value to clamp, a NaN, an exemplar, a sampled histogram, a
        thread's first call) the slow way, which counts what it clamps."""
        if self._header is None:
            return self._inert(metric)
        local, mask, slow, clock, pack = self._local, self._mask, self._slow, time.monotonic_ns, _RECORD.pack_into
        base = self._geometry.lane_records_offset
        tail = metric.index | KIND_HISTOGRAM << 32
        write_at, heartbeat_at = _LQ_WRITE, _LQ_HEARTBEAT
        ring, bell_at = _ring, _I_DOORBELL
        signed, per_unit = metric.form == FORM_SIGNED, metric.steps_per_unit
        multiplier = POWERS_OF_TEN[-metric.scale] if metric.scale <= 0 else 0  # an int's steps, exactly (0: the converter's)
        low, high, bias = (-I64_MAX, I64_MAX, OFFSET_BINARY_BIAS) if signed else (0, _U64, 0)
        control_at = self._control_i + _CELL_I_WORDS * metric.index
        if metric.sample_every > 1:
            def sampled(value: Any, exemplar: Any = None) -> bool | None:
                return slow(metric, value, True, exemplar=exemplar)  # converts and counts, then samples, as C
            return sampled

        def observe(value: Any, exemplar: Any = None) -> bool | None:
            if exemplar is None:
                try:
                    kind = value.__class__
                    stored = -1
                    if kind is float:
                        steps = value * per_unit
                        # rs_bot_record_value's bounds: a NaN fails both, and goes the slow way
                        if (-_TWO_63 < steps < _TWO_63) if signed else (0.0 <= steps < _TWO_64):
                            stored = round(steps) + bias  # to the nearest, ties to even: C's rint
                    elif kind is int and multiplier:
                        steps = value * multiplier
                        if low <= steps <= high:
                            stored = steps + bias
                    if stored >= 0:
                        lane = local.lane
                        state = lane.state
                        cursor = state[0]
                        if not lane.hi[control_at] and (cursor - state[1] <= mask or cursor - lane.refresh_read() <= mask):
                            now = clock()
                            pack(lane.mv, base + ((cursor & mask) << 5), now, stored, cursor, tail)
                            state[0] = cursor + 1
                            q = lane.q
                            q[write_at] = cursor + 1  # "release": publishes the record above
                            q[heartbeat_at] = now
                            if lane.hi[bell_at]:  # the collector sleeps (DOORBELL): cold
                                ring(lane)
                            return True
                except Exception:
                    pass
            return slow(metric, value, False, exemplar=exemplar)
        return observe

    def _steps_increment(self, metric: _Metric) -> Callable[..., bool | None]:
        """inc(by=1) of a counter of steps (VALUES in _values.py): an int or float in range added
        to the lane's cell here, as _counter_increment's inc adds; anything else the slow way."""
        if self._header is None:
            return self._inert(metric)
        local, slow, at = self._local, self._slow, _LQ_CELLS + metric.index
        ring, bell_at = _ring, _I_DOORBELL
        control_at = self._control_i + _CELL_I_WORDS * metric.index
        per_unit = metric.steps_per_unit
        multiplier = POWERS_OF_TEN[-metric.scale] if metric.scale <= 0 else 0

        def inc(by: Any = 1) -> None:
            try:
                kind = by.__class__
                stored = -1
                if kind is float:
                    steps = by * per_unit
                    if 0.0 <= steps < _TWO_64:  # rs_bot_count_value's bounds
                        stored = round(steps)
                elif kind is int and multiplier and by >= 0:
                    stored = by * multiplier
                if stored >= 0:
                    lane = local.lane
                    if not lane.hi[control_at]:
                        lane.q[at] += stored  # past 2^64 it raises, and the slow way wraps it, as C
                        words = lane.i
                        words[_LI_CELL_WRITES] = (words[_LI_CELL_WRITES] + 1) & _U32
                        if lane.hi[bell_at]:  # the collector sleeps (DOORBELL): cold
                            ring(lane)
                        return
            except Exception:
                pass
            slow(metric, by, False)
        return inc

    def _histogram_stop(self, metric: _Metric) -> Callable[..., bool | None]:
        """stop(start, exemplar=None): the time since `start` (a time.monotonic_ns() reading, as
        start() gives), in nanoseconds, recorded as a span stamped with its end, with an exemplar
        if given."""
        if self._header is None:
            def inert_stop(start: int, exemplar: Any = None) -> bool:
                self._check_usable()
                self._encode_exemplar(metric, exemplar)
                return False
            return inert_stop
        slow = self._slow

        def stop(start: int, exemplar: Any = None) -> bool | None:
            if start.__class__ is not int:
                raise TypeError(f"bot {self.name}: metric {metric.name}: stop() takes the token start() returned, not {start!r}")
            elapsed = time.monotonic_ns() - start
            return slow(metric, elapsed if elapsed > 0 else 0, True, raw=False, flags=FLAG_SPAN, exemplar=exemplar)
        return stop

    def _counter_increment(self, metric: _Metric) -> Callable[..., bool | None]:
        if self._header is None:
            return self._inert(metric)
        local, slow, at = self._local, self._slow, _LQ_CELLS + metric.index
        ring, bell_at = _ring, _I_DOORBELL
        control_at = self._control_i + _CELL_I_WORDS * metric.index

        def inc(by: Any = 1) -> None:
            try:
                if by >= 0:  # a float fails the store below, and goes to the converter
                    lane = local.lane
                    if not lane.hi[control_at]:  # nonzero: the operator's control, the slow way
                        lane.q[at] += by  # the lane's cell: only its holder writes it, so load + store is exact
                        words = lane.i
                        words[_LI_CELL_WRITES] = (words[_LI_CELL_WRITES] + 1) & _U32  # then the word readers watch
                        if lane.hi[bell_at]:  # the collector sleeps (DOORBELL): cold
                            ring(lane)
                        return
            except Exception:
                pass
            slow(metric, by, False)
        return inc

    def _gauge_calls(self, metric: _Metric) -> dict[str, Callable[..., bool | None]]:
        """set, inc and dec of a gauge: inc and dec add to the value this process last set (0 in a
        forked child, as in any new process), under the bot's gauge lock (two threads' increments
        both count)."""
        if self._header is None:
            inert = self._inert(metric)
            return {"set": inert, "inc": inert, "dec": inert}
        local, mask, slow, clock, pack = self._local, self._mask, self._slow, time.monotonic_ns, _GAUGE_RECORD.pack_into
        base = self._geometry.lane_records_offset
        tail = metric.index | KIND_GAUGE << 32
        bits_at = self._cells_q + _CELL_WORDS * metric.index + _CELL_GAUGE_BITS
        set_at = self._cells_q + _CELL_WORDS * metric.index + _CELL_GAUGE_SET
        control_at = self._control_i + _CELL_I_WORDS * metric.index
        write_at, heartbeat_at = _LQ_WRITE, _LQ_HEARTBEAT
        ring, bell_at = _ring, _I_DOORBELL
        current = [0.0]
        self._gauge_values.append(current)  # set to 0 in a forked child

        def set(value: Any) -> bool | None:
            try:
                lane = local.lane
                if not lane.hi[control_at]:  # nonzero: the operator's control, the slow way
                    # The metric's shared cell, in the lane's file: any thread may set it, the last store wins.
                    lane.hd[bits_at] = value  # a float; anything else raises, and goes to the converter
                    current[0] = value
                    lane.hq[set_at] = 1  # "release": after gauge_bits
                    state = lane.state
                    cursor = state[0]
                    if cursor - state[1] <= mask or cursor - lane.refresh_read() <= mask:
                        now = clock()
                        pack(lane.mv, base + ((cursor & mask) << 5), now, value, cursor, tail)
                        state[0] = cursor + 1
                        q = lane.q
                        q[write_at] = cursor + 1  # "release": publishes the record above
                        q[heartbeat_at] = now
                        if lane.hi[bell_at]:  # the collector sleeps (DOORBELL): cold
                            ring(lane)
                        return True
            except Exception:
                pass
            value = metric.convert(value)
            if value is None:  # not a number, counted: the gauge keeps its value
                return False
            current[0] = value
            return slow(metric, value, False, raw=False)

        def inc(amount: Any = 1) -> None:
            amount = amount if amount.__class__ is float else metric.convert(amount)
            if amount is None:
                return
            with self._gauge_lock:
                current[0] += amount
                set(current[0])

        def dec(amount: Any = 1) -> None:
            amount = amount if amount.__class__ is float else metric.convert(amount)
            if amount is None:
                return
            with self._gauge_lock:
                current[0] -= amount
                set(current[0])
        return {"set": set, "inc": inc, "dec": dec}


_TWO_63, _TWO_64 = 9223372036854775808.0, 18446744073709551616.0  # 2^63 and 2^64, exact doubles


def _stored(metric: _Metric, value: float) -> tuple[int | None, bool]:
    """A converted value of a metric of steps (an int: its exact steps in range; a float: in its
    unit) as the record or cell stores it (a signed one in offset binary), or None when nothing is
    recorded (a NaN, or a counter's increment below 0), and whether it was clamped or not recorded
    (counted in `clamped`): rs_bot_record_value's and rs_bot_count_value's arithmetic, and their
    cold parts', rs_bot_record_unrepresentable and rs_bot_count_unrepresentable."""
    signed = metric.form == FORM_SIGNED
    if value.__class__ is int:
        return (value + OFFSET_BINARY_BIAS if signed else value), False
    steps = value * metric.steps_per_unit
    if signed:
        if -_TWO_63 < steps < _TWO_63:
            return round(steps) + OFFSET_BINARY_BIAS, False
        if value != value:
            return None, True
        return (OFFSET_BINARY_BIAS - I64_MAX if value < 0 else OFFSET_BINARY_BIAS + I64_MAX), True
    if 0.0 <= steps < _TWO_64:
        return round(steps), False
    if metric.kind == KIND_COUNTER:
        return (_U64 if value > 0 else None), True  # a NaN or below 0 adds nothing; past the end, 2^64-1 steps
    if value != value:
        return None, True
    return (0 if value < 0 else _U64), True


class _Handle:
    """One metric's calls, as ringside's metric classes take them from either backend."""
    __slots__ = ("observe", "start", "stop", "inc", "dec", "set")

    def __init__(self, **calls: Callable[..., Any]) -> None:
        for name, call in calls.items():
            setattr(self, name, call)
