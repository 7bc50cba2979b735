"""What the tests of real web servers whose workers recycle (test_gunicorn.py, test_uvicorn.py)
share: the server started and its address read from its log, the client threads that send every
request, the bot's readings taken from /latest, the check that they never go back, and the
server stopped."""

import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.request

from conftest import find_series


def start_server(arguments, listening, what, ready=None, timeout=30):
    """Starts `arguments` (a server logging on stderr) and waits for the line matching `listening`,
    whose first group is its address, and then for one matching `ready` if given. Returns the
    process, the address and its log so far (a list a thread keeps appending to)."""
    # A session of its own: whatever it leaves behind is ended with it (stop_server).
    process = subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    log = []
    found = threading.Event()
    address = []

    def read_log():
        for line in process.stderr:
            log.append(line.rstrip())
            match = re.search(listening, line)
            if match and not address:
                address.append(match.group(1))
            if address and (ready is None or re.search(ready, line)):
                found.set()
        found.set()
    threading.Thread(target=read_log, daemon=True).start()
    if not found.wait(timeout) or not address or process.poll() is not None:
        stop_server(process)
        raise AssertionError(f"{what} did not start: " + "\n".join(log))
    return process, address[0], log


def stop_server(process, timeout=20):
    """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds; then SIGKILL to what is
    left of its process group (workers it did not end)."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # nothing left


class Clients:
    """`clients` threads sending `total` GETs of `address`/ between them, each expecting "ok"; a
    refused or cut connection (a worker restarting) is tried again, up to 20 times. `timeout`
    (seconds) bounds each wait for an answer: longer than any moment the server has no worker to
    take a connection, so that a request is never sent again while the first still waits in the
    socket's backlog to be served (and counted). A test stops them (stop()) in its `finally`, so
    that a failure does not leave them sending."""

    def __init__(self, address, total, clients, timeout=10):
        assert total % clients == 0, f"{total} requests do not share out among {clients} clients"
        self.sent = []
        self.failures = []
        self.progress = [0] * clients
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self._client, args=(address, index, total // clients, timeout), daemon=True)
                        for index in range(clients)]
        for thread in self.threads:
            thread.start()

    def _client(self, address, index, share, timeout):
        done = 0
        for _ in range(share):
            if self.stopped.is_set():
                break
            for attempt in range(20):
                try:
                    with urllib.request.urlopen(address + "/", timeout=timeout) as response:
                        assert response.read() == b"ok"
                    done += 1
                    self.progress[index] = done
                    break
                except OSError as error:
                    if attempt == 19:
                        self.failures.append(repr(error))
                    time.sleep(0.01)
        self.sent.append(done)

    def running(self):
        return any(thread.is_alive() for thread in self.threads)

    def done(self):
        """How many requests were answered so far."""
        return sum(self.progress)

    def stop(self):
        self.stopped.set()
        for thread in self.threads:
            thread.join()

    def join(self):
        """Waits for every client; returns how many requests were answered, failing on any that was not."""
        for thread in self.threads:
            thread.join()
        assert not self.failures, self.failures[:3]
        return sum(self.sent)


def reading(latest, bot, counter, histogram):
    """(the counter's total, the histogram's count, its sum) of one /latest page, or None before
    both series are there."""
    total = find_series(latest, bot, counter)
    observed = find_series(latest, bot, histogram)
    if not (total and observed):
        return None
    return total["total"], observed["total_count"], float(observed["total_sum"])


def assert_never_back(readings):
    """Each reading (a tuple of totals) is at least the one before it, item by item."""
    for before, after in zip(readings, readings[1:]):
        assert all(b <= a for b, a in zip(before, after)), f"went back: {before} then {after}"


def wait_for_exact(collector, bot, counter, histogram, n, timeout=60):
    """Waits until the counter's total and the histogram's count are exactly n; returns the
    histogram's series. A failure names the last (total, count, sum) seen."""
    last = []

    def exact():
        latest = collector.latest()
        last[:] = [reading(latest, bot, counter, histogram)]
        return last[0] and last[0][:2] == (n, n) and find_series(latest, bot, histogram)
    try:
        return collector.wait_for(f"every one of {n} records, counted once", exact, timeout=timeout)
    except AssertionError as error:
        raise AssertionError(f"{error}: the last (total, count, sum) was {last[0]}") from None


def assert_each_request_counted_once(collector, requests):
    """The web bot's exact totals, once the collector has them all: each request counted once, its
    latency of 1 ms in the sum (stored in nanoseconds)."""
    final = wait_for_exact(collector, "web", "requests", "request_latency", requests)
    assert int(final["total_sum"]) == requests * 1_000_000


def tear_down(clients, collector, process, app_directory):
    """Stops what a served run started, whether it passed or not: the clients, the collector, the
    server and its app's folder."""
    if clients is not None:
        clients.stop()
    collector.stop()
    stop_server(process)
    shutil.rmtree(app_directory, ignore_errors=True)
