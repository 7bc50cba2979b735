"""A real gunicorn service whose workers recycle all the time (--max-requests): its workers write
one bot, the collector's counters never go back while they come and go, and every request is
counted exactly once. With --preload the bot is attached in the master and the workers are its
forks; without it each worker attaches the bot itself, as a worker. In a third run the collector
is stopped halfway and started again: the totals are still exact at the end."""

import os
import sys
import tempfile
import time

import pytest

from conftest import Collector, _collector_path, missing
from multiprocess_side_by_side import RINGSIDE_APP
from serving import Clients, assert_each_request_counted_once, assert_never_back, reading, start_server, tear_down

REQUESTS = 10_000
CLIENTS = 4


def start_gunicorn(app_directory, preload):
    try:
        import gunicorn  # noqa: F401
    except ImportError:
        missing("gunicorn is not installed (pip install gunicorn)")
    arguments = [sys.executable, "-m", "gunicorn", "--workers", "4", "--max-requests", "50", "--max-requests-jitter", "10",
                 "--bind", "127.0.0.1:0", "--chdir", app_directory, "--log-level", "info"]
    return start_server(arguments + (["--preload"] if preload else []) + ["app:app"], r"Listening at: (http://[0-9.:]+)",
                        "gunicorn")


@pytest.mark.parametrize("preload, restart", [(True, False), (False, False), (True, True)],
                         ids=["preload", "no-preload", "collector-restarted"])
def test_recycling_gunicorn_workers_count_every_request_once_and_never_go_back(ring_dir, collector, preload, restart):
    app_directory = tempfile.mkdtemp(prefix="ringside-gunicorn.")
    with open(os.path.join(app_directory, "app.py"), "w") as file:
        file.write(RINGSIDE_APP.format(directory=ring_dir, worker=not preload))
    process, address, log = start_gunicorn(app_directory, preload)
    clients = None
    try:
        # The clients send every request; meanwhile the collector is read again and again.
        clients = Clients(address, REQUESTS, CLIENTS)
        runs = [[]]  # the readings of each collector's run
        while clients.running():
            if restart and len(runs) == 1 and clients.done() >= REQUESTS // 2:
                # Stopped (SIGTERM: it saves what it keeps), then started again on the same rings.
                collector.stop()
                collector = Collector(_collector_path(), ring_dir)
                runs.append([])
            latest = reading(collector.latest(), "web", "requests", "request_latency")
            if latest:
                runs[-1].append(latest)
            time.sleep(0.02)
        assert clients.join() == REQUESTS

        assert_each_request_counted_once(collector, REQUESTS)
        assert sum(len(readings) for readings in runs) >= 100, f"{[len(readings) for readings in runs]} readings"
        assert len(runs) == (2 if restart else 1)
        for readings in runs:
            assert_never_back(readings)
        recycled = sum("Autorestarting worker" in line or "Booting worker" in line for line in log)
        assert recycled > 8, "the workers recycled: " + "\n".join(log[-5:])
    finally:
        tear_down(clients, collector, process, app_directory)
