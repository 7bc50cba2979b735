"""The OTLP tests' peers, shared by test_otlp and test_otlp_tls through conftest's pytest_plugins:
a receiver that decodes what the collector pushes, a bot with known values, and fixtures that
close what a test made."""

import gzip
import http.server
import os
import threading

import pytest

import ringside
from conftest import Collector, _collector_path, missing

try:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
except ImportError:
    ExportMetricsServiceRequest = None

class Receiver:
    """An OTLP/HTTP receiver on an ephemeral port: each POST's path, headers and decoded request,
    answered as `answer(number)` says: (status, headers, body), or None to hang (never answer).
    With `tls` (an ssl.SSLContext of the server's), it speaks HTTPS; each request's headers then
    hold the client certificate's subject, if any, as `X-Test-Client-Subject`."""

    def __init__(self, answer=lambda number: (200, {}, b""), tls=None):
        self.requests = []  # (path, headers, ExportMetricsServiceRequest, status answered or None)
        self.lock = threading.Lock()
        self.release = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportMetricsServiceRequest.FromString(gzip.decompress(body))
                headers = dict(self.headers)
                if tls is not None:
                    peer = self.connection.getpeercert()
                    headers["X-Test-Client-Subject"] = peer and dict(pair[0] for pair in peer["subject"]).get("commonName")
                with receiver.lock:
                    number = len(receiver.requests)
                    reply = answer(number)
                    receiver.requests.append((self.path, headers, request, reply and reply[0]))
                if reply is None:
                    receiver.release.wait()
                    self.close_connection = True
                    return
                status, headers, payload = reply
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *arguments):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def taken(self):
        """The requests answered with a 2xx, in the order they came."""
        with self.lock:
            return [entry for entry in self.requests if entry[3] is not None and 200 <= entry[3] < 300]

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _made_for_the_test(make, end):
    """Yields a function that calls `make` and keeps what it made; at the test's end, `end` on each."""
    made = []

    def keep(*arguments, **keywords):
        made.append(make(*arguments, **keywords))
        return made[-1]
    yield keep
    for thing in made:
        end(thing)


@pytest.fixture
def receivers():
    if ExportMetricsServiceRequest is None:
        missing("the opentelemetry-proto package is not installed (pip install opentelemetry-proto)")

    def make(answer=lambda number: (200, {}, b""), tls=None):
        return Receiver(answer, tls)
    yield from _made_for_the_test(make, Receiver.close)


@pytest.fixture
def bots(ring_dir):
    """produce(name) for the test, each bot closed at its end."""
    yield from _made_for_the_test(lambda name: produce(ring_dir, name), lambda bot: bot.close())


@pytest.fixture
def start_collector(ring_dir):
    binary = _collector_path()
    if binary is None:
        missing("ringside-collector is not built: run `swift build` or set RINGSIDE_COLLECTOR")
    yield from _made_for_the_test(lambda *arguments: Collector(binary, ring_dir, *arguments), Collector.stop)


LATENCIES = [700, 900, 1_500, 2_047, 40_000, 41_000, 250_000, 3_000_000]  # ns
SIZES = [0, 0, 3, 100, 4_096, 70_000]  # bytes


def produce(ring_dir, name):
    """A bot with known values: histograms in ns and bytes (two zeros), an exemplar with a trace
    id, a counter, gauges (one per worker, so labelled with this process's pid). Kept open, so its
    series stay while the test reads them; closed at the test's end."""
    bot = ringside.Bot(name, ring_dir)
    latency = bot.histogram("fill_latency", unit="ns", labelnames=("venue",), help="Order to fill")
    for value in LATENCIES:
        latency.labels(venue="X").observe(value)
    latency.labels(venue="Y").observe(5_000, exemplar={"trace_id": "0af7651916cd43dd8448eb211c80319c", "order": "42"})
    sizes = bot.histogram("payload", unit="bytes")
    for value in SIZES:
        sizes.observe(value)
    orders = bot.counter("orders", labelnames=("side",))
    orders.labels(side="buy").inc(7)
    orders.labels(side="sell").inc(3)
    bot.gauge("exposure").set(1250.5)
    bot.gauge("in_flight", merge="per_worker").set(4)
    bot.gauge("never_set")
    return bot


def wait_for_totals(collector, name):
    """Until /latest shows every series produce() wrote whole: the histograms' records are drained
    as they come, the counters' and gauges' cells sampled apart (a gauge set last may show a
    snapshot later)."""
    def whole():
        latency, payload = collector.series(name, "fill_latency", venue="X"), collector.series(name, "payload")
        sold, exposure = collector.series(name, "orders", side="sell"), collector.series(name, "exposure")
        in_flight = collector.series(name, "in_flight", pid=str(os.getpid()))
        return (latency and latency["total_count"] == len(LATENCIES) and payload and payload["total_count"] == len(SIZES)
                and sold and sold["total"] == 3 and exposure and exposure.get("value") == 1250.5
                and in_flight and in_flight.get("value") == 4)
    collector.wait_for("the bot's records and cells", whole)
