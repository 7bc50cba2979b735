"""--hlog: the collector's interval log, decoded by HdrHistogram's own Python package (PyPI's
`hdrhistogram`), holds what was written, and its quantiles are the collector's."""

import os
import subprocess
import time

import pytest

import ringside
from conftest import Collector, _collector_path, missing

try:
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader
except ImportError:
    HdrHistogram = None

PRECISION = 0.001  # HdrHistogram's 3 digits, and Ringside's 1/1024


def batch(second):
    """1,000 latencies in ns: 80 % near 50 us, 19.5 % near 200 us, 0.4 % near 1 ms, one near 5 ms."""
    values = [50_000 + (i * 37) % 500 for i in range(800)]
    values += [200_000 + (i * 53) % 2_000 for i in range(195)]
    values += [1_000_000 + i * 1_000 for i in range(4)]
    values.append(5_000_000 + second * 7)
    return values


@pytest.fixture
def logging_collector(ring_dir, tmp_path):
    if HdrHistogram is None:
        missing("the hdrhistogram package is not installed (pip install hdrhistogram)")
    binary = _collector_path()
    if binary is None:
        missing("ringside-collector is not built: run `swift build` or set RINGSIDE_COLLECTOR")
    path = str(tmp_path / "latency.hlog")
    running = Collector(binary, ring_dir, "--hlog", path, "--hlog-interval", "500ms")
    running.hlog_path = path
    yield running
    running.stop()


def read_log(path):
    """Each interval line's (tag, histogram), decoded by hdrh, and the log's header lines."""
    with open(path, encoding="utf-8") as log:
        header = [line.rstrip("\n") for line in log if not line.startswith("Tag=")]
    reader = HistogramLogReader(path, HdrHistogram(1, 2**63 - 1, 3))
    intervals = []
    while (histogram := reader.get_next_interval_histogram()) is not None:
        intervals.append((histogram.get_tag(), histogram))
    reader.close()
    return header, intervals


def close_to(logged, collected):
    return abs(logged - collected) <= PRECISION * collected


def test_hlog_decodes_with_hdrhistogram_and_matches_the_collector(ring_dir, logging_collector):
    collector = logging_collector
    bot = ringside.Bot("hlogbot", ring_dir)
    latency = bot.histogram("order_latency", unit="ns", labelnames=("venue",))
    written = []
    for second in range(3):
        values = batch(second)
        for value in values:
            latency.labels(venue="X, Y").observe(value)
        written += values
        time.sleep(0.7)
    bot.close()
    series = collector.wait_for("the 3,000 records", lambda: (
        (s := collector.series("hlogbot", "order_latency", venue="X, Y")) and s["total_count"] == len(written) and s))
    window = series["windows"]["1m"]
    assert window["count"] == len(written)
    collector.stop()  # the last interval is written at stop

    header, intervals = read_log(collector.hlog_path)
    assert header[1] == "#[Histogram log format version 1.3]"
    assert header[2].startswith("#[StartTime: ") and header[3].startswith("#[BaseTime: ")
    assert header[-1] == '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'
    tag = "hlogbot.order_latency{venue=X%2C%20Y}@ns"
    assert {t for t, _ in intervals} == {tag}
    assert intervals, "no interval was logged"

    total = HdrHistogram(1, 2**63 - 1, 3)
    for _, histogram in intervals:
        total.add(histogram)
    assert total.get_total_count() == len(written)
    for percentile, key in ((50, "p50"), (99, "p99")):
        logged, collected = total.get_value_at_percentile(percentile), window[key]
        assert close_to(logged, collected), f"p{percentile}: the log says {logged}, the collector {collected}"
    assert close_to(total.get_max_value(), window["max"]), (total.get_max_value(), window["max"])
    assert close_to(total.get_max_value(), max(written))
    # Every value the log holds is within HdrHistogram's precision of one written.
    assert close_to(total.get_min_value(), min(written))


def test_hlog_that_cannot_be_written_is_logged_counted_and_not_fatal(ring_dir, tmp_path):
    binary = _collector_path()
    if binary is None:
        missing("ringside-collector is not built: run `swift build` or set RINGSIDE_COLLECTOR")
    # A directory where the log should be: refused (never moved or written), counted, said once.
    path = tmp_path / "latency.hlog"
    path.mkdir()
    collector = Collector(binary, ring_dir, "--hlog", str(path))
    try:
        bot = ringside.Bot("hlogfail", ring_dir)
        bot.histogram("lat", unit="ns").observe(1234)
        bot.close()
        collector.wait_for("the record", lambda: (s := collector.series("hlogfail", "lat")) and s["total_count"] == 1)
        errors = collector.wait_for("an error counted", lambda: collector.latest()["collector"].get("hlog_errors", 0))
        assert errors >= 1
        assert "ringside_collector_hlog_errors_total" in collector.get("/metrics")
        said = [line for line in collector.log if f"--hlog: {path} is a directory" in line]
        assert len(said) == 1, collector.log
        assert collector.process.poll() is None
    finally:
        collector.stop()
    assert collector.process.returncode == 0
    assert path.is_dir() and not os.path.exists(str(path) + ".1")


def test_hlog_in_a_missing_directory_stops_the_start(ring_dir, tmp_path):
    binary = _collector_path()
    if binary is None:
        missing("ringside-collector is not built: run `swift build` or set RINGSIDE_COLLECTOR")
    path = tmp_path / "missing" / "latency.hlog"
    run = subprocess.run([binary, "--dir", ring_dir, "--listen", "127.0.0.1:0", "--hlog", str(path)],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 1
    said = f"--hlog {path}: cannot open the directory {path.parent}: No such file or directory (errno: 2); not starting"
    assert said in run.stderr
    assert "listening on" not in run.stderr
