"""The collector's /metrics in the formats scrapers ask for, read by prometheus_client's own
OpenMetrics parser (as the issue that added them asks), with gzip."""

import gzip
import importlib
import math
import urllib.request

import pytest

import ringside
from conftest import IN_CI, find_series


def fetch(collector, path, headers):
    request = urllib.request.Request(collector.address + path, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers, response.read()


def prometheus_client_parser(module):
    """prometheus_client's text_string_to_metric_families from `module`: fails under CI=true
    when prometheus_client is missing, else skips."""
    try:
        return importlib.import_module(module).text_string_to_metric_families
    except ImportError:
        if IN_CI:
            pytest.fail("prometheus_client is not installed (CI=true: .ci/run installs it)")
        pytest.skip("prometheus_client is not installed")


@pytest.fixture
def parser():
    return prometheus_client_parser("prometheus_client.openmetrics.parser")


def test_openmetrics_parses_with_prometheus_client(ring_dir, collector, parser):
    bot = ringside.attach("om-bot", ring_dir)
    fill = bot.histogram("order_fill_latency", unit="s", labelnames=("symbol",), help='fills "quoted" \\ and more')
    orders = bot.counter("orders", labelnames=("side",))
    depth = bot.gauge("queue_depth", labels={"venue": 'X"NAS'})
    for i in range(1, 1001):
        fill.labels("AAPL").observe(i * 1e-6)
    orders.labels("buy").inc(7)
    depth.set(3)
    bot.close()

    def landed():
        # The records drained and the cells read (on the collector's own schedule), on one page.
        latest = collector.latest()
        fills = find_series(latest, "om-bot", "order_fill_latency", symbol="AAPL")
        buys = find_series(latest, "om-bot", "orders", side="buy")
        level = find_series(latest, "om-bot", "queue_depth", venue='X"NAS')
        return (fills and fills["total_count"] == 1000 and buys and buys["total"] == 7
                and level and level["value"] == 3)
    collector.wait_for("the records and cells", landed)
    headers, body = fetch(collector, "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    text = body.decode()
    assert text.endswith("# EOF\n")
    families = {family.name: family for family in parser(text)}  # raises on anything it rejects
    assert families["orders"].type == "counter"
    assert [s.value for s in families["orders"].samples if s.name == "orders_total"] == [7]
    histogram = families["order_fill_latency_seconds"]
    assert histogram.type == "histogram" and histogram.unit == "seconds"
    count = [s for s in histogram.samples if s.name == "order_fill_latency_seconds_count"]
    assert count[0].value == 1000 and count[0].labels == {"ring": "om-bot", "symbol": "AAPL"}
    assert families["queue_depth"].samples[0].labels["venue"] == 'X"NAS'


def test_openmetrics_of_signed_and_scaled_histograms_parses(ring_dir, collector, parser):
    """OpenMetrics forbids a histogram's _sum beside negative buckets and a summary's negative
    quantiles: prometheus_client's parser refused the whole page when a signed histogram was on
    it. Its +Inf bucket is its count there; the text format keeps _sum and _count."""
    bot = ringside.attach("om-signed", ring_dir)
    slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
    fees = bot.histogram("fee_usd", resolution=0.01)
    for i in range(1, 501):
        slippage.observe(-i / 100)
        fees.observe(i / 100)
    slippage.observe(2.5)
    bot.close()
    collector.wait_for("the records", lambda: (s := collector.series("om-signed", "slippage_bps"))
                       and s["total_count"] == 501
                       and (f := collector.series("om-signed", "fee_usd")) and f["total_count"] == 500)
    _, body = fetch(collector, "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    families = {family.name: family for family in parser(body.decode())}  # raises on anything it rejects
    signed = families["slippage_bps"]
    assert signed.type == "histogram"
    names = {s.name for s in signed.samples}
    assert names == {"slippage_bps_bucket"}, names
    infinite = [s for s in signed.samples if s.labels.get("le") == "+Inf"]
    assert infinite[0].value == 501
    assert any(float(s.labels["le"]) < 0 for s in signed.samples if s.labels["le"] != "+Inf")
    assert families["slippage_bps_windowed"].type == "gauge"
    assert any(s.value < 0 for s in families["slippage_bps_windowed"].samples)
    assert {s.labels["window"] for s in families["slippage_bps_windowed_count"].samples} == {"1s", "5s", "1m"}
    scaled = families["fee_usd"]
    assert scaled.type == "histogram"
    sums = [s.value for s in scaled.samples if s.name == "fee_usd_sum"]
    assert sums == [pytest.approx(1252.5)]
    assert families["fee_usd_windowed"].type == "summary"
    _, text = fetch(collector, "/metrics", {})
    assert 'slippage_bps_count{ring="om-signed"} 501' in text.decode()


@pytest.fixture
def text_parser():
    return prometheus_client_parser("prometheus_client.parser")


def test_a_quiet_window_reads_nan_not_zero(ring_dir, collector, parser, text_parser):
    """A symbol that stopped trading: its 1 s window empties while the minute's still holds its
    values. prometheus_client's parsers read the empty window's quantiles and maximum as NaN (as a
    summary with no observations exports them), its count and sum as 0; never a made-up 0 p99."""
    bot = ringside.attach("quiet-bot", ring_dir)
    fill = bot.histogram("quote_latency", unit="s", labelnames=("symbol",))
    for i in range(1, 101):
        fill.labels("AAPL").observe(i * 1e-5)
    bot.close()

    def emptied():
        window = (collector.series("quiet-bot", "quote_latency", symbol="AAPL") or {}).get("windows", {})
        second, minute = window.get("1s", {}), window.get("1m", {})
        return second.get("count") == 0 and minute.get("count") == 100
    collector.wait_for("the 1 s window to empty while the minute holds the values", emptied)
    second = collector.series("quiet-bot", "quote_latency", symbol="AAPL")["windows"]["1s"]
    assert all(second[key] is None for key in ("min", "max", "mean", "p50", "p99", "p999")), second
    assert second["sum"] == 0

    def windows(families, name):
        """(window, quantile) -> value of the family's samples for the quiet bot's series."""
        return {(s.labels.get("window"), s.labels.get("quantile"), s.name): s.value
                for s in families[name].samples if s.labels.get("ring") == "quiet-bot"}

    _, om = fetch(collector, "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    _, text = fetch(collector, "/metrics", {})
    for page, parse in ((om.decode(), parser), (text.decode(), text_parser)):
        families = {family.name: family for family in parse(page)}  # raises on anything it rejects
        summary = windows(families, "quote_latency_windowed_seconds")
        quantiles = {q: v for (w, q, n), v in summary.items() if w == "1s" and q is not None}
        assert quantiles and all(math.isnan(v) for v in quantiles.values()), quantiles
        assert summary[("1s", None, "quote_latency_windowed_seconds_count")] == 0
        assert summary[("1s", None, "quote_latency_windowed_seconds_sum")] == 0
        assert summary[("1m", None, "quote_latency_windowed_seconds_count")] == 100
        minute = [v for (w, q, n), v in summary.items() if w == "1m" and q is not None]
        assert minute and all(v > 0 and math.isfinite(v) for v in minute), minute
        maxima = windows(families, "quote_latency_window_max_seconds")
        assert math.isnan(maxima[("1s", None, "quote_latency_window_max_seconds")])
        assert maxima[("1m", None, "quote_latency_window_max_seconds")] == pytest.approx(1e-3)


def test_gzip_when_asked_and_the_same_page_inside(ring_dir, collector):
    bot = ringside.attach("gz-bot", ring_dir)
    bot.counter("orders").inc(3)
    bot.close()
    collector.wait_for("the counter", lambda: (s := collector.series("gz-bot", "orders")) and s["total"] == 3)
    plain_headers, plain = fetch(collector, "/metrics", {})
    zipped_headers, zipped = fetch(collector, "/metrics", {"Accept-Encoding": "gzip"})
    assert plain_headers.get("Content-Encoding") is None
    assert zipped_headers["Content-Encoding"] == "gzip" and zipped_headers["Vary"] == "Accept-Encoding"
    page = gzip.decompress(zipped)
    assert b'orders_total{ring="gz-bot"} 3' in page
    assert len(zipped) * 3 < len(page)
    # The same families (process figures may differ between the two renders).
    def names(text):
        return [line.split()[2] for line in text.decode().splitlines() if line.startswith("# TYPE")]
    assert names(page) == names(plain)
