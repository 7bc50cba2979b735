"""Fixtures of ringside's Python suite: the real collector binary, ring directories of each
test's own under /dev/shm, and both backends (the C extension and the pure module).

RINGSIDE_COLLECTOR names the collector binary; else the package's build folder is searched
(.build/debug, then .build/release, from `swift build`). Without it the tests that need it skip,
or fail under CI=true, as do the C extension's tests when the extension was not built."""

import json
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

import ringside
from ringside import _pure

try:
    from ringside import _ringside
except ImportError:
    _ringside = None

REPOSITORY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
IN_CI = os.environ.get("CI", "").lower() == "true"


def missing(what):
    """Fails under CI=true, else skips, saying what is missing."""
    if IN_CI:
        pytest.fail(f"{what} (CI=true: the suite needs it)")
    pytest.skip(what)


def pytest_report_header(config):
    return [f"ringside {ringside.__version__} from {os.path.dirname(ringside.__file__)}; "
            f"C extension {'built' if _ringside is not None else 'NOT built'}; collector {_collector_path() or 'not found'}"]


def _collector_path():
    named = os.environ.get("RINGSIDE_COLLECTOR")
    if named:
        return named if os.access(named, os.X_OK) else None
    for configuration in ("debug", "release"):
        candidate = os.path.join(REPOSITORY, ".build", configuration, "ringside-collector")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(params=["extension", "pure"])
def backend(request):
    """Each test that takes it runs on both backends."""
    if request.param == "pure":
        return _pure
    if _ringside is None:
        missing("the C extension ringside._ringside is not built (pip install ./tools/python with a C compiler and Python.h)")
    return _ringside


@pytest.fixture
def ring_dir():
    directory = tempfile.mkdtemp(prefix="ringside-pytest.", dir="/dev/shm")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def find_series(latest, ring, metric, **labels):
    """The series of `metric` with exactly `labels` in ring `ring` of one /latest page, or None.
    A condition on several series reads them from one page: pages fetched one after another may
    be of different passes (a series seen before its records and another after them)."""
    for entry in latest["series"]:
        if entry["ring"] == ring and entry["metric"] == metric and entry["labels"] == labels:
            return entry
    return None


class Collector:
    """A ringside-collector process draining one directory, and its HTTP endpoints."""

    def __init__(self, binary, directory, *arguments):
        self.process = subprocess.Popen([binary, "--dir", directory, "--listen", "127.0.0.1:0", "--poll", "10ms", *arguments],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        self.address = None
        ready = threading.Event()

        def read_log():
            for line in self.process.stderr:
                self.log.append(line.rstrip())
                found = re.search(r"listening on (http://[0-9.:]+)", line)
                if found:
                    self.address = found.group(1)
                    ready.set()
            ready.set()
        threading.Thread(target=read_log, daemon=True).start()
        if not ready.wait(30) or self.address is None:
            self.stop()
            raise AssertionError("the collector did not start: " + "\n".join(self.log))

    def get(self, path):
        with urllib.request.urlopen(self.address + path, timeout=10) as response:
            return response.read().decode()

    def latest(self):
        return json.loads(self.get("/latest"))

    def series(self, ring, metric, **labels):
        """The /latest series of `metric` with exactly `labels` in ring `ring`, or None."""
        return find_series(self.latest(), ring, metric, **labels)

    def wait_for(self, what, condition, timeout=20):
        """Polls condition() until it returns something true; fails saying `what` otherwise."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = condition()
            if last:
                return last
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; last saw {last!r}")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def collector(ring_dir):
    binary = _collector_path()
    if binary is None:
        missing("ringside-collector is not built: run `swift build` or set RINGSIDE_COLLECTOR")
    running = Collector(binary, ring_dir)
    yield running
    running.stop()


def run_python(code, env=None, timeout=60):
    """Runs `code` in a new interpreter with this one's ringside; returns the CompletedProcess."""
    environment = dict(os.environ)
    environment.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=environment)
