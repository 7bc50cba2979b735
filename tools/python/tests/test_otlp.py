"""--otlp-endpoint: what the collector pushes, decoded by OpenTelemetry's own protobuf package
(PyPI's `opentelemetry-proto`) in a receiver this test runs, is what /latest says, series by
series; and a receiver that answers 503, refuses, hangs, or answers without end (interim
responses, trailers, a byte at a time) costs the collector nothing but counted retries, failures
and drops, and never holds its stop."""

import math
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from otlp_peer import LATENCIES, SIZES, wait_for_totals

try:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality
    CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
except ImportError:
    ExportMetricsServiceRequest = None

SCALE = 5  # the collector's without --native-histograms (docs/otlp.md)
NANOS = 1e9  # a second's; values in ns are divided by it, as the collector does


def attributes(key_values):
    """KeyValues as a dict of their string (or int) values."""
    return {kv.key: kv.value.string_value if kv.value.HasField("string_value") else kv.value.int_value for kv in key_values}


def otlp_index(value_in_seconds):
    """The OTLP bucket of a value at SCALE: i with base^i < value <= base^(i+1), base = 2^(2^-SCALE)."""
    position = math.log2(value_in_seconds) * 2**SCALE
    assert abs(position - round(position)) > 1e-6, f"{value_in_seconds} is on a bucket's boundary: pick another"
    return math.ceil(position) - 1


def ringside_midpoint(value):
    """The value Ringside reports for `value`'s bucket (its midpoint; values below 1024 exactly)."""
    octave = max(0, value.bit_length() - 10)
    return (value >> octave << octave) + ((1 << octave) >> 1)


def expected_buckets(values, per_base):
    """(zero count, {OTLP index: count}) of `values`, whole numbers of a unit `per_base` to the base unit."""
    zeros, counts = 0, {}
    for value in values:
        if value == 0:
            zeros += 1
        else:
            index = otlp_index(ringside_midpoint(value) / per_base)
            counts[index] = counts.get(index, 0) + 1
    return zeros, counts


def data_points(request):
    """Every data point of a request by (service.name, metric name, attributes as sorted pairs):
    (resource attributes, Metric, data point)."""
    points = {}
    for resource_metrics in request.resource_metrics:
        resource = attributes(resource_metrics.resource.attributes)
        for scope_metrics in resource_metrics.scope_metrics:
            assert scope_metrics.scope.name == "ringside"
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                for point in getattr(metric, kind).data_points:
                    key = (resource["service.name"], metric.name, tuple(sorted(attributes(point.attributes).items())))
                    assert key not in points, f"{key} twice in one request"
                    points[key] = (resource, metric, point)
    return points




def test_every_series_count_sum_and_bucket_is_what_latest_says(bots, receivers, start_collector):
    receiver = receivers()
    collector = start_collector("--otlp-endpoint", receiver.url, "--otlp-interval", "200ms", "--otlp-header", "X-Tenant=desk=7")
    bots("otlpbot")
    wait_for_totals(collector, "otlpbot")
    latest = collector.latest()
    generated = latest["generated_at"]
    # An export made after that page: the bot writes nothing more, so its values are the page's.
    count = len(receiver.taken())
    collector.wait_for("an export after /latest", lambda: len(receiver.taken()) > count + 1)
    path, headers, request, _ = receiver.taken()[-1]
    assert path == "/v1/metrics"
    assert headers["Content-Type"] == "application/x-protobuf" and headers["Content-Encoding"] == "gzip"
    assert headers["X-Tenant"] == "desk=7"
    points = data_points(request)
    assert latest["generated_at"] == generated

    want = set()
    for series in latest["series"]:
        labels = tuple(sorted(series["labels"].items()))
        key = (series["ring"], series["metric"], labels)
        if series["kind"] == "gauge" and series["value"] is None:
            assert key not in points, f"{key}: a gauge never set has no data point"
            continue
        want.add(key)
        resource, metric, point = points[key]
        assert resource["host.name"] == socket.gethostname() and resource["service.instance.id"] == socket.gethostname()
        assert point.time_unix_nano > 0
        if series["kind"] == "histogram":
            per_base = NANOS if series["unit"] == "ns" else 1
            assert metric.unit == ("s" if series["unit"] == "ns" else "By")
            assert metric.exponential_histogram.aggregation_temporality == CUMULATIVE
            assert point.count == series["total_count"], key
            assert point.sum == pytest.approx(series["total_sum"] / per_base, rel=1e-12), key
            assert point.scale == SCALE
            assert 0 < point.start_time_unix_nano <= point.time_unix_nano
            buckets = {point.positive.offset + i: c for i, c in enumerate(point.positive.bucket_counts) if c}
            assert point.zero_count + sum(buckets.values()) == point.count, key
        elif series["kind"] == "counter":
            assert metric.sum.is_monotonic
            assert metric.sum.aggregation_temporality == CUMULATIVE
            assert point.as_int == series["total"], key
            assert 0 < point.start_time_unix_nano <= point.time_unix_nano
        else:
            assert point.as_double == series["value"], key
    assert set(points) == want, "the export's series are not /latest's"

    # The known values, bucket by bucket, as the mapping places them (docs/otlp.md).
    _, metric, point = points[("otlpbot", "fill_latency", (("venue", "X"),))]
    assert metric.description == "Order to fill"
    zeros, counts = expected_buckets(LATENCIES, NANOS)
    assert point.zero_count == zeros == 0
    assert {point.positive.offset + i: c for i, c in enumerate(point.positive.bucket_counts) if c} == counts
    assert point.min == min(LATENCIES) / NANOS and point.max == max(LATENCIES) / NANOS
    _, _, point = points[("otlpbot", "payload", ())]
    zeros, counts = expected_buckets(SIZES, 1)
    assert point.zero_count == zeros == 2 and point.zero_threshold > 0
    assert {point.positive.offset + i: c for i, c in enumerate(point.positive.bucket_counts) if c} == counts
    assert (point.min, point.max) == (0, max(SIZES))
    # The exemplar: its trace id in the field of its own, the rest as attributes.
    _, _, point = points[("otlpbot", "fill_latency", (("venue", "Y"),))]
    assert [bytes(e.trace_id).hex() for e in point.exemplars] == ["0af7651916cd43dd8448eb211c80319c"]
    assert attributes(point.exemplars[0].filtered_attributes) == {"order": "42"}
    assert point.exemplars[0].as_double == 5_000 / NANOS
    # A per-worker gauge's series is its process's: the resource says which.
    resource, _, _ = points[("otlpbot", "in_flight", (("pid", str(os.getpid())),))]
    assert resource["process.pid"] == os.getpid()
    resource, _, _ = points[("otlpbot", "exposure", ())]
    assert "process.pid" not in resource

    otlp = collector.latest()["collector"]["otlp"]
    assert otlp["exports_sent"] >= len(receiver.taken()) - 1 and otlp["exports_failed"] == otlp["exports_dropped"] == 0
    assert 'ringside_otlp_exports_total{result="sent"}' in collector.get("/metrics")


def test_a_receiver_that_answers_503_loses_nothing_the_queue_holds(bots, receivers, start_collector):
    # The first 4 attempts: 503 with Retry-After: 1; then every export is taken.
    receiver = receivers(lambda number: (503, {"Retry-After": "1"}, b"overloaded\n") if number < 4 else (200, {}, b""))
    collector = start_collector("--otlp-endpoint", receiver.url, "--otlp-interval", "200ms")
    bots("retrybot")
    wait_for_totals(collector, "retrybot")
    collector.wait_for("exports taken after the 503s", lambda: len(receiver.taken()) >= 3)
    otlp = collector.latest()["collector"]["otlp"]
    assert otlp["retries"] >= 4 and otlp["exports_dropped"] == 0 and otlp["exports_failed"] == 0
    # Every export made was sent (none dropped), oldest first: their times only increase.
    times = [data_points(request)[("retrybot", "orders", (("side", "buy"),))][2].time_unix_nano
             for _, _, request, _ in receiver.taken() if ("retrybot", "orders", (("side", "buy"),)) in data_points(request)]
    assert times == sorted(times) and len(set(times)) == len(times)
    first_taken = [entry[3] for entry in receiver.requests].index(200)
    # The export refused first is the first taken: it waited at the head of the queue.
    assert receiver.requests[0][2] == receiver.requests[first_taken][2]
    collector.wait_for("the recovery logged", lambda: any("exports are sent again" in line for line in collector.log))
    failing = [line for line in collector.log if "exports fail: HTTP 503" in line]
    assert len(failing) == 1, collector.log  # once per change of state, not per attempt
    assert "overloaded" in failing[0]
    assert 'ringside_otlp_retries_total' in collector.get("/metrics")


def test_a_receiver_that_refuses_an_export_is_not_asked_again(bots, receivers, start_collector):
    receiver = receivers(lambda number: (400, {"Content-Type": "text/plain"}, b"bad metric name\nsecond line\n"))
    collector = start_collector("--otlp-endpoint", receiver.url, "--otlp-interval", "200ms")
    bots("refusedbot")
    otlp = collector.wait_for("two failed exports", lambda: (
        (o := collector.latest()["collector"].get("otlp")) and o["exports_failed"] >= 2 and o))
    assert otlp["retries"] == 0 and otlp["exports_sent"] == 0 and otlp["failing"]
    assert otlp["last_error"] == "HTTP 400 Bad Request: bad metric name"
    refused = [line for line in collector.log if "refused an export" in line]
    assert len(refused) == 1 and "bad metric name" in refused[0] and "second line" not in refused[0], collector.log


def test_a_receiver_that_hangs_costs_timeouts_and_drops_not_the_drain(bots, receivers, start_collector):
    receiver = receivers(lambda number: None)  # accepts, reads, never answers
    collector = start_collector("--otlp-endpoint", receiver.url, "--otlp-interval", "100ms", "--otlp-timeout", "300ms")
    bot = bots("hangbot")
    collector.wait_for("an export to hang", lambda: receiver.requests)
    # The drain and the HTTP server go on: records written now are drained and served.
    latency = bot.histogram("fill_latency", unit="ns", labelnames=("venue",), help="Order to fill").labels(venue="X")
    for value in LATENCIES:
        latency.observe(value)
    collector.wait_for("the records written while the receiver hangs", lambda: (
        (s := collector.series("hangbot", "fill_latency", venue="X")) and s["total_count"] == 2 * len(LATENCIES)))
    assert "ringside_otlp_timeouts_total" in collector.get("/metrics")
    # Attempts time out and are counted; the queue fills (30 exports, 3 s at 100ms) and drops the oldest.
    otlp = collector.wait_for("timeouts and drops", lambda: (
        (o := collector.latest()["collector"].get("otlp")) and o["timeouts"] >= 2 and o["exports_dropped"] >= 1 and o),
        timeout=30)
    assert otlp["retries"] >= otlp["timeouts"] and otlp["exports_sent"] == 0
    assert otlp["queued"] <= otlp["queue_capacity"] == 30
    assert otlp["last_error"].startswith("timed out waiting for the response")
    assert len([line for line in collector.log if "exports fail: timed out" in line]) == 1, collector.log
    assert len([line for line in collector.log if "the queue of 30 exports is full" in line]) == 1, collector.log
    # It stops within its timeout though the receiver never answers.
    began = time.monotonic()
    collector.stop()
    assert collector.process.returncode == 0 and time.monotonic() - began < 10


class HostileReceiver:
    """A receiver on an ephemeral port that reads each request whole, then answers it with
    `attack(send)`: send(bytes) writes to the collector and returns False once the collector
    closed the connection (or the test ended), so an attack loops while it returns True."""

    def __init__(self, attack):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.requests = 0  # requests read whole, each then attacked
        self.attacking = 0  # connections under attack now
        self.connections = []

        def send(connection, data):
            try:
                connection.sendall(data)
                return not self.stopping.is_set()
            except OSError:  # the collector closed it (or the send timed out: it stopped reading)
                return False

        def serve(connection):
            connection.settimeout(5)
            with connection:
                if not self._read_request(connection):
                    return
                with self.lock:
                    self.requests += 1
                    self.attacking += 1
                try:
                    attack(lambda data: send(connection, data))
                finally:
                    with self.lock:
                        self.attacking -= 1

        def accept():
            while not self.stopping.is_set():
                try:
                    connection, _ = self.listener.accept()
                except OSError:
                    return
                with self.lock:
                    self.connections.append(connection)
                threading.Thread(target=serve, args=(connection,), daemon=True).start()
        threading.Thread(target=accept, daemon=True).start()

    @staticmethod
    def _read_request(connection):
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = connection.recv(65536)
                if not chunk:
                    return False
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            while len(body) < length:
                chunk = connection.recv(65536)
                if not chunk:
                    return False
                body += chunk
            return True
        except OSError:
            return False

    def under_attack(self):
        with self.lock:
            return self.attacking

    def close(self):
        self.stopping.set()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread; close alone would not
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            for connection in self.connections:
                try:
                    connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.fixture
def hostile_receivers():
    made = []

    def make(attack):
        made.append(HostileReceiver(attack))
        return made[-1]
    yield make
    for receiver in made:
        receiver.close()


def endless(head, line):
    """An attack: `head`, then `line` without end, as fast as the collector takes it."""
    def attack(send):
        if send(head):
            while send(line * 256):
                pass
    return attack


def dribble(send):
    """An attack: a header line that never ends, one byte a millisecond."""
    if send(b"HTTP/1.1 200 OK\r\nX-Slow: "):
        while send(b"z"):
            time.sleep(0.001)


def cpu_seconds(pid):
    """The user and system CPU time process `pid` has used, in seconds (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()  # fields[0] is field 3, the state
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_share(pid, seconds):
    """The share of one core process `pid` used over the next `seconds`."""
    began, cpu = time.monotonic(), cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - cpu) / (time.monotonic() - began)


def stop_timed(collector):
    """SIGTERMs the collector; how long it took to exit (the test's bound is 5 s, the promise 1 s:
    docs/otlp.md). A collector still running then is killed, and the test fails."""
    began = time.monotonic()
    collector.process.send_signal(signal.SIGTERM)
    try:
        collector.process.wait(5)
    except subprocess.TimeoutExpired as error:
        collector.process.kill()
        collector.process.wait()
        raise AssertionError("the collector did not exit within 5 s of SIGTERM: " + "\n".join(collector.log[-5:])) from error
    took = time.monotonic() - began
    print(f"exited {took * 1000:.0f} ms after SIGTERM")
    assert collector.process.returncode == 0, collector.log
    # The log is read by a thread of the test's: its last line may come after the exit is seen.
    collector.wait_for("the log's last line", lambda: collector.log and collector.log[-1].endswith(" stopped"), timeout=10)
    return took


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
BOUNDS = "the response is past the client's bounds: "
HEADS = BOUNDS + "more than 64 KiB of heads, chunk lines and trailers"


@pytest.mark.parametrize("attack, reason", [
    (endless(b"", CONTINUE), BOUNDS + "more than 10 interim (1xx) responses"),
    (endless(CONTINUE, b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n"), BOUNDS + "more than 10 interim"),
    (endless(CHUNKED + b"5\r\nhello\r\n0\r\n", b"X-Trailer: more\r\n"), HEADS + " (at a trailer)"),
    (endless(CHUNKED + b"1;", b"extension=x;"), HEADS + " (at a chunk's size)"),
    (endless(b"HTTP/1.1 200 OK\r\n", b"X-Header: another\r\n"), HEADS + " (at a header line)"),
], ids=["100-continue", "103-early-hints", "trailers", "chunk-extension", "headers"])
def test_a_receiver_that_answers_without_end_costs_a_counted_retry_not_a_core(
        bots, hostile_receivers, start_collector, attack, reason):
    receiver = hostile_receivers(attack)
    collector = start_collector("--otlp-endpoint", receiver.url, "--otlp-interval", "100ms", "--otlp-timeout", "30s")
    bots("endlessbot")
    collector.wait_for("an export answered without end", lambda: receiver.requests)
    # Each attempt ends at a bound, well within its timeout, and is tried again after a backoff:
    # the collector stays far below a core (it spun at 100 % before, for good).
    share = cpu_share(collector.process.pid, 3)
    print(f"the collector used {share:.1%} of a core under attack")
    assert share < 0.20, f"the collector used {share:.0%} of a core while the receiver attacked"
    otlp = collector.wait_for("the failed attempt counted", lambda: (
        (o := collector.latest()["collector"].get("otlp")) and o["retries"] >= 1 and o))
    assert otlp["last_error"].startswith(reason), otlp
    assert otlp["exports_sent"] == 0 and otlp["timeouts"] == 0
    stop_timed(collector)
    failing = [line for line in collector.log if "exports fail: " + reason in line]
    assert len(failing) == 1, collector.log


def test_sigterm_stops_the_collector_while_a_receiver_dribbles_its_answer(bots, hostile_receivers, start_collector):
    receiver = hostile_receivers(dribble)
    # A timeout far beyond the test: only the stop can end the attempt.
    collector = start_collector("--otlp-endpoint", receiver.url, "--otlp-interval", "100ms", "--otlp-timeout", "5m")
    bots("dribblebot")
    collector.wait_for("an answer being dribbled", receiver.under_attack)
    share = cpu_share(collector.process.pid, 3)
    print(f"the collector used {share:.1%} of a core while the answer was dribbled")
    assert share < 0.20, f"the collector used {share:.0%} of a core while the receiver dribbled"
    assert receiver.under_attack(), "the attempt ended before the stop"
    queued = collector.latest()["collector"]["otlp"]["queued"]
    assert queued >= 2  # the export in flight and those made since
    stop_timed(collector)
    # The attempt under way was cut short, and every export it held up counted as unsent.
    unsent = [line for line in collector.log if "exports unsent at the stop" in line]
    assert len(unsent) == 1 and "the attempt under way was cut short" in unsent[0], collector.log
    assert int(re.search(r"(\d+) exports unsent", unsent[0]).group(1)) >= queued, unsent[0]
