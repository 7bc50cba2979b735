"""Bad values: counted, never raised, on a bot (BAD VALUES in the package); raised, naming the bot,
the metric and the value and recording nothing, on a strict bot: on both backends."""
import math

import pytest

import ringside
from conftest import BotFile, find_series


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
def test_a_bad_observation_is_refused_by_name_and_records_nothing(strict_bot, unit, value, error):
    bot = strict_bot
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
def test_a_bad_increment_is_refused(strict_bot, value, error):
    bot = strict_bot
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
def test_a_bad_gauge_value_is_refused(strict_bot, value, error):
    bot = strict_bot
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


def test_bad_values_are_counted_never_raised(bot):
    """BAD VALUES: a value or an exemplar a metric cannot take never raises into trading code; it is
    counted in the metric's cell (`clamped`, `exemplars_refused`) and the C producer's value recorded."""
    latency = bot.histogram("order_latency_seconds", unit="s")
    size = bot.histogram("order_size_bytes", unit="bytes")
    orders = bot.counter("orders")
    pnl = bot.gauge("pnl")
    slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
    assert latency.observe(-0.000_002) is True  # a negative latency from a wall clock: 0, counted
    assert latency.observe(math.inf) is True  # the largest, counted
    assert latency.observe(math.nan) is False  # nothing recorded, counted
    assert latency.observe("0.1") is False and latency.observe(None) is False
    assert latency.observe(0.001, exemplar={"bad key": "x"}) is True  # recorded without it
    assert latency.observe(0.002, exemplar={"order_id": "x" * 70}) is True
    assert size.observe(1.5) is True  # a fraction of a byte: rounded to 2, counted
    for amount in (2.5, -1, math.nan, "3"):
        assert orders.inc(amount) is None
    big = bot.counter("big")
    assert big.inc(2**70) is None
    assert pnl.set("12") is False and pnl.set(None) is False
    pnl.set(-5.0)
    assert slippage.observe(-3.5, exemplar={"order_id": "A17"}) is True  # a signed histogram's: refused
    file = BotFile(bot.path)
    ns = 10**9
    assert file.values("order_latency_seconds") == [0, 2**64 - 1, ns // 1000, 2 * ns // 1000]
    assert file.clamped("order_latency_seconds") == 5 and file.exemplars_refused("order_latency_seconds") == 2
    assert file.values("order_size_bytes") == [2] and file.clamped("order_size_bytes") == 1
    assert file.counter("orders") == 2 and file.clamped("orders") == 4  # 2.5 to even; nothing for -1, NaN, "3"
    assert file.counter("big") == 2**64 - 1 and file.clamped("big") == 1
    assert file.gauge("pnl") == -5.0 and file.clamped("pnl") == 2
    assert file.signed_values("slippage_bps") == [-350] and file.exemplars_refused("slippage_bps") == 1
    assert file.exemplars("slippage_bps") == []


def test_a_strict_bot_raises_where_a_bot_counts(strict_bot, ring_dir, backend, monkeypatch):
    """strict=True raises; RINGSIDE_STRICT=1 makes bots attached without strict= strict, and
    strict=False keeps counting whatever the environment says."""
    latency = strict_bot.histogram("latency", unit="s")
    with pytest.raises(ringside.RingValueError, match="metric latency: value -1 is negative"):
        latency.observe(-1)
    with pytest.raises(ringside.RingValueError, match="carry no exemplars"):
        strict_bot.histogram("slippage_bps", resolution=0.01, signed=True).observe(1, exemplar={"order_id": "A17"})
    monkeypatch.setenv("RINGSIDE_STRICT", "1")
    from_environment = ringside.Bot("from-env", ring_dir, _backend=backend)
    told = ringside.Bot("told", ring_dir, strict=False, _backend=backend)
    try:
        assert from_environment.strict and not told.strict
        with pytest.raises(ringside.RingTypeError, match="is not a number"):
            from_environment.counter("orders").inc("x")
        assert told.counter("orders").inc("x") is None
        assert BotFile(told.path).clamped("orders") == 1
    finally:
        from_environment.close()
        told.close()


def test_a_bots_bad_values_reach_the_collector_counted_per_metric_and_reason(backend, ring_dir, collector):
    """What a trading loop hands its metrics by mistake shows on /metrics and /latest, per metric
    and reason (clamped_values, exemplars_refused), while the loop never sees an exception."""
    bot = ringside.Bot("careless", ring_dir, _backend=backend)
    latency = bot.histogram("order_latency_seconds", unit="s")
    slippage = bot.histogram("slippage_bps", resolution=0.01, signed=True)
    for value in (0.001, -0.000_5, math.nan, "n/a"):  # a wall-clock latency gone negative; a missing one
        latency.observe(value)
    latency.observe(0.002, exemplar={"order id": "A17"})  # a label name with a space
    slippage.observe(-1.5, exemplar={"order_id": "A17"})  # a signed histogram's values carry none
    exposure = bot.gauge("exposure_usd")
    exposure.set(2.5e6)
    exposure.set("n/a")  # the gauge keeps 2.5e6
    found = collector.wait_for(
        "the collector to count the bad values and refused exemplars",
        lambda: (latest := collector.latest()) and (timed := find_series(latest, "careless", "order_latency_seconds"))
        and (signed := find_series(latest, "careless", "slippage_bps")) and timed["total_count"] == 3
        and timed["clamped_values"] == 3 and timed["exemplars_refused"] == 1 and signed["exemplars_refused"] == 1
        and (gauge := find_series(latest, "careless", "exposure_usd")) and gauge["clamped_values"] == 1
        and (timed, signed, gauge))
    timed, signed, gauge = found
    assert signed["total_count"] == 1 and signed["clamped_values"] == 0 and gauge["value"] == 2.5e6
    metrics = collector.get("/metrics")
    for line in ('ringside_metric_clamped_total{ring="careless",metric="order_latency_seconds",labels=""} 3',
                 'ringside_metric_exemplars_refused_total{ring="careless",metric="order_latency_seconds",labels=""} 1',
                 'ringside_metric_exemplars_refused_total{ring="careless",metric="slippage_bps",labels=""} 1',
                 'ringside_metric_clamped_total{ring="careless",metric="exposure_usd",labels=""} 1'):
        assert line + "\n" in metrics, line
    bot.close()
