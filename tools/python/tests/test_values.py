"""What the package refuses, with errors that name the bot, the metric and the value, and that
a refused value records nothing: on both backends."""

import math

import pytest

import ringside
from conftest import BotFile


@pytest.fixture
def bot(backend, ring_dir):
    attached = ringside.Bot("values", ring_dir, _backend=backend)
    yield attached
    attached.close()


@pytest.mark.parametrize("unit, value, error", [
    ("s", -0.001, ValueError),
    ("s", -1, ValueError),
    ("s", math.nan, ValueError),
    ("s", math.inf, ValueError),
    ("s", 2.0**64, ValueError),          # 1.8e19 s is far beyond 2^64 ns
    ("s", 1e300, ValueError),            # a float whose nanoseconds overflow to infinity
    ("ms", 1e305, ValueError),
    ("us", 1.7976931348623157e308, ValueError),
    ("ns", 2**64, ValueError),
    ("s", "0.1", TypeError),
    ("s", None, TypeError),
    ("s", [1], TypeError),
    ("bytes", 1.5, ValueError),          # a histogram in bytes holds whole numbers
    ("none", -3, ValueError),
])
def test_a_bad_observation_is_refused_by_name_and_records_nothing(bot, unit, value, error):
    histogram = bot.histogram("order_fill_latency", unit=unit)
    histogram.observe(1)  # the thread's lane, claimed
    written = bot.records_written
    with pytest.raises(error) as raised:
        histogram.observe(value)
    assert isinstance(raised.value, ringside.RingError)
    message = str(raised.value)
    assert "bot values" in message and "order_fill_latency" in message and repr(value)[:20] in message
    assert "struct" not in message
    assert bot.records_written == written


@pytest.mark.parametrize("value, error", [(-1, ValueError), (1.5, ValueError), ("1", TypeError), (2**64, ValueError)])
def test_a_bad_increment_is_refused(bot, value, error):
    orders = bot.counter("orders")
    with pytest.raises(error, match="metric orders"):
        orders.inc(value)


def test_a_counter_takes_whole_floats_and_numpy_like_ints(bot):
    class Index:  # what numpy's integers offer: __index__
        def __index__(self):
            return 5
    orders = bot.counter("orders")
    orders.inc(2.0)
    orders.inc(Index())


def test_each_increment_moves_its_lanes_cell_writes_for_the_collector_to_see(bot):
    """Counters write no records: each increment also adds 1 to its lane's `cell_writes` (0x24 of
    the lane header), which the collector watches beside the write cursor (CELLS in ringside.h)."""
    orders = bot.counter("orders")
    for _ in range(3):
        orders.inc()
    orders.inc(5)
    orders.inc(2.0)  # through the converter
    bot.histogram("latency", unit="s").observe(0.001)  # a record, not an increment
    file = BotFile(bot.path)
    assert file.counter("orders") == 10
    assert file.cell_writes == [5]


@pytest.mark.parametrize("value, error", [("high", TypeError), (None, TypeError), (10**400, ValueError)])
def test_a_bad_gauge_value_is_refused(bot, value, error):
    level = bot.gauge("level")
    with pytest.raises(error, match="metric level"):
        level.set(value)
    with pytest.raises(error, match="metric level"):
        level.inc(value)


def test_registration_refuses_what_the_format_cannot_hold(bot):
    with pytest.raises(ValueError, match="metric name"):
        bot.histogram("order-latency")
    with pytest.raises(ValueError, match="unknown unit"):
        bot.histogram("latency", unit="minutes")
    with pytest.raises(ValueError, match="label name"):
        bot.histogram("latency", labelnames=("bad-name",))
    with pytest.raises(ValueError, match="label name"):
        bot.histogram("latency", labelnames=("__reserved",))
    with pytest.raises(ValueError):
        bot.histogram("latency", help="x" * 200)
    latency = bot.histogram("latency", unit="s", labelnames=("symbol",))
    assert bot.histogram("latency", unit="s", labelnames=("symbol",)) is latency  # found again
    with pytest.raises(ringside.RingError, match="already"):
        bot.counter("latency")
    with pytest.raises(ringside.RingError, match="already"):
        bot.histogram("latency", unit="ms", labelnames=("symbol",))
    with pytest.raises(ValueError, match="call .labels"):
        latency.observe(0.1)
    with pytest.raises(ValueError, match="call .labels"):
        latency.time()
    with pytest.raises(ValueError, match="expected values"):
        latency.labels("AAPL", "MSFT")
    with pytest.raises(ValueError, match="expected values"):
        latency.labels(venue="X")
    with pytest.raises(ValueError, match="newline"):
        latency.labels("A\nB")
    registered = bot.metric_count
    with pytest.raises(ValueError, match=r"histogram latency: expected values for \('symbol',\), got none"):
        latency.labels()
    assert bot.metric_count == registered  # no series "symbol=None"
    latency.labels(None)  # str()ed, as prometheus_client does: the series symbol="None"
    with pytest.raises(ValueError, match="expected values"):
        latency.labels(venue="X")  # a wrong name, not that series from the cache
    with pytest.raises(ValueError, match="no label names"):
        bot.counter("orders").labels("x")


def test_only_time_histograms_time(bot):
    sizes = bot.histogram("order_size", unit="bytes")
    with pytest.raises(TypeError, match="only a histogram in s, ms, us or ns times"):
        sizes.time()
    with pytest.raises(TypeError):
        sizes.start()


def test_the_registry_full_is_an_error_naming_the_bot(backend, ring_dir):
    bot = ringside.Bot("small", ring_dir, max_metrics=2, _backend=backend)
    latency = bot.histogram("latency", labelnames=("n",))
    latency.labels("1")
    latency.labels("2")
    with pytest.raises(ringside.RingError, match="small"):
        latency.labels("3")
    bot.close()


def test_calls_after_close_raise(backend, ring_dir):
    bot = ringside.Bot("closed", ring_dir, _backend=backend)
    latency = bot.histogram("latency", unit="s")
    orders = bot.counter("orders")
    level = bot.gauge("level")
    latency.observe(0.5)
    bot.close()
    bot.close()  # twice is fine
    for call, argument in ((latency.observe, 0.5), (orders.inc, 1), (level.set, 1.0)):
        with pytest.raises(ringside.RingError, match="closed"):
            call(argument)
    with pytest.raises(ringside.RingError, match="closed"):
        bot.histogram("other")


def test_bad_bot_names_and_options(backend, ring_dir):
    for name in ("", "a/b", ".", "x" * 201):
        with pytest.raises(ringside.RingError):
            ringside.Bot(name, ring_dir, _backend=backend)
    with pytest.raises(ringside.RingError):
        ringside.Bot("ok", ring_dir, lane_capacity=1000, _backend=backend)
    with pytest.raises(ringside.RingError):
        ringside.Bot("ok", ring_dir, max_lanes=0, _backend=backend)
