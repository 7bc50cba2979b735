"""Gauges' merge policies (gauge_merge, byte 0x006 of a registry entry in ringside.h): the byte
each policy writes, conflicts, the pid label of a per-worker gauge, bad policies, non-gauges, an
existing file's entries validated, and a forked child's worker file: on both backends."""

import struct

import pytest

import ringside
from conftest import BotFile, _ringside, run_python
from ringside import _pure
from ringside._values import KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM
from test_process import backend_expression, run_forking

POLICIES = ("last", "sum", "max", "min", "per_worker")


def test_each_policy_is_the_byte_at_0x006_of_the_gauges_entry(bot, ring_dir):
    for policy in POLICIES:
        bot.gauge(f"g_{policy}", merge=policy).set(1.0)
    bot.gauge("g_default")
    bot.gauge("per_desk", merge="per_worker", labelnames=("desk",)).labels("a").set(2.0)
    bot.counter("orders").inc()
    bot.histogram("latency", unit="s").observe(0.001)
    file = BotFile(f"{ring_dir}/ringside.merge")
    assert [(name, file.merge(name, labels)) for _, name, _, labels in file.registry] == [
        ("g_last", "last"), ("g_sum", "sum"), ("g_max", "max"), ("g_min", "min"), ("g_per_worker", "per_worker"),
        ("g_default", "last"), ("per_desk", "per_worker"), ("orders", "last"), ("latency", "last")]
    assert file.merges == [0, 1, 2, 3, 4, 0, 4, 0, 0]  # rs_gauge_merge's codes; 0 for the other kinds
    assert file.forms == [0] * 9 and file.scales == [0] * 9  # 0x007 and 0x012: whole units, unsigned
    assert file.gauge("g_sum") == 1.0 and file.gauge("per_desk", "desk=a") == 2.0


def test_the_backends_write_the_same_entries(ring_dir):
    if _ringside is None:
        pytest.skip("the C extension is not built")
    for name, backend in (("ext", _ringside), ("pure", _pure)):
        with ringside.Bot(name, ring_dir, _backend=backend) as bot:
            for policy in POLICIES:
                bot.gauge(f"g_{policy}", unit="bytes", labels={"desk": "a"}, help=f"merged by {policy}", merge=policy)
            bot.counter("orders")
    assert BotFile(f"{ring_dir}/ringside.ext").entries == BotFile(f"{ring_dir}/ringside.pure").entries


def test_the_same_gauge_asked_with_another_policy_is_a_conflict(backend, ring_dir):
    with ringside.Bot("merge", ring_dir, _backend=backend) as bot:
        in_flight = bot.gauge("in_flight", merge="sum")
        assert bot.gauge("in_flight", merge="sum") is in_flight  # found again
        with pytest.raises(ringside.RingError, match=r"^bot merge: gauge in_flight is already registered merging its "
                           r"workers by sum; asked for max$"):
            bot.gauge("in_flight", merge="max")
        with pytest.raises(ringside.RingError, match="merging its workers by sum; asked for the last set"):
            bot.gauge("in_flight")
        bot.gauge("desk_depth", merge="per_worker", labels={"desk": "a"}).set(1.0)
    # Another attachment of the file, which finds the entries there: the backend says the same.
    with ringside.Bot("merge", ring_dir, _backend=backend) as bot:
        with pytest.raises(ringside.RingError, match=r"^bot merge: gauge in_flight is already registered merging its "
                           r"workers by sum; asked for min$") as raised:
            bot.gauge("in_flight", merge="min")
        assert not isinstance(raised.value, ValueError)  # a conflict, not a bad argument
        with pytest.raises(ringside.RingError, match=r"gauge desk_depth\{desk=a\} is already registered merging its "
                           r"workers by per worker; asked for sum"):
            bot.gauge("desk_depth", merge="sum", labels={"desk": "a"})
        assert bot.gauge("in_flight", merge="sum")._merge == 1
        assert bot.metric_count == 2
    assert BotFile(f"{ring_dir}/ringside.merge").merges == [1, 4]


def test_a_per_worker_gauge_may_not_have_a_label_named_pid(bot):
    message = r"metric busy: a per-worker gauge is labelled pid by the collector: it cannot have a label named pid"
    with pytest.raises(ringside.RingValueError, match=message):
        bot.gauge("busy", merge="per_worker", labelnames=("pid",))
    with pytest.raises(ringside.RingValueError, match=message):
        bot.gauge("busy", merge="per_worker", labels={"pid": 7}, labelnames=("desk",))
    core = bot._core
    for labels in (b"pid=7", b"desk=a\npid=7"):  # the backend checks too
        with pytest.raises(ringside.RingValueError, match=message):
            core.register("busy", KIND_GAUGE, 0, labels, "", 1, 4)
    assert bot.metric_count == 0
    bot.gauge("busy", merge="sum", labels={"pid": 7}).set(1.0)  # another policy may name it
    bot.gauge("busy_by_worker", merge="per_worker", labelnames=("pidgin", "xpid")).labels("a", "b").set(1.0)
    assert bot.metric_count == 2


@pytest.mark.parametrize("policy", ["average", "LAST", "per-worker", "", 1, None])
def test_a_bad_policy_is_refused_naming_the_allowed_ones(bot, policy):
    with pytest.raises(ringside.RingValueError, match=r"metric level: unknown gauge merge .*; one of last, sum, max, min, "
                       r"per_worker$") as raised:
        bot.gauge("level", merge=policy)
    assert isinstance(raised.value, ValueError)
    assert bot.metric_count == 0


@pytest.mark.parametrize("code", [5, 255, -1])
def test_the_backend_refuses_an_unknown_policy_code(bot, code):
    with pytest.raises(ringside.RingValueError, match=f"metric level: unknown gauge merge policy {code}"):
        bot._core.register("level", KIND_GAUGE, 0, b"", "", 1, code)
    assert bot.metric_count == 0


@pytest.mark.parametrize("kind", [KIND_COUNTER, KIND_HISTOGRAM])
def test_only_a_gauge_has_a_policy(bot, kind):
    for code in (1, 4):
        with pytest.raises(ringside.RingValueError, match="metric orders: only a gauge has a merge policy"):
            bot._core.register("orders", kind, 0, b"", "", 1, code)
    assert bot.metric_count == 0
    assert bot._core.register("orders", kind, 0, b"", "", 1, 0) == 0
    with pytest.raises(TypeError):
        bot.counter("orders", merge="sum")


@pytest.mark.parametrize("entry, byte, problem", [
    (0, 5, "gauge merge policy 5 on a gauge"),
    (0, 255, "gauge merge policy 255 on a gauge"),
    (1, 1, "gauge merge policy 1 on a counter"),
    (2, 4, "gauge merge policy 4 on a histogram"),
])
def test_an_existing_files_entry_with_a_policy_a_reader_refuses_is_corrupt(backend, ring_dir, entry, byte, problem):
    path = f"{ring_dir}/ringside.merge"
    with ringside.Bot("merge", ring_dir, _backend=backend) as bot:
        bot.gauge("level", merge="max")
        bot.counter("orders")
        bot.histogram("latency", unit="s")
    with open(path, "r+b") as file:  # registry_offset 4096, entries of 512 bytes
        file.seek(4096 + 512 * entry + 6)
        file.write(bytes([byte]))
    with pytest.raises(ringside.RingError, match=f"is corrupt: registry entry {entry}: {problem}$"):
        ringside.Bot("merge", ring_dir, _backend=backend)
    with open(path, "r+b") as file:  # an older file's 0 (the value set last) is valid on any kind
        file.seek(4096 + 6)
        file.write(struct.pack("<B", 0))
        file.seek(4096 + 512 * entry + 6)
        file.write(bytes([0]))
    with ringside.Bot("merge", ring_dir, _backend=backend) as bot:
        assert bot.gauge("level")._merge == 0


FORK = """
import os, ringside
backend = {backend}
bot = ringside.Bot("merge", {directory!r}, _backend=backend)
in_flight = bot.gauge("in_flight", merge="sum")
peak = bot.gauge("peak", merge="max", labelnames=("desk",))
busy = bot.gauge("busy", merge="per_worker")
bot.counter("orders").inc()
peak.labels("a").set(1.0)
pid = os.fork()
if pid == 0:
    wrote = in_flight.set(3.0)  # an inherited handle: the child becomes a worker
    bot.gauge("low", merge="min").set(0.5)  # registered by the child
    peak.labels("b").set(2.0)
    print("child", os.getpid(), wrote, flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status), flush=True)
bot.close()
"""


def test_a_forked_childs_worker_file_carries_its_parents_policies(backend, ring_dir):
    pid, wrote = run_forking(FORK, backend, ring_dir).split(" ")
    assert wrote == "True"
    parent, worker = BotFile(f"{ring_dir}/ringside.merge"), BotFile(f"{ring_dir}/ringside.merge@{pid}")
    assert parent.merges == [1, 4, 0, 2]  # in registration order: peak{desk=a} at its first .labels()
    assert [(name, labels) for _, name, _, labels in parent.registry] == [
        ("in_flight", ""), ("busy", ""), ("orders", ""), ("peak", "desk=a")]
    # The parent's entries, whole (the policy with them), then the child's own.
    assert worker.entries[:4] == parent.entries
    assert [(name, labels, worker.merge(name, labels)) for _, name, _, labels in worker.registry] == [
        ("in_flight", "", "sum"), ("busy", "", "per_worker"), ("orders", "", "last"), ("peak", "desk=a", "max"),
        ("low", "", "min"), ("peak", "desk=b", "max")]
    assert (worker.gauge("in_flight"), worker.gauge("low"), worker.gauge("peak", "desk=b")) == (3.0, 0.5, 2.0)


FORK_ADOPTS = """
import os, ringside
backend = {backend}
bot = ringside.Bot("merge", {directory!r}, _backend=backend)
in_flight = bot.gauge("in_flight", merge="sum")
in_flight.set(1.0)
pid = os.fork()
if pid == 0:
    # A file a dead worker of this pid left: the same gauge at index 0, merged by max.
    with ringside.Bot("merge", {directory!r}, worker=True, _backend=backend) as left:
        left.gauge("in_flight", merge="{policy}")
    print("child", os.getpid(), in_flight.set(3.0), in_flight.set(4.0), bot.enabled, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent wrote", in_flight.set(2.0), flush=True)
bot.close()
"""


def test_a_forked_child_adopts_a_worker_file_only_if_its_entries_have_the_parents_policies(backend, ring_dir):
    result = run_python(FORK_ADOPTS.format(backend=backend_expression(backend), directory=ring_dir, policy="max"))
    assert result.returncode == 0, result.stderr
    _, pid, *said = next(line for line in result.stdout.splitlines() if line.startswith("child ")).split(" ")
    assert said == ["False", "False", "False"]
    worker_path = f"{ring_dir}/ringside.merge@{pid}"
    assert result.stderr == (f"ringside: bot merge: this forked child (pid {pid}) writes nothing: {worker_path} holds "
                             "another metric at index 0 than the parent's registry\n")  # once, for two calls
    assert "parent wrote True" in result.stdout
    assert BotFile(worker_path).merges == [2]  # left as it was
    assert BotFile(worker_path).gauge("in_flight") is None

    # The same policy: adopted, and written to.
    result = run_python(FORK_ADOPTS.format(backend=backend_expression(backend), directory=ring_dir, policy="sum"))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    _, pid, *said = next(line for line in result.stdout.splitlines() if line.startswith("child ")).split(" ")
    assert said == ["True", "True", "True"]
    worker = BotFile(f"{ring_dir}/ringside.merge@{pid}")
    assert (worker.merges, worker.gauge("in_flight")) == ([1], 4.0)
