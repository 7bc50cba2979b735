"""Processes: fork and worker pools (each worker a file of its own), workers by option, a second
producer, RINGSIDE_DISABLED, the backend choice, the benchmark."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import ringside
from conftest import IN_CI, BotFile, _ringside, bot_files, find_series, missing, run_python


def test_the_extension_is_built_where_ci_runs():
    if IN_CI:
        assert ringside.ACCELERATED, "CI installs the package with a compiler: the C extension must be built"
    assert ringside.ACCELERATED == (_ringside is not None)


def test_ringside_pure_picks_the_pure_backend():
    result = run_python("import ringside; print(ringside.ACCELERATED)", env={"RINGSIDE_PURE": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def backend_expression(backend):
    """The backend, as code for a script run by run_python."""
    name = "_ringside" if backend is _ringside else "_pure"
    return f"__import__('ringside.{name}').{name}"


def run_forking(script, backend, ring_dir):
    """Runs a script that forks (a FORK of these tests: `{backend}` and `{directory}` to fill) whose
    child prints "child PID ..." and whose parent prints "child exit STATUS" once it has waited for
    it; checks that both exited 0 and nothing was said on stderr (becoming a worker is not news).
    Returns the child's line after "child "."""
    result = run_python(script.format(backend=backend_expression(backend), directory=ring_dir))
    assert result.returncode == 0, result.stderr
    assert "child exit 0" in result.stdout
    assert result.stderr == ""
    return next(line for line in result.stdout.splitlines() if line.startswith("child "))[len("child "):]


FORK = """
import os, ringside
backend = {backend}
bot = ringside.Bot("parent", {directory!r}, _backend=backend, mode=0o640)
orders = bot.counter("orders")
latency = bot.histogram("latency", unit="s", labelnames=("venue",))
level = bot.gauge("level")
orders.inc(10)
latency.labels("X").observe(0.001)
level.set(1.5)
go, ready = os.pipe()
pid = os.fork()
if pid == 0:
    before = (bot.enabled, bot.path)
    os.read(go, 1)  # the parent registered "late" since the fork
    wrote = [latency.labels("X").observe(0.002) for _ in range(3)]  # handles of the parent's
    orders.inc(1000)
    level.inc(2)  # from 0, as in any new process: 2.0
    level.set(7.5)
    bot.counter("child_only").inc(5)  # registered by the child
    latency.labels("Y").observe(0.004)
    print("child", os.getpid(), wrote, before, bot.enabled, bot.path, flush=True)
    os._exit(0)
bot.counter("late").inc(3)
os.write(ready, b"!")
_, status = os.waitpid(pid, 0)
orders.inc(1)
latency.labels("X").observe(0.003)
print("child exit", os.waitstatus_to_exitcode(status), flush=True)
bot.close()
"""


def test_a_forked_childs_records_land_in_a_worker_file_with_its_parents_registry(backend, ring_dir):
    pid, *said = run_forking(FORK, backend, ring_dir).split(" ", 1)
    worker_path = f"{ring_dir}/ringside.parent@{pid}"
    # Not a worker until its first record (no file, no path), yet enabled: its records will be
    # kept. Then a worker, writing its own file.
    assert said == [f"[True, True, True] (True, None) True {worker_path}"]
    assert bot_files(ring_dir, "parent") == ["ringside.parent", f"ringside.parent@{pid}"]

    parent, worker = BotFile(f"{ring_dir}/ringside.parent"), BotFile(worker_path)
    # The worker's file starts with the parent's registry at the same indices (what the
    # parent registered after the fork too), then what the child registered.
    assert [(name, labels) for _, name, _, labels in parent.registry] == [
        ("orders", ""), ("level", ""), ("latency", "venue=X"), ("late", "")]  # a series at its first .labels()
    assert worker.registry[:4] == parent.registry
    assert [(name, labels) for _, name, _, labels in worker.registry[4:]] == [("child_only", ""), ("latency", "venue=Y")]
    assert [entry[0] for entry in worker.registry] == list(range(6))
    assert (worker.pid, worker.mode, worker.capacity) == (int(pid), parent.mode, parent.capacity) == (int(pid), 0o640, 1 << 16)
    # The child's records, and its only.
    assert worker.counter("orders") == 1000
    assert worker.values("latency", "venue=X") == [2_000_000] * 3
    assert worker.values("latency", "venue=Y") == [4_000_000]
    assert (worker.gauge("level"), worker.values("level")) == (7.5, [2.0, 7.5])
    assert (worker.counter("late"), worker.counter("child_only")) == (0, 5)
    # The parent's, and its only.
    assert parent.counter("orders") == 11
    assert parent.values("latency", "venue=X") == [1_000_000, 3_000_000]
    assert (parent.gauge("level"), parent.values("level")) == (1.5, [1.5])
    assert parent.counter("late") == 3


POOL_IDLE = """
import concurrent.futures, multiprocessing, os, warnings, ringside
warnings.simplefilter("ignore", DeprecationWarning)  # 3.12's about forking a process with threads
backend = {backend}
bot = ringside.Bot("pool", {directory!r}, _backend=backend)
latency = bot.histogram("latency", unit="s")
latency.observe(0.001)

def task(n):
    return n * n  # maths only: the bot is never touched

context = multiprocessing.get_context("fork")
pool = context.Pool(3)
assert pool.map(task, range(30)) == [n * n for n in range(30)]
pool.close()
pool.join()
with concurrent.futures.ProcessPoolExecutor(3, mp_context=context) as executor:
    assert list(executor.map(task, range(30))) == [n * n for n in range(30)]
children = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    children.append(pid)
print("children", sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 for pid in children), flush=True)
bot.close()
"""


def test_forked_workers_that_never_record_create_nothing_and_say_nothing(backend, ring_dir):
    result = run_python(POOL_IDLE.format(backend=backend_expression(backend), directory=ring_dir))
    assert result.returncode == 0, result.stderr
    assert "children 3" in result.stdout
    assert result.stderr == ""
    assert bot_files(ring_dir, "pool") == ["ringside.pool"]
    assert BotFile(f"{ring_dir}/ringside.pool").values("latency") == [1_000_000]


POOL_RECORDS = """
import concurrent.futures, json, multiprocessing, os, warnings, ringside
warnings.simplefilter("ignore", DeprecationWarning)
backend = {backend}
bot = ringside.Bot("pool", {directory!r}, _backend=backend, lane_capacity=1024)
tasks = bot.counter("tasks")
latency = bot.histogram("latency", unit="us")
tasks.inc(1000)  # the parent's own

def task(n):
    tasks.inc()
    latency.observe(n)
    return os.getpid()

context = multiprocessing.get_context("fork")
if {executor}:
    with concurrent.futures.ProcessPoolExecutor(4, mp_context=context) as executor:
        pids = list(executor.map(task, range(1, {n} + 1)))
else:
    pool = context.Pool(4, maxtasksperchild=10)  # workers recycled every 10 tasks
    pids = pool.map(task, range(1, {n} + 1), chunksize=1)
    pool.close()
    pool.join()
print(json.dumps(sorted(set(pids))), flush=True)
bot.close()
"""


@pytest.mark.parametrize("executor", [False, True], ids=["multiprocessing.Pool", "ProcessPoolExecutor"])
def test_forked_pool_workers_that_record_write_a_file_each_and_the_totals_are_exact(backend, ring_dir, executor):
    n = 300
    result = run_python(POOL_RECORDS.format(backend=backend_expression(backend), directory=ring_dir, executor=executor, n=n))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    pids = json.loads(result.stdout)
    if not executor:
        assert len(pids) >= n // 10  # recycled: a process per 10 tasks
    assert bot_files(ring_dir, "pool") == sorted(["ringside.pool"] + [f"ringside.pool@{pid}" for pid in pids])
    parent = BotFile(f"{ring_dir}/ringside.pool")
    assert (parent.counter("tasks"), parent.values("latency")) == (1000, [])
    workers = [BotFile(f"{ring_dir}/ringside.pool@{pid}") for pid in pids]
    assert all(worker.registry == parent.registry and worker.pid == pid for worker, pid in zip(workers, pids))
    assert all(worker.counter("tasks") >= 1 for worker in workers)
    assert sum(worker.counter("tasks") for worker in workers) == n
    assert sorted(value for worker in workers for value in worker.values("latency")) == [1000 * k for k in range(1, n + 1)]


def test_a_forked_pools_workers_reach_the_collector_as_one_bot(backend, ring_dir, collector):
    n = 200
    result = run_python(POOL_RECORDS.format(backend=backend_expression(backend), directory=ring_dir, executor=False, n=n))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    collector.wait_for("the parent's and every worker's increments, in one series", lambda: (
        (s := collector.series("pool", "tasks")) and s["total"] == n + 1000))
    collector.wait_for("every worker's records, in one histogram", lambda: (
        (s := collector.series("pool", "latency")) and s["total_count"] == n
        and int(s["total_sum"]) == 1000 * n * (n + 1) // 2))


POOL_AT_SCALE = """
import concurrent.futures, json, multiprocessing, os, sys, warnings
import ringside
warnings.simplefilter("ignore", DeprecationWarning)  # 3.12's about forking a process with threads
backend = {backend}
bot = tasks = latency = None  # the bot and its metrics, in this process


def attach(worker):
    global bot, tasks, latency
    # A lane holds every record of the run: none is dropped however late the collector drains.
    bot = ringside.Bot("pool", {directory!r}, worker=worker, lane_capacity=16384, _backend=backend)
    tasks = bot.counter("tasks")
    latency = bot.histogram("latency", unit="us")


def task(n):
    tasks.inc()
    latency.observe(n)
    return os.getpid()


if __name__ == "__main__":
    attach(worker=False)
    tasks.inc(1000)  # the parent's own
    method, kind, n, per_child = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    context = multiprocessing.get_context(method)
    # fork: the children record through the handles they inherit, each a worker at its first
    # record. spawn and forkserver: a child is a fresh interpreter (this file imported again, not
    # as __main__, or forked from the forkserver that imported it so): it attaches the bot itself.
    initializer, arguments = (None, ()) if method == "fork" else (attach, (True,))
    if kind == "executor":
        with concurrent.futures.ProcessPoolExecutor(8, mp_context=context, initializer=initializer,
                                                    initargs=arguments) as executor:
            pids = list(executor.map(task, range(1, n + 1), chunksize=10))
    else:
        pool = context.Pool(8, initializer=initializer, initargs=arguments, maxtasksperchild=per_child)
        pids = pool.map(task, range(1, n + 1), chunksize=1)
        pool.close()
        pool.join()
    print(json.dumps(sorted(set(pids))), flush=True)
    bot.close()
"""


def run_pool_at_scale(backend, ring_dir, collector, method, executor, per_child):
    """10,000 tasks in a pool of 8 (multiprocessing.Pool, its workers replaced every `per_child`
    tasks, or ProcessPoolExecutor) started by `method`, each task one increment and one record;
    the parent 1,000 increments of its own. The collector's totals are exact, and every worker's
    file goes, its totals staying."""
    n = 10_000
    directory = tempfile.mkdtemp(prefix="ringside-pool.")
    try:
        script = os.path.join(directory, "pool.py")  # spawn's children import it again
        with open(script, "w") as file:
            file.write(POOL_AT_SCALE.format(backend=backend_expression(backend), directory=ring_dir))
        result = subprocess.run([sys.executable, script, method, "executor" if executor else "pool", str(n), str(per_child)],
                                capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    pids = json.loads(result.stdout)
    if executor:
        assert 1 <= len(pids) <= 8
    else:
        assert len(pids) >= n // per_child  # recycled: a process per `per_child` tasks at most
    want = (n + 1000, n, 1000 * n * (n + 1) // 2)  # the counter; the histogram's count, and its sum in ns
    collector.wait_until_equal("the parent's and every task's increment, and every task's record",
                               lambda: pool_totals(collector), want, timeout=60)
    # The workers are gone: their files go, their totals stay.
    collector.wait_for("the workers' files removed", lambda: bot_files(ring_dir, "pool") == ["ringside.pool"], timeout=60)
    assert pool_totals(collector) == want


def pool_totals(collector):
    latest = collector.latest()
    tasks, latency = find_series(latest, "pool", "tasks"), find_series(latest, "pool", "latency")
    return (tasks and tasks["total"], latency and latency["total_count"], latency and int(latency["total_sum"]))


@pytest.mark.parametrize("executor", [False, True], ids=["Pool-maxtasksperchild-10", "ProcessPoolExecutor"])
def test_a_forked_pool_of_10000_tasks_reaches_the_collector_exactly(backend, ring_dir, collector, executor):
    # 1,000 processes for the Pool: 5 to 10 s on 2 busy cores.
    run_pool_at_scale(backend, ring_dir, collector, "fork", executor, per_child=10)


# Children that are fresh interpreters, each attaching the bot as a worker, on one backend (the
# extension): the backends are the forked tests' business. Their Pool replaces its workers every
# 100 tasks, not 10: a spawned child costs an interpreter's start, and a forkserver's ones
# multiprocessing's start of a process (on 2 busy cores, 1,000 children took 55 to 70 s with
# forkserver and 115 to 140 s with spawn; 100 take about 5 and 10 s).
@pytest.mark.parametrize("backend", ["extension"], indirect=True)
@pytest.mark.parametrize("executor", [False, True], ids=["Pool-maxtasksperchild-100", "ProcessPoolExecutor"])
@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_pool_of_fresh_interpreters_attaching_as_workers_reaches_the_collector_exactly(backend, ring_dir, collector, method,
                                                                                          executor):
    run_pool_at_scale(backend, ring_dir, collector, method, executor, per_child=100)


WORKER = """
import sys, ringside
bot = ringside.Bot("served", {directory!r}, worker=True, _backend={backend})
bot.counter("requests").inc({n})
print(bot.path, flush=True)
sys.stdin.read()  # attached until the test says
bot.close()
"""


def test_processes_attach_a_bot_as_its_workers_by_option(backend, ring_dir):
    import subprocess
    processes = [subprocess.Popen([sys.executable, "-c", WORKER.format(directory=ring_dir, backend=backend_expression(backend),
                                                                        n=n)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for n in (3, 4)]
    try:
        paths = [process.stdout.readline().strip() for process in processes]
        assert paths == [f"{ring_dir}/ringside.served@{process.pid}" for process in processes], \
            [process.stderr.read() for process in processes if process.poll() is not None]
        # The bot's own file is free beside its workers; a second process (or attachment) of it is not.
        with ringside.Bot("served", ring_dir, _backend=backend) as owner:
            owner.counter("requests").inc(5)
            assert owner.path == f"{ring_dir}/ringside.served"
            with pytest.raises(ringside.RingError, match=r"another producer is attached \(pid [0-9]+\); a bot has one "
                               r"process, or several as its workers \(attach with the worker option\)"):
                ringside.Bot("served", ring_dir, _backend=backend)
    finally:
        for process in processes:
            process.stdin.close()
            process.wait(10)
    assert [process.returncode for process in processes] == [0, 0]
    assert [process.stderr.read() for process in processes] == ["", ""]
    assert bot_files(ring_dir, "served") == sorted(["ringside.served"] + [f"ringside.served@{p.pid}" for p in processes])
    totals = {name: BotFile(f"{ring_dir}/{name}").counter("requests") for name in bot_files(ring_dir, "served")}
    assert totals == {"ringside.served": 5, f"ringside.served@{processes[0].pid}": 3, f"ringside.served@{processes[1].pid}": 4}


WORKER_RECORDS = """
import ringside
bot = ringside.Bot("served", {directory!r}, worker=True, _backend={backend})
bot.counter("requests").inc({n})
latency = bot.histogram("latency", unit="us")
for value in range(1, {n} + 1):
    latency.observe(value)
bot.close()
"""


def test_a_bot_whose_workers_all_went_at_once_keeps_its_histograms_for_the_next(backend, ring_dir, collector):
    # A bot of workers only (no process attached it as its own), every one gone, as uvicorn's
    # workers all reach their request limit together: the collector removes each file, and with
    # the last the bot's series; a new worker's records add to what the others left, in the
    # counters (their totals folded) and in the histograms (their all-time histograms kept).
    def run_worker(n):
        result = run_python(WORKER_RECORDS.format(directory=ring_dir, backend=backend_expression(backend), n=n))
        assert result.returncode == 0 and result.stderr == "", result.stderr

    def totals():
        latest = collector.latest()
        requests, latency = find_series(latest, "served", "requests"), find_series(latest, "served", "latency")
        return (requests and requests["total"], latency and latency["total_count"], latency and int(latency["total_sum"]))

    def expect(workers):  # each worker's n, and 1 ... n in the histogram (in microseconds)
        want = (sum(workers), sum(workers), sum(1000 * n * (n + 1) // 2 for n in workers))
        collector.wait_until_equal(f"the records of workers of {workers}", totals, want)

    run_worker(100)
    run_worker(200)
    expect([100, 200])
    collector.wait_for("every file of the bot removed, and its series with them", lambda: (
        bot_files(ring_dir, "served") == [] and collector.series("served", "latency") is None))
    run_worker(300)
    expect([100, 200, 300])  # not [300]: the histogram did not start again

FORK_FAILS = """
import os, ringside
bot = ringside.Bot("gone", {directory!r}, _backend={backend})
orders = bot.counter("orders")
latency = bot.histogram("latency", unit="s")
orders.inc()
pid = os.fork()
if pid == 0:
    os.unlink({directory!r} + "/ringside.gone")  # the parent's file, and its registry, are gone
    calls = [latency.observe(0.001), orders.inc(), latency.observe(0.002)]
    print("child", os.getpid(), calls, bot.enabled, bot.path, flush=True)
    try:
        bot.counter("more")
    except ringside.RingError as error:
        print("register raised:", error, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent wrote", latency.observe(0.003), flush=True)
bot.close()
"""


def test_a_forked_child_that_cannot_make_its_worker_file_writes_nothing_and_says_why_once(backend, ring_dir):
    result = run_python(FORK_FAILS.format(backend=backend_expression(backend), directory=ring_dir))
    assert result.returncode == 0, result.stderr
    _, pid, said = next(line for line in result.stdout.splitlines() if line.startswith("child ")).split(" ", 2)
    assert said == "[False, None, False] False None"
    parent_path = f"{ring_dir}/ringside.gone"
    assert result.stderr == (f"ringside: bot gone: this forked child (pid {pid}) writes nothing: open the parent's "
                             f"file {parent_path}: No such file or directory (errno 2)\n")  # once, for three calls
    assert "register raised: bot gone: this forked child could not make its worker file (said on stderr)" in result.stdout
    assert "parent wrote True" in result.stdout
    assert bot_files(ring_dir, "gone") == []


FORK_CLOSE = """
import os, ringside
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
    # As anywhere else: a call through a closed bot raises RingError; closed, the child's bot
    # makes no worker file.
    code = FORK_CLOSE.format(backend=backend_expression(backend), directory=ring_dir)
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    child = [line for line in result.stdout.splitlines() if line.startswith("child:")]
    assert child == [f"child: {call} raised bot parent is closed" for call in ("observe", "inc", "set")], result.stdout
    assert "parent wrote True" in result.stdout  # the child's close() left the parent's bot alone
    assert bot_files(ring_dir, "parent") == ["ringside.parent"]
    assert BotFile(f"{ring_dir}/ringside.parent").values("latency") == [1_000_000, 3_000_000]


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
assert latency.labels("AAPL").observe(-1) is False  # counted nowhere: nothing is written
strict = ringside.attach("off", {ring_dir!r}, strict=True)
try:
    strict.histogram("latency", unit="s").observe(-1)
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
    # An observe with an exemplar, against the same backend's observe in the same rounds.
    assert rows["ringside pure: observe(0.0012, exemplar=...)"]["baseline"] == "ringside pure: Histogram.observe(0.0012)"
    assert rows["ringside pure: observe(0.0012, exemplar=...)"]["ratio"] > 0
    # Signed and fractional values (format 4), against the same backend's observe and inc.
    for label in ("ringside pure",) + (("ringside",) if _ringside is not None else ()):
        assert rows[f"{label}: signed observe(-3.5), steps of 0.01"]["baseline"] == f"{label}: Histogram.observe(0.0012)"
        assert rows[f"{label}: inc(0.37), steps of 1e-6"]["baseline"] == f"{label}: Counter.inc()"
        assert rows[f"{label}: inc(0.37), steps of 1e-6"]["ratio"] > 0
    if _ringside is not None:
        assert rows["ringside: Histogram.observe(0.0012)"]["ns"] > 0
        assert rows["ringside: observe(0.0012, exemplar=...)"]["baseline"] == "ringside: Histogram.observe(0.0012)"
        assert rows["ringside: observe(0.0012, exemplar=...)"]["ratio"] > 0
        # A span on the extension's span clock, against the same span on CLOCK_MONOTONIC.
        assert rows["ringside: stop(start())"]["baseline"] == "ringside: stop(start()) on CLOCK_MONOTONIC"
        assert rows["ringside: stop(start())"]["ratio"] > 0
        assert report["span_clock"].startswith(("tsc: ", "monotonic: "))
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        if IN_CI:
            pytest.fail("prometheus_client is not installed (CI=true: .ci/run installs it)")
        return
    assert rows["ringside pure: Counter.inc()"]["ratio"] is not None


BOUND = """
import os, sys, ringside
bot = ringside.Bot("bound", {directory!r}, _backend={backend}, max_workers=2)
increments = bot.counter("bound_increments")
ready_r, ready_w = os.pipe()
pids, exits = [], []

def start():
    told_r, told_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for _ in range({n}):
            increments.inc()  # the first makes this child a worker (or is refused)
        os.write(ready_w, b"!")
        os.read(told_r, 1)
        os._exit(0)
    os.read(ready_r, 1)
    pids.append(pid)
    exits.append(told_w)

def finish(index):
    os.write(exits[index], b"!")
    os.waitpid(pids[index], 0)

for _ in range(3):
    start()  # the third finds two worker files, both alive
finish(0)
start()  # continues the first child's file
try:  # while the second and fourth live: refused too
    ringside.Bot("bound", {directory!r}, _backend={backend}, worker=True, max_workers=2)
except ringside.RingError as error:
    print("option:", error, flush=True)
for index in range(1, 4):
    finish(index)
print(*pids, flush=True)
bot.close()
"""


def test_past_max_workers_a_worker_continues_a_gone_ones_file_or_is_refused_and_counted(backend, ring_dir):
    n = 1000
    result = run_python(BOUND.format(backend=backend_expression(backend), directory=ring_dir, n=n))
    assert result.returncode == 0, result.stderr
    option, children = result.stdout.splitlines()
    pids = [int(word) for word in children.split()]
    assert len(pids) == 4, result.stdout
    # Children 1 and 2 made their files; 3 was refused, and said so once; 4 continues 1's.
    assert bot_files(ring_dir, "bound") == sorted(["ringside.bound", f"ringside.bound@{pids[0]}", f"ringside.bound@{pids[1]}"])
    assert result.stderr.count("writes nothing") == 1, result.stderr
    assert f"this forked child (pid {pids[2]}) writes nothing" in result.stderr
    assert "the bot has 2 worker files (max_workers), each held by a live worker" in result.stderr
    # A process attaching as a worker by option while every worker file is held: refused too.
    assert option.startswith("option: bot bound: the bot has 2 worker files (max_workers), each held by a live worker")
    assert BotFile(f"{ring_dir}/ringside.bound").workers_refused == 2
    continued = BotFile(f"{ring_dir}/ringside.bound@{pids[0]}")
    assert continued.pid == pids[3]
    assert continued.counter("bound_increments") == 2 * n  # the first child's and the fourth's


def test_max_workers_out_of_range_is_refused(backend, ring_dir):
    for bad in (0, -1, 65537, "8"):
        with pytest.raises(ringside.RingValueError, match="max_workers"):
            ringside.Bot("bad-bound", ring_dir, _backend=backend, worker=True, max_workers=bad)


LIVE_NOT_HOLDING = """
import os, ringside
go_r, go_w = os.pipe()
ready_r, ready_w = os.pipe()
holder = os.fork()
if holder == 0:  # a worker that lets go of its file and lives on (as one between making its file and locking it)
    worker = ringside.Bot("live", {directory!r}, _backend={backend}, worker=True)
    worker.counter("live_increments").inc(5)
    worker.close()
    os.write(ready_w, b"!")
    os.read(go_r, 1)
    os._exit(0)
os.read(ready_r, 1)
bot = ringside.Bot("live", {directory!r}, _backend={backend}, max_workers=1)
increments = bot.counter("live_increments")
child = os.fork()
if child == 0:
    increments.inc(7)  # past the bound; the one file there is a live process's: not continued
    os._exit(0)
os.waitpid(child, 0)
os.write(go_w, b"!")
os.waitpid(holder, 0)
print(holder, child, flush=True)
bot.close()
"""


def test_a_live_processs_worker_file_is_never_continued_even_unlocked(backend, ring_dir):
    result = run_python(LIVE_NOT_HOLDING.format(backend=backend_expression(backend), directory=ring_dir))
    assert result.returncode == 0, result.stderr
    holder, child = (int(word) for word in result.stdout.split())
    assert f"this forked child (pid {child}) writes nothing: the bot has 1 worker files (max_workers)" in result.stderr
    assert bot_files(ring_dir, "live") == sorted(["ringside.live", f"ringside.live@{holder}"])
    assert BotFile(f"{ring_dir}/ringside.live@{holder}").counter("live_increments") == 5
    assert BotFile(f"{ring_dir}/ringside.live").workers_refused == 1


PLANTED = """
import os, ringside
backend = {backend}
bot = ringside.Bot("planted", {directory!r}, _backend=backend)
tasks = bot.counter("tasks")
tasks.inc()
children = []
for _ in range({n}):
    pid = os.fork()
    if pid == 0:
        tasks.inc()
        os._exit(0 if bot.enabled else 3)
    children.append(pid)
statuses = [os.waitpid(pid, 0)[1] for pid in children]
print(" ".join(map(str, children)), " ".join(map(str, statuses)), sep="|", flush=True)
bot.close()
"""


def plant_as_nobody(directory, names):
    """Creates empty files `names` in `directory` as user nobody (65534), as another user could."""
    child = os.fork()
    if child == 0:
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            for name in names:
                os.close(os.open(os.path.join(directory, name), os.O_CREAT | os.O_WRONLY, 0o600))
            os._exit(0)
        except BaseException:
            os._exit(1)
    assert os.waitpid(child, 0)[1] == 0, "planting as nobody failed"


def test_a_forked_childs_worker_name_planted_by_another_user_is_not_its_end(backend, ring_dir):
    """Worker names are predictable (<bot>@<pid>): nobody plants files for the next pids and 256
    for dead ones (the bound), and every forked child of root's bot still writes, under another
    name (<bot>@<pid>.<n>, n random) where its own was planted."""
    if os.geteuid() != 0:
        missing("planting files as user nobody needs root")
    os.chmod(ring_dir, 0o1777)  # shared, as /dev/shm is
    with open("/proc/sys/kernel/ns_last_pid") as file:
        last = int(file.read())
    with open("/proc/sys/kernel/pid_max") as file:
        pid_max = int(file.read())
    upcoming = set(range(last + 1, min(last + 3_000, pid_max) + 1))
    dead = [pid for pid in range(pid_max, pid_max - 10_000, -1) if not os.path.exists(f"/proc/{pid}")][:256]
    plant_as_nobody(ring_dir, [f"ringside.planted@{pid}" for pid in sorted(upcoming) + dead])
    n = 20
    result = run_python(PLANTED.format(backend=backend_expression(backend), directory=ring_dir, n=n))
    assert result.returncode == 0, result.stderr
    children_text, statuses_text = result.stdout.strip().split("|")
    children = [int(pid) for pid in children_text.split()]
    assert statuses_text.split() == ["0"] * n, result.stderr
    ours = [name for name in bot_files(ring_dir, "planted") if os.lstat(os.path.join(ring_dir, name)).st_uid == 0]
    assert sum(BotFile(os.path.join(ring_dir, name)).counter("tasks") for name in ours) == n + 1
    workers = {int(name.split("@")[1].split(".")[0]): name for name in ours if "@" in name}
    assert sorted(workers) == sorted(children)
    for pid, name in workers.items():
        assert ("." in name.split("@")[1]) == (pid in upcoming), name
    assert any(pid in upcoming for pid in children), "no child's pid was among the planted ones"
