"""prometheus_client's habits, on both backends: a metric declared as prometheus_client declares it
(documentation positional, the class called with the bot as its registry), buckets= taken and not
used, and series retired by remove() and clear() (the collector drops them from its pages)."""

import struct

import pytest

import ringside
from conftest import BotFile


@pytest.fixture
def bot(backend, ring_dir):
    attached = ringside.Bot("habits", ring_dir, _backend=backend)
    yield attached
    attached.close()


def helps(bot):
    """Each registry entry's HELP text, by name (every series of a family holds the same)."""
    data = BotFile(bot.path)
    return {name: bytes(entry[0x180:0x180 + struct.unpack_from("<H", entry, 0x10)[0]]).decode()
            for (_, name, _, _), entry in zip(data.registry, data.entries)}


def test_documentation_is_the_second_positional_as_in_prometheus_client(bot):
    bot.counter("orders", "Orders sent").inc()
    bot.gauge("exposure", "Gross exposure, USD").set(1.5)
    bot.histogram("fill", "Order fill latency", ("symbol",), unit="s").labels("AAPL").observe(0.001)
    bot.histogram("sized", "Sizes", labelnames=["venue"], unit="bytes").labels(venue="X").observe(3)
    bot.counter("commission_usd", help="Commission paid").inc()  # help= as before
    assert helps(bot) == {"orders": "Orders sent", "exposure": "Gross exposure, USD", "fill": "Order fill latency",
                          "sized": "Sizes", "commission_usd": "Commission paid"}
    assert bot.counter("orders", "Orders sent") is bot.counter("orders", help="Orders sent")  # the same text twice


def test_the_classes_are_called_as_prometheus_clients(bot):
    orders = ringside.Counter("orders", "Orders sent", ["side"], registry=bot)
    orders.labels("buy").inc(2)
    latency = ringside.Histogram("latency", "Fill latency", ["symbol"], namespace="desk", subsystem="fx",
                                 unit="s", registry=bot)
    assert latency.name == "desk_fx_latency"
    latency.labels(symbol="EURUSD").observe(0.002)
    level = ringside.Gauge("level", "Book level", registry=bot)
    level.set(3)
    # Asked again, the same family, as the bot's calls return it.
    assert ringside.Counter("orders", "Orders sent", ["side"], registry=bot) is orders
    assert isinstance(orders, ringside.Counter) and isinstance(latency, ringside.Histogram)
    data = BotFile(bot.path)
    assert data.counter("orders", "side=buy") == 2
    assert data.values("desk_fx_latency", "symbol=EURUSD") == [2_000_000]
    assert data.gauge("level") == 3.0
    assert helps(bot)["desk_fx_latency"] == "Fill latency"


def test_without_a_registry_the_one_open_bot_is_used_and_else_the_error_says_what_to_pass(backend, ring_dir):
    with pytest.raises(ringside.RingError, match="0 are attached and open \\(none\\): attach one first, or pass registry=bot"):
        ringside.Counter("orders", "Orders sent")
    with ringside.Bot("alone", ring_dir, _backend=backend) as alone:
        ringside.Counter("orders", "Orders sent").inc()
        assert BotFile(alone.path).counter("orders") == 1
        with ringside.Bot("second", ring_dir, _backend=backend):
            with pytest.raises(ringside.RingError, match="2 are attached and open \\(alone, second\\)"):
                ringside.Gauge("level", "Level")
        ringside.Gauge("level", "Level").set(1)  # one again
    with pytest.raises(ringside.RingTypeError, match="registry= takes a ringside.Bot"):
        ringside.Counter("orders", "Orders sent", registry=object())  # type: ignore[arg-type]


def test_help_is_refused_at_registration_when_it_cannot_be_kept(bot):
    with pytest.raises(ringside.RingValueError, match="at most 128 bytes"):
        bot.counter("orders", "é" * 65)  # 130 bytes: refused at registration, never cut
    bot.counter("orders", "é" * 64).inc()  # 128 bytes
    with pytest.raises(ringside.RingValueError, match="differ: give one"):
        bot.counter("fills", "Fills", help="Other text")
    with pytest.raises(ringside.RingValueError, match="a counter has no unit"):
        ringside.Counter("orders", "Orders", unit="seconds", registry=bot)


def test_buckets_are_taken_checked_and_not_used(bot):
    default = (.005, .01, .025, .05, .075, .1, .25, .5, .75, 1.0, 2.5, 5.0, 7.5, 10.0, float("inf"))
    latency = ringside.Histogram("latency", "Latency", unit="s", buckets=default, registry=bot)
    assert bot.histogram("latency", unit="s", help="Latency", buckets=[1, 2]) is latency  # not part of its shape
    latency.observe(0.3)
    assert BotFile(bot.path).values("latency") == [300_000_000]  # recorded exactly, whatever the buckets
    with pytest.raises(ringside.RingValueError, match="not in increasing order"):
        bot.histogram("sizes", buckets=[1, 5, 2])
    with pytest.raises(ringside.RingValueError, match="not an iterable of numbers"):
        bot.histogram("sizes", buckets=["a"])
    assert "sizes" not in helps(bot)  # nothing registered
