"""Every instrumentation pattern, read back through the real collector, on both backends."""

import asyncio
import os
import re
import threading
import time

import pytest

import ringside
from conftest import find_series


def attach(backend, ring_dir, name, **options):
    return ringside.Bot(name, ring_dir, _backend=backend, **options)


def test_every_pattern_lands_in_the_collector(backend, ring_dir, collector):
    bot = attach(backend, ring_dir, "patterns")
    fill = bot.histogram("order_fill_latency", unit="s", labelnames=("symbol",), help="fill latency")
    orders = bot.counter("orders", labelnames=("side",))
    exposure = bot.gauge("gross_exposure")

    aapl = fill.labels("AAPL")
    assert fill.labels(symbol="AAPL") is aapl  # children are cached, positional or by name
    assert aapl.observe(0.0012) is True
    assert aapl.observe(0.0025) is True

    with fill.labels("MSFT").time():
        pass

    @fill.labels("MSFT").time()
    def send():
        return "sent"

    @fill.labels("MSFT").time()
    async def send_async():
        await asyncio.sleep(0)
        return "sent async"

    assert send() == "sent"
    assert asyncio.run(send_async()) == "sent async"
    token = fill.labels("MSFT").start()
    assert fill.labels("MSFT").stop(token) is True

    orders.labels("buy").inc()
    orders.labels("buy").inc(41)
    orders.labels(side="sell").inc(7)
    exposure.set(1.25e6)
    exposure.inc(10)
    exposure.dec(2.5)
    bot.close()

    def landed():
        latest = collector.latest()  # one page for every series (see find_series)
        series = (find_series(latest, "patterns", "order_fill_latency", symbol="AAPL"),
                  find_series(latest, "patterns", "order_fill_latency", symbol="MSFT"),
                  find_series(latest, "patterns", "orders", side="buy"),
                  find_series(latest, "patterns", "orders", side="sell"),
                  find_series(latest, "patterns", "gross_exposure"))
        aapl_series, msft, buy, sell, gauge = series
        # Every record drained (2 for AAPL; 4 for MSFT: with, a function, a coroutine, start/stop),
        # and the cells read (the counters' totals, the gauge's value), which the collector reads
        # on a schedule of its own: the condition is the whole final state, not a part of it.
        if (all(series) and aapl_series["total_count"] == 2 and msft["total_count"] == 4
                and buy["total"] == 42 and sell["total"] == 7 and gauge["value"] == 1.25e6 + 10 - 2.5):
            return series
        return None
    aapl_series, msft, buy, sell, gauge = collector.wait_for("every record and cell", landed)
    assert aapl_series["unit"] == "ns" and aapl_series["help"] == "fill latency"
    assert int(aapl_series["total_sum"]) == 1_200_000 + 2_500_000  # seconds, stored as exact nanoseconds
    page = collector.get("/metrics")
    assert re.search(r'^order_fill_latency_seconds_count\{[^}]*symbol="AAPL"[^}]*\} 2$', page, re.M), page[:2000]


@pytest.mark.parametrize("unit, value, stored", [
    ("s", 0.0012, 1_200_000),       # a float's decimal, exactly
    ("s", 3, 3_000_000_000),        # an int, multiplied exactly
    ("s", 1e-9, 1),
    ("ms", 0.001, 1_000),
    ("us", 12.5, 12_500),
    ("ns", 2.5, 2),                 # to the nearest, ties to even
    ("ns", 3.5, 4),
    ("ns", 7, 7),
    ("bytes", 4096, 4096),
    ("none", 3.0, 3),               # a whole float
])
def test_values_convert_exactly(backend, ring_dir, collector, unit, value, stored):
    bot = attach(backend, ring_dir, "units")
    metric = bot.histogram("value", unit=unit)
    assert metric.observe(value) is True
    bot.close()
    series = collector.wait_for("the record", lambda: (
        (s := collector.series("units", "value")) and s["total_count"] == 1 and s))
    assert series["unit"] == ("ns" if unit in ("s", "ms", "us", "ns") else unit)
    assert int(series["total_sum"]) == stored


def test_threads_write_lanes_of_their_own_and_lose_nothing(backend, ring_dir, collector):
    threads, each = 8, 5_000
    bot = attach(backend, ring_dir, "threads", lane_capacity=1 << 16)
    latency = bot.histogram("latency", unit="us")
    orders = bot.counter("orders")
    start = threading.Barrier(threads)

    def work():
        start.wait()
        for i in range(each):
            latency.observe(i % 100 + 1)
            orders.inc()
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for worker in workers:
        wait_until_gone(worker)  # its exit wrote its lane's sampling groups, if it had any
    written, dropped, lanes = bot.records_written, bot.records_dropped, bot.lanes_allocated
    bot.close()
    assert 1 <= lanes <= threads
    # A lane that a thread hands to the next may fill past half while the collector drains it: the
    # C extension then writes weighted records (SAMPLING in ringside.h), fewer than the calls.
    assert written + dropped <= threads * each
    # Exact, whatever the lanes held (the collector sums the cells as it visits the bot).
    collector.wait_for("the exact total", lambda: (
        (s := collector.series("threads", "orders")) and s["total"] == threads * each))
    histogram = collector.wait_for("every call", lambda: (
        (s := collector.series("threads", "latency")) and s["total_count"] + s["dropped_records"] == threads * each
        and s["total_count"] == written + s["sampled_records"] and s))
    assert histogram["dropped_records"] == dropped


def wait_until_gone(thread):
    """Waits for the OS thread of a joined thread to exit: join() returns once Python is done with
    the thread, and the C producer retires a lane in a pthread key destructor, which runs after
    that, as the OS thread exits (its /proc/self/task entry then goes)."""
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/self/task/{thread.native_id}"):
        assert time.monotonic() < deadline, f"thread {thread.native_id} has not exited 10 s after join()"
        time.sleep(0.001)


def test_a_finished_thread_hands_its_lane_to_the_next(backend, ring_dir):
    bot = attach(backend, ring_dir, "reuse")
    latency = bot.histogram("latency", unit="ns")
    for _ in range(5):
        worker = threading.Thread(target=lambda: [latency.observe(v) for v in range(10)])
        worker.start()
        worker.join()
        wait_until_gone(worker)
    assert bot.lanes_allocated == 1
    assert bot.records_written == 50
    bot.close()


def test_coroutines_share_their_thread_and_each_call_is_timed(backend, ring_dir, collector):
    bot = attach(backend, ring_dir, "asyncio")
    latency = bot.histogram("request_latency", unit="s")

    @latency.time()
    async def request(delay):
        await asyncio.sleep(delay)

    async def main():
        await asyncio.gather(*(request(0.01) for _ in range(100)))
    asyncio.run(main())
    bot.close()
    series = collector.wait_for("100 spans", lambda: (
        (s := collector.series("asyncio", "request_latency")) and s["total_count"] == 100 and s))
    # Each span is its own call's: at least the 10 ms it slept, not the 100 overlapping calls' sum.
    assert series["windows"]["1m"]["min"] >= 10_000_000
    assert series["windows"]["1m"]["max"] < 100 * 10_000_000


def test_sampled_histograms_write_one_in_n(backend, ring_dir, collector):
    bot = attach(backend, ring_dir, "sampled")
    latency = bot.histogram("latency", unit="ns", sample_every=4)
    results = [latency.observe(100) for _ in range(400)]
    bot.close()
    assert results.count(True) == 100
    series = collector.wait_for("the scaled count", lambda: (
        (s := collector.series("sampled", "latency")) and s["total_count"] == 400 and s))
    assert series["sample_every"] == 4
