"""Processes: fork, a second producer, RINGSIDE_DISABLED, the backend choice, the benchmark."""

import json
import sys

import pytest

import ringside
from conftest import IN_CI, _ringside, run_python


def test_the_extension_is_built_where_ci_runs():
    if IN_CI:
        assert ringside.ACCELERATED, "CI installs the package with a compiler: the C extension must be built"
    assert ringside.ACCELERATED == (_ringside is not None)


def test_ringside_pure_picks_the_pure_backend():
    result = run_python("import ringside; print(ringside.ACCELERATED)", env={"RINGSIDE_PURE": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


FORK = """
import os, sys, ringside
from ringside import _pure
backend = {backend}
bot = ringside.Bot("parent", {directory!r}, _backend=backend)
orders = bot.counter("orders")
latency = bot.histogram("latency", unit="s")
orders.inc(10)
latency.observe(0.001)
pid = os.fork()
if pid == 0:
    # The parent's bot writes nothing here, without an exception; a bot of its own does.
    wrote = latency.observe(0.002)
    orders.inc(1000)
    child = ringside.Bot("child", {directory!r}, _backend=backend)
    child.counter("orders").inc(5)
    child.close()
    os._exit(0 if wrote is False else 3)
_, status = os.waitpid(pid, 0)
orders.inc(1)
latency.observe(0.003)
print("child exit", os.waitstatus_to_exitcode(status), flush=True)
bot.close()
"""


def test_a_forked_child_writes_nothing_to_its_parents_bot(backend, ring_dir, collector):
    name = "_ringside" if backend is _ringside else "_pure"
    code = FORK.format(backend=f"__import__('ringside.{name}').{name}", directory=ring_dir)
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "child exit 0" in result.stdout
    assert result.stderr.count("this forked child") == 1, result.stderr  # said once, on stderr
    collector.wait_for("the parent's exact total", lambda: (
        (s := collector.series("parent", "orders")) and s["total"] == 11))
    collector.wait_for("the parent's two records", lambda: (
        (s := collector.series("parent", "latency")) and s["total_count"] == 2 and int(s["total_sum"]) == 4_000_000))
    collector.wait_for("the child's own bot", lambda: (
        (s := collector.series("child", "orders")) and s["total"] == 5))


POOL = """
import os, ringside
from ringside import _pure
backend = {backend}
bot = ringside.Bot("pool", {directory!r}, _backend=backend)
bot.histogram("latency", unit="s").observe(0.001)
workers = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        os._exit(0)  # a pool worker that never touches the parent's bot
    workers.append(pid)
print("workers", sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 for pid in workers), flush=True)
bot.close()
"""


def test_forked_workers_that_never_record_say_nothing(backend, ring_dir):
    name = "_ringside" if backend is _ringside else "_pure"
    result = run_python(POOL.format(backend=f"__import__('ringside.{name}').{name}", directory=ring_dir))
    assert result.returncode == 0, result.stderr
    assert "workers 3" in result.stdout
    assert "this forked child" not in result.stderr, result.stderr  # said only by a child that records


FORK_CLOSE = """
import os, ringside
from ringside import _pure
backend = {backend}
bot = ringside.Bot("parent", {directory!r}, _backend=backend)
latency = bot.histogram("latency", unit="s")
orders = bot.counter("orders")
level = bot.gauge("level")
latency.observe(0.001)  # the thread's lane, claimed before the fork
pid = os.fork()
if pid == 0:
    bot.close()
    for name, call, argument in (("observe", latency.observe, 0.002), ("inc", orders.inc, 1), ("set", level.set, 1.0)):
        try:
            print("child:", name, "returned", call(argument), flush=True)
        except ringside.RingError as error:
            print("child:", name, "raised", error, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent wrote", latency.observe(0.003), flush=True)
bot.close()
"""


def test_a_forked_child_that_closed_its_parents_bot_is_told_it_is_closed(backend, ring_dir):
    # As anywhere else: a call through a closed bot raises RingError (a forked child's calls,
    # before it closes the bot, return False: the fork, not the program, stopped them).
    name = "_ringside" if backend is _ringside else "_pure"
    code = FORK_CLOSE.format(backend=f"__import__('ringside.{name}').{name}", directory=ring_dir)
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    child = [line for line in result.stdout.splitlines() if line.startswith("child:")]
    assert child == [f"child: {call} raised bot parent is closed" for call in ("observe", "inc", "set")], result.stdout
    assert "parent wrote True" in result.stdout  # the child's close() left the parent's bot alone


HOLD = """
import sys, ringside
bot = ringside.attach("held", {directory!r})
bot.counter("orders").inc()
print("attached", flush=True)
sys.stdin.read()
"""


def test_a_second_producer_is_refused_naming_the_first(backend, ring_dir):
    import subprocess
    holder = subprocess.Popen([sys.executable, "-c", HOLD.format(directory=ring_dir)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "attached"
        with pytest.raises(ringside.RingError, match=f"another producer is attached \\(pid {holder.pid}\\)"):
            ringside.Bot("held", ring_dir, _backend=backend)
    finally:
        holder.stdin.close()
        holder.wait(10)
    ringside.Bot("held", ring_dir, _backend=backend).close()  # the holder gone, the bot is free


def test_disabled_bots_write_nothing_and_still_check_values(ring_dir):
    code = f"""
import os, ringside
bot = ringside.attach("off", {ring_dir!r})
latency = bot.histogram("latency", unit="s", labelnames=("symbol",))
assert latency.labels("AAPL").observe(0.5) is False
bot.counter("orders").inc(3)
try:
    latency.labels("AAPL").observe(-1)
except ValueError as error:
    print("refused", error)
print("enabled", bot.enabled, "path", bot.path, "files", os.listdir({ring_dir!r}))
"""
    for pure in ("0", "1"):
        result = run_python(code, env={"RINGSIDE_DISABLED": "1", "RINGSIDE_PURE": pure})
        assert result.returncode == 0, result.stderr
        assert "refused" in result.stdout
        assert "enabled False path None files []" in result.stdout


def test_the_benchmark_runs_and_measures_both_backends():
    result = run_python("import ringside.bench; ringside.bench.main(['--rounds', '1', '--calls', '2000', '--json'])")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = {row["row"]: row for row in report["rows"]}
    assert report["dropped"] == 0
    assert rows["ringside pure: Histogram.observe(0.0012)"]["ns"] > 0
    if _ringside is not None:
        assert rows["ringside: Histogram.observe(0.0012)"]["ns"] > 0
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        if IN_CI:
            pytest.fail("prometheus_client is not installed (CI=true: .ci/run installs it)")
        return
    assert rows["ringside pure: Counter.inc()"]["ratio"] is not None
