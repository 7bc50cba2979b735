"""The collector's /metrics in the formats scrapers ask for, read by prometheus_client's own
OpenMetrics parser (as the issue that added them asks), with gzip."""

import gzip
import urllib.request

import pytest

import ringside
from conftest import IN_CI, find_series


def fetch(collector, path, headers):
    request = urllib.request.Request(collector.address + path, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers, response.read()


@pytest.fixture
def parser():
    try:
        from prometheus_client.openmetrics.parser import text_string_to_metric_families
    except ImportError:
        if IN_CI:
            pytest.fail("prometheus_client is not installed (CI=true: .ci/run installs it)")
        pytest.skip("prometheus_client is not installed")
    return text_string_to_metric_families


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
