"""The OTLP push as OpenTelemetry's users set it up: https:// receivers (the server's certificate
checked against a CA file or the system's, its name, a client certificate for mTLS), the OTEL_*
environment variables, resource attributes on every export, and delta temporality. Certificates
are made by `openssl` in each test; the receiver is test_otlp's, over Python's ssl."""

import os
import shutil
import socket
import ssl
import subprocess
import time

import pytest

try:
    from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality
except ImportError:  # the receivers fixture says so
    AggregationTemporality = None

import ringside
from conftest import _collector_path, missing
from otlp_peer import wait_for_totals
from test_otlp import NANOS, attributes, data_points, expected_buckets


def run_openssl(*arguments, cwd):
    subprocess.run(["openssl", *arguments], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pki(tmp_path):
    """A CA, a server certificate of it for 127.0.0.1 and localhost, a client certificate of it,
    another CA (that signed nothing here), and a server certificate for another name only."""
    if shutil.which("openssl") is None:
        missing("the openssl command is not installed")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for ca in ("ca", "other-ca"):
        run_openssl("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2", "-subj", f"/CN={ca}",
                    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                    cwd=tmp_path)

    def leaf(name, extension):
        (tmp_path / f"{name}.ext").write_text(extension + "\n")
        run_openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=tmp_path)
        run_openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                    "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=tmp_path)
    leaf("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth")
    leaf("elsewhere", "subjectAltName=DNS:otel.elsewhere.example\nextendedKeyUsage=serverAuth")
    leaf("desk-client", "extendedKeyUsage=clientAuth")
    for key in tmp_path.glob("*.key"):
        key.chmod(0o600)
    return tmp_path


def server_tls(pki, certificate="server", client_ca=None):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / f"{certificate}.pem", pki / f"{certificate}.key")
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki / client_ca)
    return context


def otlp_figures(collector):
    return collector.latest()["collector"].get("otlp")


def test_an_https_export_arrives_with_the_resource_attributes(pki, bots, receivers, start_collector, monkeypatch):
    receiver = receivers(tls=server_tls(pki))
    # The flag wins over the variable for the same key; the variable's other keys stay.
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging, team=fx%20desk")
    collector = start_collector("--otlp-endpoint", receiver.url, "--otlp-interval", "200ms",
                                "--otlp-ca-file", str(pki / "ca.pem"),
                                "--otlp-resource-attribute", "deployment.environment=prod")
    bots("tlsbot")
    wait_for_totals(collector, "tlsbot")
    collector.wait_for("an https export taken", lambda: receiver.taken())
    path, headers, request, _ = receiver.taken()[-1]
    assert path == "/v1/metrics" and headers["X-Test-Client-Subject"] is None
    points = data_points(request)
    assert points, "an export with no data point"
    for resource, _, _ in points.values():
        assert resource["service.name"] == "tlsbot" and resource["ringside.bot"] == "tlsbot"
        assert resource["host.name"] == socket.gethostname()
        assert resource["deployment.environment"] == "prod" and resource["team"] == "fx desk"
    otlp = collector.wait_for("the export counted", lambda: (o := otlp_figures(collector)) and o["exports_sent"] >= 1 and o)
    assert otlp["exports_failed"] == 0


@pytest.mark.parametrize("case", ["another CA", "the system's CAs", "another name", "plain HTTP"])
def test_a_receiver_tls_refuses_is_a_failed_export_said_once(case, pki, bots, receivers, start_collector):
    ca = {"another CA": ["--otlp-ca-file", str(pki / "other-ca.pem")], "the system's CAs": []}.get(
        case, ["--otlp-ca-file", str(pki / "ca.pem")])
    if case == "plain HTTP":
        url = receivers().url.replace("http://", "https://")
    else:
        url = receivers(tls=server_tls(pki, "elsewhere" if case == "another name" else "server")).url
    collector = start_collector("--otlp-endpoint", url, "--otlp-interval", "200ms", "--otlp-timeout", "2s", *ca)
    bots("refusingbot")
    otlp = collector.wait_for("two failed exports", lambda: (o := otlp_figures(collector)) and o["exports_failed"] >= 2 and o)
    assert otlp["exports_sent"] == 0 and otlp["retries"] == 0 and otlp["failing"]
    reason = {"another CA": "unable to get local issuer certificate",
              "the system's CAs": "unable to get local issuer certificate",
              "another name": "IP address mismatch", "plain HTTP": "does it speak TLS?"}[case]
    assert otlp["last_error"].startswith("TLS failed: ") and reason in otlp["last_error"], otlp["last_error"]
    said = [line for line in collector.log if "an export failed: TLS failed" in line]
    assert len(said) == 1 and reason in said[0], collector.log
    assert 'ringside_otlp_exports_total{result="failed"}' in collector.get("/metrics")


def test_mtls_a_client_certificate_is_sent_when_given_and_refused_without(pki, bots, receivers, start_collector):
    receiver = receivers(tls=server_tls(pki, client_ca="ca.pem"))
    without = start_collector("--otlp-endpoint", receiver.url, "--otlp-interval", "200ms", "--otlp-ca-file", str(pki / "ca.pem"))
    bots("mtlsbot")
    otlp = without.wait_for("a failed export", lambda: (o := otlp_figures(without)) and o["exports_failed"] >= 1 and o)
    assert otlp["exports_sent"] == 0 and "TLS failed" in otlp["last_error"], otlp["last_error"]
    without.stop()
    with_certificate = start_collector(
        "--otlp-endpoint", receiver.url, "--otlp-interval", "200ms", "--otlp-ca-file", str(pki / "ca.pem"),
        "--otlp-cert-file", str(pki / "desk-client.pem"), "--otlp-key-file", str(pki / "desk-client.key"))
    with_certificate.wait_for("an export taken", lambda: receiver.taken())
    assert receiver.taken()[-1][1]["X-Test-Client-Subject"] == "desk-client"
    assert otlp_figures(with_certificate)["exports_failed"] == 0


def test_the_otel_environment_variables_are_honoured(pki, bots, receivers, start_collector, monkeypatch):
    receiver = receivers(tls=server_tls(pki))
    # A base URL: /v1/metrics is appended to its path, as OpenTelemetry's SDKs do.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url + "/otlp/")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(pki / "ca.pem"))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "X-Tenant=desk%207 , Authorization=Bearer%20s3cr3t")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "fx-desk")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=ignored,region=ldn")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "200")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    collector = start_collector()
    bots("envbot")
    wait_for_totals(collector, "envbot")
    collector.wait_for("two exports taken", lambda: len(receiver.taken()) >= 2)
    path, headers, request, _ = receiver.taken()[-1]
    assert path == "/otlp/v1/metrics"
    assert headers["X-Tenant"] == "desk 7" and headers["Authorization"] == "Bearer s3cr3t"
    resources = [attributes(rm.resource.attributes) for rm in request.resource_metrics]
    assert resources and all(r["service.name"] == "fx-desk" and r["ringside.bot"] == "envbot" and r["region"] == "ldn"
                             for r in resources), resources
    assert not any("s3cr3t" in line for line in collector.log)


@pytest.mark.parametrize("variable, value, said", [
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s", "OTEL_EXPORTER_OTLP_TIMEOUT 10s: expected a number of milliseconds"),
    ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%2",
     "OTEL_EXPORTER_OTLP_HEADERS: member 1 (Authorization): the value is not"),
    ("OTEL_RESOURCE_ATTRIBUTES", "team", "OTEL_RESOURCE_ATTRIBUTES: member 1 (team): expected KEY=VALUE"),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL grpc: the collector speaks http/protobuf only"),
    ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sometimes", "use cumulative, delta or lowmemory"),
    ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem", "OTEL_EXPORTER_OTLP_CERTIFICATE /nonexistent/ca.pem:"),
])
def test_a_bad_environment_variable_stops_the_start_naming_it(variable, value, said, ring_dir):
    binary = _collector_path()
    if binary is None:
        missing("ringside-collector is not built")
    env = {key: v for key, v in os.environ.items() if not key.startswith("OTEL_")}
    env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:4318", variable: value})
    done = subprocess.run([binary, "--dir", ring_dir, "--listen", "127.0.0.1:0"],
                          env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert said in lines[0], done.stderr
    assert "s3cr3t" not in done.stderr


def test_delta_points_add_up_exactly_to_the_totals_across_a_failed_export(ring_dir, receivers, start_collector):
    delta = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
    # The second export is refused for good (its time goes in the next one), the fourth retried.
    answers = {1: (400, {}, b"no\n"), 3: (503, {}, b"busy\n")}
    receiver = receivers(lambda number: answers.get(number, (200, {}, b"")))
    collector = start_collector("--otlp-endpoint", receiver.url, "--otlp-interval", "200ms", "--otlp-temporality", "delta")
    writer = ringside.Bot("deltawriter", ring_dir)
    orders = writer.counter("orders")
    latency = writer.histogram("fill_latency", unit="ns")
    values = []
    for step in range(12):
        orders.inc(step + 1)
        for value in (700 * (step + 1), 41_000 + step):
            latency.observe(value)
            values.append(value)
        time.sleep(0.12)
    total = sum(range(1, 13))

    def taken_points(metric):
        return [data_points(request)[("deltawriter", metric, ())][2] for _, _, request, _ in receiver.taken()
                if ("deltawriter", metric, ()) in data_points(request)]
    collector.wait_for("the deltas to add up to the total", lambda: sum(p.as_int for p in taken_points("orders")) == total)
    otlp = collector.latest()["collector"]["otlp"]
    assert otlp["exports_failed"] == 1 and otlp["retries"] >= 1, otlp
    counters = taken_points("orders")
    histograms = collector.wait_for("the histogram's deltas", lambda: (
        points := taken_points("fill_latency")) and sum(p.count for p in points) == len(values) and points)
    _, _, last_request, _ = receiver.taken()[-1]
    assert data_points(last_request)[("deltawriter", "orders", ())][1].sum.aggregation_temporality == delta
    # Each point starts where the last one taken ended: no time twice, none left out.
    for points in (counters, histograms):
        for before, after in zip(points, points[1:]):
            assert after.start_time_unix_nano == before.time_unix_nano
    assert sum(p.sum for p in histograms) == pytest.approx(sum(values) / NANOS, rel=1e-9)
    buckets = {}
    for point in histograms:
        for i, count in enumerate(point.positive.bucket_counts):
            if count:
                buckets[point.positive.offset + i] = buckets.get(point.positive.offset + i, 0) + count
    assert buckets == expected_buckets(values, NANOS)[1]
    writer.close()
