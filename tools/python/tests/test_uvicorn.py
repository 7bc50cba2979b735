"""A real uvicorn serving an ASGI app with workers that recycle: `uvicorn --workers 4
--limit-max-requests N --limit-max-requests-jitter J`. Each worker exits after its N to N + J
requests, and uvicorn's multiprocess supervisor (uvicorn.supervisors.multiprocess: each half
second it checks its workers, and starts a new one in the place of one that exited other than
failing to start) starts another. Its workers are started by spawn, fresh interpreters that
import the app: each attaches the bot by name, as a worker (`worker=True`). The collector's
counters never go back while they come and go, and every request is counted exactly once.

The workers share the requests evenly, so they reach their limit at about the same moment, and
their successors take a second or more to start: for a while the bot has no file at all, and the
collector keeps its histograms then (test_process.py tests that alone)."""

import inspect
import os
import re
import sys
import tempfile
import time

from conftest import missing
from serving import Clients, assert_each_request_counted_once, assert_never_back, reading, start_server, tear_down

APP = """
import ringside
bot = ringside.attach("web", directory={directory!r}, worker=True)
requests = bot.counter("requests")
latency = bot.histogram("request_latency", unit="s")


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({{"type": "lifespan.startup.complete"}})
            elif message["type"] == "lifespan.shutdown":
                await send({{"type": "lifespan.shutdown.complete"}})
                return
    requests.inc()
    latency.observe(0.001)
    await send({{"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2"), (b"connection", b"close")]}})
    await send({{"type": "http.response.body", "body": b"ok"}})
"""

REQUESTS = 10_000
CLIENTS = 4
WORKERS = 4
# Each worker serves 400 to 500 requests: about 20 new workers over the run. A spawned worker is a
# new interpreter (uvicorn, asyncio and the app imported again, about a second of this 2-core
# machine when it is busy), so fewer requests per worker would spend the run starting workers.
LIMIT, JITTER = 400, 100


def start_uvicorn(app_directory):
    try:
        import uvicorn
        from uvicorn.supervisors.multiprocess import Multiprocess
    except ImportError:
        missing("uvicorn is not installed (pip install uvicorn)")
    if not (hasattr(Multiprocess, "keep_subprocess_alive")
            and "limit_max_requests_jitter" in inspect.signature(uvicorn.Config).parameters):
        missing(f"uvicorn {uvicorn.__version__} does not start a worker in the place of one that exited, or has no "
                "--limit-max-requests-jitter (pip install --upgrade uvicorn)")
    arguments = [sys.executable, "-m", "uvicorn", "--workers", str(WORKERS), "--limit-max-requests", str(LIMIT),
                 "--limit-max-requests-jitter", str(JITTER), "--host", "127.0.0.1", "--port", "0",
                 "--app-dir", app_directory, "--no-access-log", "--log-level", "info", "app:app"]
    # Its socket listens once a worker has started (the supervisor binds it; a worker listens).
    return start_server(arguments, r"Uvicorn running on (http://[0-9.:]+)", "uvicorn", ready="Application startup complete")


def test_recycling_uvicorn_workers_count_every_request_once_and_never_go_back(ring_dir, collector):
    app_directory = tempfile.mkdtemp(prefix="ringside-uvicorn.")
    with open(os.path.join(app_directory, "app.py"), "w") as file:
        file.write(APP.format(directory=ring_dir))
    process, address, log = start_uvicorn(app_directory)
    clients = None
    try:
        # uvicorn may have no worker for seconds (all at their limit at once, and the new ones are
        # new interpreters): the clients wait for their answers (in the socket's backlog) meanwhile.
        clients = Clients(address, REQUESTS, CLIENTS, timeout=120)
        readings = []
        files = set()  # the worker pids of the bot's files /latest listed
        while clients.running():
            latest = collector.latest()
            files |= {ring["worker_pid"] for ring in latest["rings"] if ring["bot"] == "web" and "worker_pid" in ring}
            seen = reading(latest, "web", "requests", "request_latency")
            if seen:
                readings.append(seen)
            time.sleep(0.02)
        assert clients.join() == REQUESTS

        assert_each_request_counted_once(collector, REQUESTS)
        assert len(readings) >= 100, f"{len(readings)} readings"
        assert_never_back(readings)

        # The workers recycled: uvicorn started new ones in the place of those that reached their
        # limit, and each wrote a file of its own.
        started = {int(pid) for line in log for pid in re.findall(r"Started server process \[([0-9]+)\]", line)}
        died = [line for line in log if re.search(r"Child process \[[0-9]+\] died", line)]
        limits = [line for line in log if "Maximum request limit of" in line]
        tail = "\n".join(log[-10:])
        assert len(limits) >= REQUESTS // (2 * (LIMIT + JITTER)), tail  # (a worker may serve a few past its limit)
        assert len(died) >= len(limits) - WORKERS, tail  # uvicorn may not have seen the last exits yet
        assert len(started) >= len(died), tail
        assert files <= started and len(files) > WORKERS, (sorted(files), sorted(started))
    finally:
        tear_down(clients, collector, process, app_directory)
