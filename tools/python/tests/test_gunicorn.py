"""A real gunicorn service whose workers recycle all the time (--max-requests): its workers write
one bot, the collector's counters never go back while they come and go, and every request is
counted exactly once. With --preload the bot is attached in the master and the workers are its
forks; without it each worker attaches the bot itself, as a worker. In a third run the collector
is stopped halfway and started again: the totals are still exact at the end."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import pytest

from conftest import Collector, _collector_path, find_series, missing

APP = """
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

REQUESTS = 10_000
CLIENTS = 4


def start_gunicorn(app_directory, preload):
    try:
        import gunicorn  # noqa: F401
    except ImportError:
        missing("gunicorn is not installed (pip install gunicorn)")
    arguments = [sys.executable, "-m", "gunicorn", "--workers", "4", "--max-requests", "50", "--max-requests-jitter", "10",
                 "--bind", "127.0.0.1:0", "--chdir", app_directory, "--log-level", "info"]
    process = subprocess.Popen(arguments + (["--preload"] if preload else []) + ["app:app"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = []
    found = threading.Event()
    address = []

    def read_log():
        for line in process.stderr:
            log.append(line.rstrip())
            match = re.search(r"Listening at: (http://[0-9.:]+)", line)
            if match:
                address.append(match.group(1))
                found.set()
        found.set()
    threading.Thread(target=read_log, daemon=True).start()
    if not found.wait(30) or not address:
        process.kill()
        process.wait()
        raise AssertionError("gunicorn did not start: " + "\n".join(log))
    return process, address[0], log


@pytest.mark.parametrize("preload, restart", [(True, False), (False, False), (True, True)],
                         ids=["preload", "no-preload", "collector-restarted"])
def test_recycling_gunicorn_workers_count_every_request_once_and_never_go_back(ring_dir, collector, preload, restart):
    app_directory = tempfile.mkdtemp(prefix="ringside-gunicorn.")
    with open(os.path.join(app_directory, "app.py"), "w") as file:
        file.write(APP.format(directory=ring_dir, worker=not preload))
    process, address, log = start_gunicorn(app_directory, preload)
    try:
        # The clients send every request; meanwhile the collector is read again and again.
        sent = []
        failures = []
        progress = [0] * CLIENTS

        def client(index, share):
            done = 0
            for _ in range(share):
                for attempt in range(20):  # a worker restarting may refuse a connection for a moment
                    try:
                        with urllib.request.urlopen(address + "/", timeout=10) as response:
                            assert response.read() == b"ok"
                        done += 1
                        progress[index] = done
                        break
                    except OSError as error:
                        if attempt == 19:
                            failures.append(repr(error))
                        time.sleep(0.01)
            sent.append(done)

        clients = [threading.Thread(target=client, args=(index, REQUESTS // CLIENTS)) for index in range(CLIENTS)]
        for thread in clients:
            thread.start()
        runs = [[]]  # the readings of each collector's run
        while any(thread.is_alive() for thread in clients):
            if restart and len(runs) == 1 and sum(progress) >= REQUESTS // 2:
                # Stopped (SIGTERM: it saves what it keeps), then started again on the same rings.
                collector.stop()
                collector = Collector(_collector_path(), ring_dir)
                runs.append([])
            latest = collector.latest()
            requests = find_series(latest, "web", "requests")
            latency = find_series(latest, "web", "request_latency")
            if requests and latency:
                runs[-1].append((requests["total"], latency["total_count"], float(latency["total_sum"])))
            time.sleep(0.02)
        for thread in clients:
            thread.join()
        assert not failures, failures[:3]
        assert sum(sent) == REQUESTS

        final = collector.wait_for("every request, counted once", lambda: (
            (latest := collector.latest())
            and (requests := find_series(latest, "web", "requests")) and requests["total"] == REQUESTS
            and (latency := find_series(latest, "web", "request_latency")) and latency["total_count"] == REQUESTS
            and latency), timeout=60)
        assert int(final["total_sum"]) == REQUESTS * 1_000_000  # 1 ms each, stored in nanoseconds
        assert sum(len(readings) for readings in runs) >= 100, f"{[len(readings) for readings in runs]} readings"
        assert len(runs) == (2 if restart else 1)
        for readings in runs:
            for before, after in zip(readings, readings[1:]):
                assert all(b <= a for b, a in zip(before, after)), f"went back: {before} then {after}"
        recycled = sum("Autorestarting worker" in line or "Booting worker" in line for line in log)
        assert recycled > 8, "the workers recycled: " + "\n".join(log[-5:])
    finally:
        collector.stop()
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(app_directory, ignore_errors=True)
