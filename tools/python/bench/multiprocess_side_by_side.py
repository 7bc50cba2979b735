"""Ringside's workers beside prometheus_client's multiprocess mode, on one gunicorn app.

The same tiny WSGI app (each request increments a counter and observes a latency in a histogram)
runs under gunicorn twice, with 4 sync workers that recycle all the time (--max-requests 50
--max-requests-jitter 10) and --preload: once instrumented with prometheus_client in multiprocess
mode (PROMETHEUS_MULTIPROC_DIR, emptied before the start; a /metrics endpoint of the app built
with MultiProcessCollector; mark_process_dead in gunicorn's child_exit hook), once with Ringside
(the bot attached at import; ringside-collector reading the rings and serving /metrics). While
client threads send N requests, each side's /metrics is scraped again and again. Reported for
each: the scrapes, how many saw the request counter (or the histogram's _count) below the scrape
before (what Prometheus reads as a counter reset), the final totals against N, the median scrape
time, the files left, and the setup steps it needs. Then the cost of one observation (a counter
inc and a histogram observe) of each library in one process (prometheus_client in multiprocess
mode, Ringside's C extension and its pure backend), in interleaved rounds: medians, and the
ratio to prometheus_client's.

    python tools/python/bench/multiprocess_side_by_side.py [--collector PATH] [--requests N]
        [--clients C] [--rounds R] [--calls K] [--json]

Needs gunicorn and prometheus_client (pip install gunicorn prometheus_client), the ringside
package, and ringside-collector (--collector, else $RINGSIDE_COLLECTOR, else the checkout's
.build/release or .build/debug).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any, Callable

from collector_binary import collector_path

GUNICORN = ["--workers", "4", "--max-requests", "50", "--max-requests-jitter", "10", "--preload"]

PROMETHEUS_APP = """
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest, multiprocess

requests = Counter("requests", "Requests served")
latency = Histogram("request_latency_seconds", "Request latency")


def app(environ, start_response):
    if environ["PATH_INFO"] == "/metrics":
        registry = CollectorRegistry()  # at each scrape: what every worker's files hold
        multiprocess.MultiProcessCollector(registry)
        body = generate_latest(registry)
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body)))])
        return [body]
    requests.inc()
    latency.observe(0.001)
    start_response("200 OK", [("Content-Length", "2"), ("Connection", "close")])
    return [b"ok"]
"""

PROMETHEUS_CONFIG = """
from prometheus_client import multiprocess


def child_exit(server, worker):
    multiprocess.mark_process_dead(worker.pid)
"""

# The app on Ringside (tests/test_gunicorn.py serves it too): with --preload the bot is attached in
# the master (worker=False), without it by each worker (worker=True).
RINGSIDE_APP = """
import ringside

bot = ringside.attach("web", directory={directory!r}, worker={worker})
requests = bot.counter("requests")
latency = bot.histogram("request_latency", unit="s")


def app(environ, start_response):
    requests.inc()
    latency.observe(0.001)
    start_response("200 OK", [("Content-Length", "2"), ("Connection", "close")])
    return [b"ok"]
"""

SETUP = {
    "prometheus_client": [
        "PROMETHEUS_MULTIPROC_DIR set in the environment of gunicorn (before prometheus_client is imported)",
        "that directory emptied before each start (an earlier run's files would be added in)",
        "a /metrics endpoint in the app: a CollectorRegistry with a MultiProcessCollector at each scrape",
        "a gunicorn config file whose child_exit hook calls multiprocess.mark_process_dead(worker.pid)",
    ],
    "ringside": [
        "the bot attached at import (with --preload the workers are forks of the master: no code of their own)",
        "ringside-collector running on the ring directory (it serves /metrics)",
    ],
}

# The series each side's /metrics shows: the counter, the histogram's _count and _sum.
SERIES = {
    "prometheus_client": ("requests_total", "request_latency_seconds_count", "request_latency_seconds_sum"),
    "ringside": ('requests_total{ring="web"}', 'request_latency_seconds_count{ring="web"}',
                 'request_latency_seconds_sum{ring="web"}'),
}


def _started(arguments: list[str], listening: str,
             env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Starts a server logging on stderr; returns it, the address its log names, and its log (a
    list a thread keeps appending to)."""
    process = subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    log: list[str] = []
    address: list[str] = []
    found = threading.Event()

    def read_log() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            log.append(line.rstrip())
            match = re.search(listening, line)
            if match and not address:
                address.append(match.group(1))
                found.set()
        found.set()
    threading.Thread(target=read_log, daemon=True).start()
    if not found.wait(30) or not address:
        _stop(process)
        sys.exit(f"{arguments[0]} did not start:\n" + "\n".join(log))
    return process, address[0], log


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _get(url: str) -> str:
    """GETs `url`, tried again while a connection is refused or cut (a worker restarting)."""
    for attempt in range(20):
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode())
        except OSError:
            if attempt == 19:
                raise
            time.sleep(0.01)
    raise AssertionError("unreachable")


def _values(page: str, names: tuple[str, ...]) -> tuple[float, ...] | None:
    """The values of the series `names` (name and labels as the page writes them), or None
    before they are all there."""
    found: dict[str, float] = {}
    for line in page.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return tuple(found[name] for name in names) if all(name in found for name in names) else None


def _send(address: str, requests: int, clients: int) -> tuple[list[threading.Thread], list[str]]:
    """Starts `clients` threads sending `requests` GETs between them; returns them and a list of
    the requests that failed (after 20 tries each)."""
    failures: list[str] = []

    def client(share: int) -> None:
        for _ in range(share):
            try:
                if _get(address + "/") != "ok":
                    failures.append("not ok")
            except OSError as error:
                failures.append(repr(error))
    shares = [requests // clients + (1 if index < requests % clients else 0) for index in range(clients)]
    threads = [threading.Thread(target=client, args=(share,), daemon=True) for share in shares]
    for thread in threads:
        thread.start()
    return threads, failures


def run_side(side: str, collector: str, requests: int, clients: int) -> dict[str, Any]:
    """Runs gunicorn with `side`'s app while `requests` are sent, scraping its /metrics."""
    work = tempfile.mkdtemp(prefix=f"ringside-side-by-side-{side}.")
    shared = tempfile.mkdtemp(prefix=f"ringside-side-by-side-{side}.", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    environment = dict(os.environ)
    processes: list[subprocess.Popen[str]] = []
    try:
        arguments = [sys.executable, "-m", "gunicorn", *GUNICORN, "--bind", "127.0.0.1:0", "--chdir", work,
                     "--log-level", "info"]
        if side == "prometheus_client":
            shutil.rmtree(shared)  # emptied before the start
            os.mkdir(shared)
            environment["PROMETHEUS_MULTIPROC_DIR"] = shared
            with open(os.path.join(work, "app.py"), "w") as file:
                file.write(PROMETHEUS_APP)
            with open(os.path.join(work, "gunicorn_config.py"), "w") as file:
                file.write(PROMETHEUS_CONFIG)
            arguments += ["--config", os.path.join(work, "gunicorn_config.py")]
        else:
            with open(os.path.join(work, "app.py"), "w") as file:
                file.write(RINGSIDE_APP.format(directory=shared, worker=False))  # --preload
        gunicorn, address, log = _started(arguments + ["app:app"], r"Listening at: (http://[0-9.:]+)", environment)
        processes.append(gunicorn)
        if side == "ringside":
            reader, metrics, _ = _started([collector, "--dir", shared, "--listen", "127.0.0.1:0", "--poll", "10ms"],
                                       r"listening on (http://[0-9.:]+)")
            processes.append(reader)
        else:
            metrics = address
        threads, failures = _send(address, requests, clients)

        def scrape() -> tuple[float, ...] | None:
            started = time.perf_counter()
            page = _get(metrics + "/metrics")
            durations.append(time.perf_counter() - started)
            return _values(page, SERIES[side])

        durations: list[float] = []
        readings: list[tuple[float, ...]] = []
        while any(thread.is_alive() for thread in threads):
            seen = scrape()
            if seen is not None:
                readings.append(seen)
            time.sleep(0.02)
        final = scrape()
        # The collector drains within a poll or two; the counter (sampled from cells) and the
        # histogram's _count (drained from records) arrive apart, so both are waited for.
        deadline = time.monotonic() + 10
        while side == "ringside" and (final is None or min(final[0], final[1]) < requests) and time.monotonic() < deadline:
            time.sleep(0.05)
            final = scrape()
        resets = [sum(after[index] < before[index] for before, after in zip(readings, readings[1:])) for index in (0, 1)]

        def files() -> int:
            return len([name for name in os.listdir(shared) if name.endswith(".db") or name.startswith("ringside.")])
        # prometheus_client's files stay (mark_process_dead removes only live gauges' files); the
        # collector removes a dead worker's once it has drained it: left, the bot's and the live
        # workers' (4 at most).
        deadline = time.monotonic() + 10
        while side == "ringside" and files() > 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        return {
            "side": side, "requests": requests, "failed_requests": len(failures),
            "workers_started": sum("Booting worker" in line for line in log), "scrapes": len(readings),
            "counter_resets": resets[0], "count_resets": resets[1],
            "final_counter": final[0] if final else None, "final_count": final[1] if final else None,
            "final_sum": final[2] if final else None, "scrape_ms_median": 1000 * statistics.median(durations),
            "scrape_ms_last": 1000 * durations[-1], "files_left": files(), "setup": SETUP[side],
        }
    finally:
        for process in reversed(processes):
            _stop(process)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shared, ignore_errors=True)


def measure_cost(rounds: int, calls: int) -> list[dict[str, Any]]:
    """The cost of one observation of each library, in a process of its own (prometheus_client
    reads PROMETHEUS_MULTIPROC_DIR when it is imported)."""
    directory = tempfile.mkdtemp(prefix="ringside-side-by-side-cost.", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        os.mkdir(os.path.join(directory, "prometheus"))
        os.mkdir(os.path.join(directory, "ringside"))
        result = subprocess.run([sys.executable, __file__, "--cost-in-this-process", os.path.join(directory, "ringside"),
                                 "--rounds", str(rounds), "--calls", str(calls)], capture_output=True, text=True,
                                env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": os.path.join(directory, "prometheus")})
        if result.returncode != 0:
            sys.exit("the cost measurement failed:\n" + result.stderr)
        rows: list[dict[str, Any]] = json.loads(result.stdout)
        return rows
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _cost_in_this_process(directory: str, rounds: int, calls: int) -> list[dict[str, Any]]:
    """Each row times `calls` observations once per round, the rows interleaved, so that a machine
    that changes speed slows each alike; Ringside's lanes are drained between rounds, as the
    collector would (as `python -m ringside.bench` does)."""
    import prometheus_client
    from prometheus_client import values

    import ringside
    from ringside import _pure
    from ringside.bench import _drain, _extension

    if values.ValueClass is values.MutexValue:
        sys.exit("PROMETHEUS_MULTIPROC_DIR was not set when prometheus_client was imported")
    registry = prometheus_client.CollectorRegistry()
    counter = prometheus_client.Counter("requests", "Requests served", registry=registry)
    histogram = prometheus_client.Histogram("request_latency_seconds", "Request latency", registry=registry)
    loops: dict[str, tuple[Callable[[], object], Callable[[float], object]]] = {
        "prometheus_client multiprocess": (counter.inc, histogram.observe)}
    bots: list[ringside.Bot] = []
    extension = _extension()
    backends = ([("ringside (C extension)", extension)] if extension is not None else []) + [("ringside (pure Python)", _pure)]
    for label, backend in backends:
        bot = ringside.Bot(f"cost-{len(bots)}", directory, lane_capacity=1 << 20, _backend=backend)
        bots.append(bot)
        requests, latency = bot.counter("requests"), bot.histogram("request_latency", unit="s")
        requests.inc()  # the thread's lane claimed before timing
        latency.observe(0.001)
        loops[label] = (requests.inc, latency.observe)
    samples: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(rounds):
        for name, (inc, observe) in loops.items():
            for bot in bots:
                if bot.path is not None:  # None: disabled (RINGSIDE_DISABLED), nothing to drain
                    _drain(bot.path)
            samples[name].append(_loop(inc, observe, calls))
    dropped = sum(bot.records_dropped for bot in bots)
    for bot in bots:
        bot.close()
    baseline = samples["prometheus_client multiprocess"]
    return [{"row": name, "ns": statistics.median(samples[name]),
             "ratio": statistics.median([mine / theirs for mine, theirs in zip(samples[name], baseline)]),
             "dropped": dropped if name.startswith("ringside") else 0} for name in loops]


def _loop(inc: Callable[[], object], observe: Callable[[float], object], calls: int) -> float:
    """Nanoseconds per observation (one inc, one observe), loop included."""
    start = time.perf_counter_ns()
    for _ in range(calls):
        inc()
        observe(0.001)
    return (time.perf_counter_ns() - start) / calls


def _machine() -> dict[str, Any]:
    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), model)
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": model, "python": platform.python_version()}


def _shown(key: str, value: object) -> str:
    if value is None:
        return "none"
    if key == "final_sum":
        return format(value, ".17g")  # as it is: a sum of 0.001s in floating point, or exact
    if key.startswith("scrape_ms"):
        return f"{value:.1f}"
    return f"{value:,.0f}" if isinstance(value, (int, float)) else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--collector", help="ringside-collector (default $RINGSIDE_COLLECTOR, else the checkout's build)")
    parser.add_argument("--requests", type=int, default=10_000, help="requests sent to each side (default 10,000)")
    parser.add_argument("--clients", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the cost measurement (default 7)")
    parser.add_argument("--calls", type=int, default=100_000, help="observations per row per round (default 100,000)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    parser.add_argument("--cost-in-this-process", metavar="DIRECTORY", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if min(options.requests, options.clients, options.rounds, options.calls) < 1:
        parser.error("--requests, --clients, --rounds and --calls take a number from 1")
    if options.cost_in_this_process:
        print(json.dumps(_cost_in_this_process(options.cost_in_this_process, options.rounds, options.calls)))
        return 0
    collector = collector_path(options.collector)
    sides = [run_side(side, collector, options.requests, options.clients) for side in ("prometheus_client", "ringside")]
    cost = measure_cost(options.rounds, options.calls)
    report = {**_machine(), "gunicorn": " ".join(GUNICORN), "collector": collector, "requests": options.requests,
              "clients": options.clients, "rounds": options.rounds, "calls": options.calls, "sides": sides, "cost": cost}
    if options.json:
        print(json.dumps(report))
        return 0
    print(f"{report['cpus']} CPUs, {report['cpu']}; Python {report['python']}; gunicorn {report['gunicorn']}; "
          f"{options.requests:,} requests from {options.clients} clients")
    print(f"  {'':<34} {'prometheus_client':>20} {'ringside':>20}")
    rows = [("gunicorn workers started", "workers_started"), ("scrapes during the run", "scrapes"),
            ("scrapes: counter went back", "counter_resets"), ("scrapes: _count went back", "count_resets"),
            (f"final counter (of {options.requests:,})", "final_counter"), ("final _count", "final_count"),
            (f"final _sum (of {options.requests / 1000:g} s)", "final_sum"), ("requests that failed", "failed_requests"),
            ("scrape, median (ms)", "scrape_ms_median"), ("scrape, the last (ms)", "scrape_ms_last"),
            ("files left", "files_left")]
    for label, key in rows:
        shown = [_shown(key, side[key]) for side in sides]
        print(f"  {label:<34} {shown[0]:>20} {shown[1]:>20}")
    for side in sides:
        print(f"  setup, {side['side']}:")
        for step in side["setup"]:
            print(f"    - {step}")
    print(f"  one observation (counter inc + histogram observe), ns, median of {options.rounds} interleaved rounds "
          f"of {options.calls:,}, loop included; x prometheus_client's in the same round:")
    for row in cost:
        print(f"    {row['row']:<34} {row['ns']:8.1f}  x{row['ratio']:.3g} (1/{1 / row['ratio']:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
