"""prometheus_client's habits, on both backends: a metric declared as prometheus_client declares it
(documentation positional, the class called with the bot as its registry), buckets= taken and not
used, and series retired by remove() and clear() (the collector drops them from its pages)."""

import struct

import pytest

import ringside
from conftest import BotFile
from ringside import _pure


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


def test_history_as_csv_reads_with_pythons_csv_module_as_the_json_answer_says(backend, ring_dir, collector):
    import csv
    import io
    import json
    import time
    import urllib.error
    import urllib.request

    with ringside.Bot("csvbot", ring_dir, _backend=backend) as bot:
        fill = bot.histogram("fill", "Fill latency", ("symbol",), unit="s")
        odd = 'A,"B"'  # a label value holding a comma and quotes
        for _ in range(3):
            fill.labels(odd).observe(0.002)
            fill.labels("MSFT").observe(0.001)
            bot.counter("orders", "Orders").inc(2)
            time.sleep(0.3)

        def settled():
            to = int(time.time()) - 2  # a second no snapshot changes any more
            answer = json.loads(collector.get(f"/api/history?ring=csvbot&from={to - 60}&to={to}"))
            return (to, answer) if sum(len(series["points"]) for series in answer["series"]) >= 3 else None
        to, _ = collector.wait_for("three settled points of csvbot", settled)
        query = f"/api/history?ring=csvbot&from={to - 60}&to={to}"
        answer = json.loads(collector.get(query))
        with urllib.request.urlopen(collector.address + query + "&format=csv", timeout=10) as response:
            assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
            assert response.headers["X-Ringside-Truncated"] == "false"
            body = response.read().decode()
    assert body.endswith("\r\n")
    rows = list(csv.DictReader(io.StringIO(body, newline="")))
    expected = []
    for series in answer["series"]:
        for point in series["points"]:
            row = {"id": str(series["id"]), "ring": "csvbot", "metric": series["metric"], "kind": series["kind"],
                   "unit": series["unit"], "label_symbol": series["labels"].get("symbol", "")}
            row.update({column: "" if value is None else str(value) for column, value in zip(series["columns"], point)})
            expected.append(row)
    assert len(rows) == len(expected) >= 3
    for row, want in zip(rows, expected):
        assert {key: row[key] for key in want} == want
        assert all(row[key] == "" for key in row if key not in want)  # the other kinds' columns are empty
    assert {row["label_symbol"] for row in rows if row["metric"] == "fill"} == {odd, "MSFT"}
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(collector.address + "/api/history?format=xml", timeout=10)
    assert refused.value.code == 400
    assert refused.value.read().decode() == "bad request: format=xml: not json or csv\n"


def retired_word(bot, name, labels):
    """The `retired` word (0x014) of the registry entry of (name, labels): odd while retired."""
    data = BotFile(bot.path)
    return struct.unpack_from("<I", data.entries[data.index(name, labels)], 0x14)[0]


def test_remove_retires_a_series_in_its_entry_and_labels_again_revives_the_same_entry(bot):
    fill = bot.histogram("fill", "Fill latency", ("symbol",), unit="s")
    aapl = fill.labels("AAPL")
    aapl.observe(0.001)
    fill.labels("MSFT").observe(0.001)
    count = bot.metric_count
    fill.remove("AAPL")
    assert retired_word(bot, "fill", "symbol=AAPL") == 1
    assert retired_word(bot, "fill", "symbol=MSFT") == 0
    fill.remove("AAPL")  # retired already: nothing more
    fill.remove("NEVER")  # never asked for: nothing
    assert retired_word(bot, "fill", "symbol=AAPL") == 1
    again = fill.labels("AAPL")
    assert again is not aapl  # a new series object, as prometheus_client's
    assert retired_word(bot, "fill", "symbol=AAPL") == 2  # live again: the same entry
    assert bot.metric_count == count
    fill.remove(symbol="AAPL")  # by name too
    assert retired_word(bot, "fill", "symbol=AAPL") == 3
    with pytest.raises(ValueError, match="expected values"):
        fill.remove("A", "B")
    with pytest.raises(ValueError, match="no label names"):
        bot.counter("orders").remove()


def test_clear_retires_every_series_and_a_gauge_forgets_its_value(bot):
    level = bot.gauge("level", "Book level", ("venue",))
    for venue in ("X", "Y"):
        level.labels(venue).set(3.5)
    assert BotFile(bot.path).gauge("level", "venue=X") == 3.5
    level.clear()
    data = BotFile(bot.path)
    assert retired_word(bot, "level", "venue=X") == 1 and retired_word(bot, "level", "venue=Y") == 1
    assert data.gauge("level", "venue=X") is None  # gauge_set 0: no value set since
    level.labels("X").set(1.0)
    assert retired_word(bot, "level", "venue=X") == 2 and BotFile(bot.path).gauge("level", "venue=X") == 1.0


def test_churning_the_same_labels_takes_one_entry(backend, bot):
    orders = bot.counter("orders", "Orders", ("symbol",))
    orders.labels("AAPL").inc()
    count = bot.metric_count
    rounds = 100_000 if backend is not _pure else 20_000  # the pure backend's registration: 5 times the cost
    for _ in range(rounds):
        orders.remove("AAPL")
        orders.labels("AAPL").inc()
    assert bot.metric_count == count  # bounded: one entry, retired and revived
    assert retired_word(bot, "orders", "symbol=AAPL") == 2 * rounds  # even: live


def test_the_collector_drops_a_removed_series_from_every_page_and_a_revived_one_starts_anew(backend, ring_dir, collector):
    import json
    import urllib.request

    from conftest import find_series

    def metrics_page(accept=None):
        request = urllib.request.Request(collector.address + "/metrics", headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read().decode()

    with ringside.Bot("retiring", ring_dir, _backend=backend) as bot:
        orders = bot.counter("orders", "Orders", ("symbol",))
        fill = bot.histogram("fill", "Fill latency", ("symbol",), unit="s")
        level = bot.gauge("level", "Level", ("symbol",))
        for symbol in ("AAPL", "MSFT"):
            orders.labels(symbol).inc(5)
            fill.labels(symbol).observe(0.002)
            level.labels(symbol).set(7)
        collector.wait_for("both symbols' series", lambda: all(
            find_series(page, "retiring", metric, symbol=symbol) for page in [collector.latest()]
            for metric in ("orders", "fill", "level") for symbol in ("AAPL", "MSFT")))
        kept = fill.labels("AAPL")
        for family in (orders, fill, level):
            family.remove("AAPL")

        def gone():
            page = collector.latest()
            return all(find_series(page, "retiring", metric, symbol="AAPL") is None
                       and find_series(page, "retiring", metric, symbol="MSFT") is not None
                       for metric in ("orders", "fill", "level"))
        collector.wait_for("AAPL's series gone from /latest, MSFT's kept", gone)
        for accept in (None, "application/openmetrics-text; version=1.0.0"):
            page = metrics_page(accept)
            assert 'symbol="AAPL"' not in page and 'symbol="MSFT"' in page, accept
        assert 'symbol="AAPL"' not in collector.get("/metrics?ring=retiring")
        assert "AAPL" not in json.dumps(collector.latest()["series"])
        kept.observe(0.003)  # through a series object kept from before: dropped by the collector, counted
        collector.wait_for("the kept object's record refused", lambda: next(
            ring for ring in collector.latest()["rings"] if ring["name"] == "retiring")["records_refused_total"] >= 1)
        orders.labels("AAPL").inc(2)  # revived: a counter from zero, as Prometheus reads a reset
        revived = collector.wait_for("AAPL's counter again", lambda: find_series(
            collector.latest(), "retiring", "orders", symbol="AAPL"))
        assert revived["total"] == 2
        assert find_series(collector.latest(), "retiring", "level", symbol="AAPL") is None  # not asked again
        assert find_series(collector.latest(), "retiring", "orders", symbol="MSFT")["total"] == 5


def test_a_hostile_retired_word_flipping_millions_of_times_never_breaks_the_collector(ring_dir, collector):
    import mmap
    import random
    import threading
    import time

    from conftest import find_series

    bot = ringside.Bot("flipper", ring_dir, _backend=_pure)
    orders = bot.counter("orders", "Orders", ("symbol",))
    fill = bot.histogram("fill", "Fill", ("symbol",), unit="s")
    for symbol in ("A", "B"):
        orders.labels(symbol).inc()
        fill.labels(symbol).observe(0.001)
    collector.wait_for("the series", lambda: find_series(collector.latest(), "flipper", "orders", symbol="A"))
    data = BotFile(bot.path)
    words = [(4096 + 512 * data.index(name, labels) + 0x14) // 4
             for name, labels in (("orders", "symbol=A"), ("fill", "symbol=A"))]
    stop = threading.Event()
    flips = [0]

    def flip():  # as a hostile producer would: any u32, as fast as a thread can
        with open(bot.path, "r+b") as file:
            mapped = mmap.mmap(file.fileno(), 4096 + 512 * 8)
            view = memoryview(mapped).cast("I")
            garbage = [random.getrandbits(32) for _ in range(4096)]
            count = 0
            while not stop.is_set():
                for value in garbage:
                    view[words[0]] = value
                    view[words[1]] = count
                    count += 1
            flips[0] = 2 * count
            view[words[0]] = view[words[1]] = 0  # live again, for the end
            view.release()
            mapped.close()

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            orders.labels("A").inc()
            fill.labels("A").observe(0.002)
            assert "ringside_ring_records_refused_total" in collector.get("/metrics")
            collector.latest()
    finally:
        stop.set()
        flipper.join()
    assert collector.process.poll() is None, "\n".join(collector.log)
    assert flips[0] > 1_000_000  # a million flips at least, in the 3 s
    orders.labels("A").inc(7)
    collector.wait_for("orders{A} live again", lambda: find_series(collector.latest(), "flipper", "orders", symbol="A"))
    assert find_series(collector.latest(), "flipper", "orders", symbol="B")["total"] == 1  # the other series untouched
    bot.close()
