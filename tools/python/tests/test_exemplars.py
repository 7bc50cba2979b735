"""Exemplars and thread names from Python (issue 26), on both backends: observe(value, exemplar=...)
and the timer's, read back from the bot's file as the format lays them out and end to end through
the collector's /latest (labels, pid, thread id and the Python thread's name); refused exemplars
raise and write nothing; a full lane drops a value and its exemplar together, one counted drop."""

import os
import random
import threading
from collections.abc import Mapping

import pytest

import ringside
from conftest import BotFile, Collector, _collector_path, _ringside, missing, run_python
from ringside import _exemplars

ORDER = {"order_id": "A17", "venue": "XNAS"}
SPAN, EXEMPLAR = 0x01, 0x02  # RS_FLAG_SPAN, RS_FLAG_EXEMPLAR


def attach(backend, ring_dir, name, **options):
    return ringside.Bot(name, ring_dir, _backend=backend, **options)


def backend_expression(backend):
    """The backend, as code for a script run by run_python."""
    name = "_ringside" if backend is _ringside else "_pure"
    return f"__import__('ringside.{name}').{name}"


def bucket_exemplars(collector, ring, metric):
    """The series' bucket exemplars (each native bucket's latest, kept whatever the time), or None."""
    series = collector.series(ring, metric)
    return series.get("bucket_exemplars") if series else None


class Held(threading.Thread):
    """A named thread that runs `work` (given its thread), then stays alive until release(): its
    lane stays its own, with its id and name, while the collector reads the records."""

    def __init__(self, name, work):
        super().__init__(name=name, daemon=True)
        self.work, self.done, self.native_id_seen, self.error = work, threading.Event(), None, None
        self._release = threading.Event()

    def run(self):
        try:
            self.native_id_seen = threading.get_native_id()
            self.work(self)
        except BaseException as error:  # the test says what failed
            self.error = error
        finally:
            self.done.set()
        self._release.wait(60)

    def release(self):
        self._release.set()
        self.join(60)


@pytest.fixture
def start_collector(ring_dir):
    """Starts the collector on the test's ring directory when the test is ready for it (after it
    filled a lane, say); every one started is stopped at the end."""
    binary = _collector_path()
    if binary is None:
        missing("ringside-collector is not built: run `swift build` or set RINGSIDE_COLLECTOR")
    started = []

    def start():
        started.append(Collector(binary, ring_dir))
        return started[-1]
    yield start
    for running in started:
        running.stop()


# MARK: - End to end

def test_an_exemplar_reaches_the_collector_with_its_labels_pid_and_the_python_threads_name(backend, ring_dir, collector):
    bot = attach(backend, ring_dir, "ex")
    fill = bot.histogram("fill", unit="s")
    thread = Held("order-router", lambda _: fill.observe(0.0012, exemplar=ORDER))
    thread.start()
    try:
        assert thread.done.wait(30) and thread.error is None, thread.error
        want = {"value": 1_200_000, "labels": ORDER, "pid": os.getpid(), "thread_id": thread.native_id_seen,
                "thread_name": "order-router"}

        def seen():
            series = collector.series("ex", "fill")
            if not series or "bucket_exemplars" not in series:
                return None
            windowed = [exemplar for window in series["windows"].values() for exemplar in window.get("exemplars", [])]
            return series, windowed
        series, windowed = collector.wait_for("the exemplar in /latest", seen)
        shown = [{key: exemplar[key] for key in want} for exemplar in series["bucket_exemplars"]]
        assert shown == [want]
        assert series["total_count"] == 1 and series["total_sum"] == 1_200_000
        # The windows' largest: the same exemplar, in every window that holds it.
        assert windowed and all({key: exemplar[key] for key in want} == want for exemplar in windowed)
        # In the labels' order, as given.
        assert list(series["bucket_exemplars"][0]["labels"]) == ["order_id", "venue"]
    finally:
        thread.release()
        bot.close()


def test_exemplars_from_several_threads_each_carry_their_threads_id_and_name(backend, ring_dir, collector):
    bot = attach(backend, ring_dir, "threads")
    fill = bot.histogram("fill", unit="ns")
    names = [f"router-{n}" for n in range(4)]
    # Values 4 times apart: each in a native bucket of its own, whose latest exemplar the collector keeps.
    threads = [Held(name, lambda thread, n=n: fill.observe(1_000_000 * 4 ** n, exemplar={"router": thread.name}))
               for n, name in enumerate(names)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            assert thread.done.wait(30) and thread.error is None, thread.error
        exemplars = collector.wait_for("every thread's exemplar", lambda: (
            (found := bucket_exemplars(collector, "threads", "fill")) and len(found) == 4 and found))
        by_value = {exemplar["value"]: exemplar for exemplar in exemplars}
        for n, thread in enumerate(threads):
            exemplar = by_value[1_000_000 * 4 ** n]
            assert exemplar["labels"] == {"router": thread.name}
            assert (exemplar["thread_name"], exemplar["thread_id"], exemplar["pid"]) == (
                thread.name, thread.native_id_seen, os.getpid())
        assert len({exemplar["thread_id"] for exemplar in exemplars}) == 4
    finally:
        for thread in threads:
            thread.release()
        bot.close()


def test_a_full_lane_drops_a_value_and_its_exemplar_together_and_counts_one_drop(backend, ring_dir, start_collector):
    bot = attach(backend, ring_dir, "full", lane_capacity=16)
    sizes = bot.histogram("sizes", unit="bytes")
    for value in range(1, 15):
        assert sizes.observe(value)
    assert (bot.records_written, bot.records_dropped) == (14, 0)
    # Two slots left: a value with an exemplar of 17 to 32 bytes takes three. Dropped whole.
    long_one = {"order_id": "A17-0123456789"}  # 23 bytes: two exemplar records
    assert sizes.observe(15, exemplar=long_one) is False
    assert (bot.records_written, bot.records_dropped) == (14, 1)
    # A value with an exemplar of at most 16 bytes takes two: it fits.
    assert sizes.observe(16, exemplar={"order_id": "B2"})
    assert (bot.records_written, bot.records_dropped) == (16, 1)
    on_disk = BotFile(bot.path)
    assert on_disk.values("sizes") == [*range(1, 15), 16]
    assert on_disk.exemplars("sizes") == [(16, EXEMPLAR, "order_id=B2")]

    collector = start_collector()
    series = collector.wait_for("the lane drained", lambda: (
        (found := collector.series("full", "sizes")) and found["total_count"] == 15 and found))
    assert series["dropped_records"] == 1 and series["total_sum"] == sum(range(1, 15)) + 16
    assert [(exemplar["value"], exemplar["labels"]) for exemplar in series["bucket_exemplars"]] == [
        (16, {"order_id": "B2"})]
    ring = [ring for ring in collector.latest()["rings"] if ring["name"] == "full"]
    assert ring and ring[0]["dropped_total"] == 1 and ring[0]["records_total"] == 16
    bot.close()


def test_an_exemplar_from_a_forked_worker_carries_the_workers_pid(backend, ring_dir, collector):
    script = f"""
import os, ringside
bot = ringside.Bot("forked", {ring_dir!r}, _backend={backend_expression(backend)})
fill = bot.histogram("fill", unit="ns")
fill.observe(1)  # the parent's lane, in the bot's file
pid = os.fork()
if pid == 0:
    fill.observe(2_000_000, exemplar={{"order_id": "C3"}})  # makes the child a worker: its own file
    os._exit(0)
os.waitpid(pid, 0)
print(pid, flush=True)
bot.close()
"""
    result = run_python(script)
    assert result.returncode == 0, result.stderr
    child = int(result.stdout.split()[0])
    exemplars = collector.wait_for("the child's exemplar", lambda: bucket_exemplars(collector, "forked", "fill"))
    assert [(exemplar["value"], exemplar["labels"], exemplar["pid"], exemplar["thread_name"]) for exemplar in exemplars] == [
        (2_000_000, {"order_id": "C3"}, child, "MainThread")]


# MARK: - The records, as the format lays them out

def test_an_exemplars_bytes_follow_its_value_in_16_byte_records(backend, ring_dir):
    bot = attach(backend, ring_dir, "layout")
    fill = bot.histogram("fill", unit="us")
    exactly_64 = {"k": "x" * 62}  # "k=" and 62 bytes: the most an exemplar takes, in four records
    assert fill.observe(3, exemplar={"order_id": "A17"})  # 12 bytes: one record
    assert fill.observe(4, exemplar=ORDER)  # 27 bytes: two
    assert fill.observe(5, exemplar=exactly_64)
    assert fill.observe(6, {"city": "Zürich"})  # positional; 12 bytes of UTF-8 (ü takes two)
    assert fill.observe(7, exemplar=None)  # none
    assert fill.observe(8, exemplar={"q": "a=b", "empty": ""})  # "=" in a value, an empty value: as C takes them
    assert bot.records_written == 2 + 3 + 5 + 2 + 1 + 2
    assert BotFile(bot.path).exemplars("fill") == [
        (3_000, EXEMPLAR, "order_id=A17"), (4_000, EXEMPLAR, "order_id=A17\nvenue=XNAS"),
        (5_000, EXEMPLAR, "k=" + "x" * 62), (6_000, EXEMPLAR, "city=Zürich"), (8_000, EXEMPLAR, "q=a=b\nempty=")]
    assert BotFile(bot.path).values("fill") == [3_000, 4_000, 5_000, 6_000, 7_000, 8_000]
    bot.close()


def test_a_timed_span_records_its_exemplar_flagged_as_a_span(backend, ring_dir):
    bot = attach(backend, ring_dir, "spans")
    latency = bot.histogram("latency", unit="s")
    token = latency.start()
    assert latency.stop(token, exemplar={"order_id": "S1"})
    assert latency.stop(latency.start(), {"order_id": "S2"})
    with latency.time(exemplar={"order_id": "S3"}):
        pass
    with latency.time() as timer:
        timer.exemplar = {"order_id": "S4"}  # known inside the block

    @latency.time(exemplar={"handler": "send"})
    def send():
        return "sent"
    assert send() == "sent"
    with latency.time():
        pass  # none
    recorded = BotFile(bot.path).exemplars("latency")
    assert [(flags, text) for _, flags, text in recorded] == [
        (SPAN | EXEMPLAR, "order_id=S1"), (SPAN | EXEMPLAR, "order_id=S2"), (SPAN | EXEMPLAR, "order_id=S3"),
        (SPAN | EXEMPLAR, "order_id=S4"), (SPAN | EXEMPLAR, "handler=send")]
    assert len(BotFile(bot.path).values("latency")) == 6
    bot.close()


# MARK: - Refused exemplars

TOO_LONG = {"order_id": "x" * 56}  # 65 bytes
REFUSED = [
    (TOO_LONG, ValueError, "takes 65 bytes"),
    ({"a": "b", "c": "x" * 59}, ValueError, "takes 65 bytes"),  # the newline between pairs counts
    ({"k": "é" * 32}, ValueError, "takes 66 bytes"),  # bytes of UTF-8, not characters
    ({}, ValueError, "at least one label"),
    ({"order-id": "A17"}, ValueError, "label name 'order-id' must match"),
    ({"": "A17"}, ValueError, "label name '' must match"),
    ({"1st": "A17"}, ValueError, "label name '1st' must match"),
    ({"a=b": "c"}, ValueError, "label name 'a=b' must match"),
    ({"a\nb": "c"}, ValueError, "must match"),
    ({"é": "c"}, ValueError, "must match"),
    ({"order_id": "A17\nvenue=XNAS"}, ValueError, "holds a newline or NUL"),  # never read as two pairs
    ({"order_id": "A17\0"}, ValueError, "holds a newline or NUL"),
    ({"order_id": "\ud800"}, ValueError, "lone surrogate"),
    ({"order_id": 17}, TypeError, "the value of 'order_id' is int, not str"),
    ({"order_id": b"A17"}, TypeError, "is bytes, not str"),
    ({17: "A17"}, TypeError, "label name 17 is int, not str"),
    ("order_id=A17", TypeError, "(str) is not a mapping"),
    ([("order_id", "A17")], TypeError, "(list) is not a mapping"),
]


@pytest.mark.parametrize("exemplar, error, reason", REFUSED, ids=[repr(case[0])[:40] for case in REFUSED])
def test_a_refused_exemplar_raises_naming_the_problem_and_writes_nothing(backend, ring_dir, exemplar, error, reason):
    bot = attach(backend, ring_dir, "refused", strict=True)
    fill = bot.histogram("fill", unit="s")
    assert fill.observe(0.001)  # the thread's lane, claimed
    for call in (lambda: fill.observe(0.002, exemplar=exemplar), lambda: fill.observe(0.002, exemplar),
                 lambda: fill.stop(fill.start(), exemplar=exemplar)):
        with pytest.raises(error) as raised:
            call()
        assert isinstance(raised.value, ringside.RingError)
        message = str(raised.value)
        assert message.startswith("bot refused: metric fill: exemplar ") and reason in message, message
        assert (bot.records_written, bot.records_dropped) == (1, 0)
    assert BotFile(bot.path).values("fill") == [1_000_000]
    bot.close()


def test_the_timer_refuses_a_bad_exemplar_as_it_records_writing_nothing(backend, ring_dir):
    bot = attach(backend, ring_dir, "timer", strict=True)
    latency = bot.histogram("latency", unit="s")
    with pytest.raises(ValueError, match="takes 65 bytes"):
        with latency.time(exemplar=TOO_LONG):
            pass
    with pytest.raises(TypeError, match="is not a mapping"):
        with latency.time() as timer:
            timer.exemplar = "order_id=A17"
    assert bot.records_written == 0
    bot.close()


def test_a_bad_exemplar_is_refused_on_a_sampled_skipped_call_and_a_disabled_bot(backend, ring_dir, monkeypatch):
    bot = attach(backend, ring_dir, "sampled", strict=True)
    sampled = bot.histogram("sampled", unit="ns", sample_every=2)
    assert sampled.observe(1, exemplar={"n": "1"})  # the first of two is written
    with pytest.raises(ValueError, match="takes 65 bytes"):
        sampled.observe(2, exemplar=TOO_LONG)  # the second would be skipped: refused all the same
    assert sampled.observe(3, exemplar={"n": "3"}) is False  # skipped
    assert sampled.observe(4, exemplar={"n": "4"})
    assert [text for _, _, text in BotFile(bot.path).exemplars("sampled")] == ["n=1", "n=4"]
    bot.close()
    monkeypatch.setenv("RINGSIDE_DISABLED", "1")
    disabled = attach(backend, ring_dir, "disabled", strict=True)
    fill = disabled.histogram("fill", unit="s")
    assert fill.observe(0.001, exemplar=ORDER) is False
    with pytest.raises(ValueError, match="at least one label"):
        fill.observe(0.001, exemplar={})
    with pytest.raises(TypeError, match="not str"):
        fill.stop(fill.start(), exemplar={"a": 1})
    disabled.close()


def test_observe_with_an_exemplar_after_close_raises(backend, ring_dir):
    bot = attach(backend, ring_dir, "closed")
    fill = bot.histogram("fill", unit="s")
    bot.close()
    with pytest.raises(ringside.RingError, match="closed"):
        fill.observe(0.001, exemplar=ORDER)


def test_observe_takes_one_value_and_one_exemplar(backend, ring_dir):
    bot = attach(backend, ring_dir, "arguments")
    fill = bot.histogram("fill", unit="s")
    with pytest.raises(TypeError):
        fill.observe(0.001, ORDER, ORDER)
    with pytest.raises(TypeError):
        fill.observe(0.001, ORDER, exemplar=ORDER)
    with pytest.raises(TypeError):
        fill.observe(0.001, exemplars=ORDER)
    with pytest.raises(TypeError):
        fill.observe()
    assert bot.records_written == 0
    bot.close()


# MARK: - Thread names

def test_a_lane_carries_its_python_threads_name_cut_to_32_bytes_at_a_character(backend, ring_dir):
    bot = attach(backend, ring_dir, "names")
    orders = bot.counter("orders")
    orders.inc()  # this thread's lane: lane 0
    names = ["Ω" * 20, "x" * 31 + "é", "a\0b", "pool-worker_3"]
    threads = [Held(name, lambda _: orders.inc()) for name in names]
    for thread in threads:  # all alive at once: a lane each, in order
        thread.start()
        assert thread.done.wait(30) and thread.error is None, thread.error
    try:
        assert BotFile(bot.path).thread_names == [threading.current_thread().name, "Ω" * 16, "x" * 31, "a",
                                                  "pool-worker_3"]
    finally:
        for thread in threads:
            thread.release()
    bot.close()


def test_a_thread_renamed_after_its_first_record_keeps_its_lanes_name(backend, ring_dir):
    bot = attach(backend, ring_dir, "renamed")
    fill = bot.histogram("fill", unit="ns")

    def work(thread):
        fill.observe(1)
        thread.name = "renamed"
        fill.observe(2, exemplar={"order_id": "R1"})
    thread = Held("first-name", work)
    thread.start()
    try:
        assert thread.done.wait(30) and thread.error is None, thread.error
        assert BotFile(bot.path).thread_names == ["first-name"]
    finally:
        thread.release()
    bot.close()


# MARK: - The rules, those of rs_exemplar_check

CHECKED = [b"", b"a=b", b"a=", b"=b", b"a", b"a=b\n", b"a=b\nc=d", b"a=b\na=c", b"a=b\n\nc=d", b"a=b=c", b"_a1=x",
           b"1a=x", b"a-b=x", b"a\0=x", b"a=x\0", b"a=\xc3\xa9", b"\xc3\xa9=x", b"a=b\nc", b"a=b\n=c", b"a b=c",
           b"k=" + b"x" * 62, b"k=" + b"x" * 63, b"a=1\nb=2\nc=3\nd=4\ne=5\nf=6\ng=7\nh=8\ni=9\nj=10\nk=11\nl=12\nm=13",
           b"a=\n", b"\n", b"=", b"a==", b"ab=1\nab=2", b"ab=1\nabc=2"]


def test_the_pure_check_is_rs_exemplar_check_byte_for_byte():
    if _ringside is None:
        missing("the C extension ringside._ringside is not built")
    rng = random.Random(26)
    alphabet = b"ab_9=\n\0\xc3"
    fuzzed = [bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 70))) for _ in range(5000)]
    for data in CHECKED + fuzzed:
        assert _exemplars.problem(data) == _ringside.exemplar_check(data), data
    assert sum(_ringside.exemplar_check(data) is None for data in fuzzed) > 20  # the fuzz reaches valid ones too


def test_the_extensions_one_pass_over_a_dict_takes_and_refuses_what_the_encoder_does(ring_dir):
    """The C extension encodes and checks a dict in one pass, without calling rs_exemplar_check:
    on fuzzed dicts it takes exactly those the Python encoder takes and stores the same bytes."""
    if _ringside is None:
        missing("the C extension ringside._ringside is not built")
    rng = random.Random(2026)
    texts = ["a", "_", "a1", "1a", "a-b", "a=b", "a\nb", "", "\0", "é", "\ud800", "x" * 30, "Z_9", "order_id", "A17"]
    dicts = [{rng.choice(texts) + rng.choice(texts): rng.choice(texts) + rng.choice(texts)
              for _ in range(rng.randrange(1, 4))} for _ in range(3000)]
    encode = _exemplars.encoder("fuzz", "fill")
    bot = attach(_ringside, ring_dir, "fuzz", lane_capacity=65536, strict=True)
    fill = bot.histogram("fill", unit="ns")
    expected = []
    for value, exemplar in enumerate(dicts):
        try:
            encoded = encode(exemplar)
        except ringside.RingError as refused:
            with pytest.raises(type(refused)):
                fill.observe(value, exemplar=exemplar)
            continue
        assert _ringside.exemplar_check(encoded) is None
        assert fill.observe(value, exemplar=exemplar)
        expected.append((value, EXEMPLAR, encoded.decode()))
    assert BotFile(bot.path).exemplars("fill") == expected
    assert 150 < len(expected) < 2850, len(expected)  # the fuzz reaches both sides
    bot.close()


class Pairs(Mapping):
    """A mapping whose items() names a key twice (no dict can): only the bytes' check sees it."""

    def __init__(self, pairs):
        self.pairs = pairs

    def __getitem__(self, key):
        return dict(self.pairs)[key]

    def __iter__(self):
        return iter(key for key, _ in self.pairs)

    def __len__(self):
        return len(self.pairs)

    def items(self):
        return list(self.pairs)


def test_any_mapping_is_taken_and_a_key_named_twice_is_refused(backend, ring_dir):
    bot = attach(backend, ring_dir, "mappings", strict=True)
    fill = bot.histogram("fill", unit="ns")
    assert fill.observe(1, exemplar=Pairs([("order_id", "A17")]))
    with pytest.raises(ValueError, match="key order_id is given twice"):
        fill.observe(2, exemplar=Pairs([("order_id", "A17"), ("order_id", "A18")]))
    assert BotFile(bot.path).exemplars("fill") == [(1, EXEMPLAR, "order_id=A17")]
    bot.close()


def test_an_exemplar_whose_records_wrap_past_the_lanes_end_arrives_whole(backend, ring_dir, collector):
    # Never sampled: a 16-slot lane the collector reads samples from its half (its top R is at
    # least 16 records, at most what lies above sample_above), whenever the collector attached
    # before these calls.
    bot = attach(backend, ring_dir, "wrap", lane_capacity=16, sample_above_percent=100)
    sizes = bot.histogram("sizes", unit="bytes")
    for value in range(1, 16):
        assert sizes.observe(value)
    collector.wait_for("the first 15 records drained", lambda: (
        (found := collector.series("wrap", "sizes")) and found["total_count"] == 15))
    # Cursors 15, 16 and 17: slots 15, 0 and 1.
    assert sizes.observe(100, exemplar={"order_id": "W1-0123456789ABCDEF"})
    exemplars = collector.wait_for("the exemplar", lambda: bucket_exemplars(collector, "wrap", "sizes"))
    assert [(exemplar["value"], exemplar["labels"]) for exemplar in exemplars] == [(100, {"order_id": "W1-0123456789ABCDEF"})]
    assert bot.records_written == 18 and bot.records_dropped == 0
    bot.close()
