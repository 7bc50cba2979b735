"""ringside-dump postmortem of a Python bot killed with SIGKILL, read back by the readers of its
formats: the Perfetto trace (.pftrace) decoded with the protos PyPI's `perfetto` ships
(perfetto_trace_pb2), the Chrome trace JSON event for event against it, and the interval log
(.hlog) by HdrHistogram's own Python package (PyPI's `hdrhistogram`)."""

import json
import os
import signal
import subprocess
import sys
import textwrap

from conftest import _collector_path, missing
from traces import read_hlog, read_pftrace, require_hdrhistogram, require_perfetto, slices_of_values, thread_of

COUNT = 400  # py_fill values per thread
THREADS = ("py-fills-a", "py-fills-b")

BOT = textwrap.dedent("""
    import sys, threading, time
    import ringside

    bot = ringside.Bot("pmpy", sys.argv[1])
    fill = bot.histogram("py_fill", unit="ns", labelnames=("venue",))
    size = bot.histogram("py_size", unit="bytes")
    orders = bot.counter("py_orders")
    level = bot.gauge("py_level")

    def work(t):
        for i in range(1, COUNT + 1):
            value = (t + 1) * 100_000 + i * 7
            if i % 8 == 0:
                fill.labels(venue="X").observe(value, exemplar={"order_id": f"{t}-{i}"})
            else:
                fill.labels(venue="X").observe(value)
            orders.inc()
        size.observe(4096 + t)
        recorded.wait()
        threading.Event().wait()  # holds its lane until the kill: a lane let go is the next thread's

    recorded = threading.Barrier(len(THREADS) + 1)
    for t, name in enumerate(THREADS):
        threading.Thread(target=work, args=(t,), name=name, daemon=True).start()
    recorded.wait()
    level.set(12.5)
    print("ready", flush=True)
    time.sleep(600)
""").replace("COUNT", str(COUNT)).replace("THREADS", repr(THREADS))


def dump_path():
    collector = _collector_path()
    if collector is None:
        return None
    path = os.path.join(os.path.dirname(collector), "ringside-dump")
    return path if os.access(path, os.X_OK) else None


def written_values():
    """Each thread's py_fill values, and those with an exemplar (the value and its order id)."""
    values, exemplars = {}, {}
    for t, name in enumerate(THREADS):
        values[name] = [(t + 1) * 100_000 + i * 7 for i in range(1, COUNT + 1)]
        for i in range(8, COUNT + 1, 8):
            exemplars[((t + 1) * 100_000 + i * 7)] = f"{t}-{i}"
    return values, exemplars


def killed_bot_postmortem(ring_dir, out_dir):
    """Runs the bot, kills it with SIGKILL once it has recorded, and runs postmortem on its file."""
    dump = dump_path()
    if dump is None:
        missing("ringside-dump is not built: run `swift build` or set RINGSIDE_COLLECTOR beside it")
    bot = subprocess.Popen([sys.executable, "-c", BOT, ring_dir], stdout=subprocess.PIPE, text=True)
    try:
        assert bot.stdout.readline().strip() == "ready"
    finally:
        bot.send_signal(signal.SIGKILL)
        bot.wait(30)
    assert bot.returncode == -signal.SIGKILL
    run = subprocess.run([dump, "--dir", ring_dir, "postmortem", "pmpy", "--out", out_dir],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_postmortem_trace_decodes_with_perfettos_protos_and_matches_what_the_bot_recorded(ring_dir, tmp_path):
    require_perfetto()
    output = killed_bot_postmortem(ring_dir, str(tmp_path))
    for name in THREADS:
        assert name in output

    tracks, slices, counters = read_pftrace(tmp_path / "pmpy-postmortem.pftrace")
    processes = [track for track in tracks.values() if track.HasField("process")]
    assert len(processes) == 1 and processes[0].process.process_name.startswith("bot pmpy (pid ")
    threads = {thread_of(track.name) for track in tracks.values() if track.parent_uuid and not track.HasField("counter")}
    assert threads >= set(THREADS)

    # Every value recorded is a slice of its thread, its duration the value in ns, exactly; each
    # exemplar an argument of its value's slice.
    values, exemplars = written_values()
    assert all(len(values[name]) == COUNT for name in THREADS)
    slices_of_values(slices, 'py_fill{venue="X"}', THREADS, values, exemplars)
    # A size is no time: a counter track, as are the counter's total and the gauge's value.
    assert sorted(value for track, _, value in counters if track == "py_size") == [4096.0, 4097.0]
    assert [value for track, _, value in counters if track == "py_orders"] == [COUNT * len(THREADS)]
    assert 12.5 in [value for track, _, value in counters if track == "py_level"]

    # The JSON holds the same events: each slice at the same time, for as long.
    with open(tmp_path / "pmpy-postmortem.trace.json", encoding="utf-8") as file:
        events = json.load(file)["traceEvents"]
    names = {(event["pid"], event["tid"]): event["args"]["name"] for event in events
             if event["ph"] == "M" and event["name"] == "thread_name"}
    json_slices = sorted((names[(event["pid"], event["tid"])], event["name"], round(float(event["ts"]) * 1000),
                          round(float(event["dur"]) * 1000), json.dumps(event["args"], sort_keys=True))
                         for event in events if event["ph"] == "X")
    assert json_slices == sorted((track, name, start, duration, json.dumps(args, sort_keys=True))
                                 for track, name, start, duration, args in slices)
    json_counters = sorted((event["name"], round(float(event["ts"]) * 1000), float(event["args"]["value"]))
                           for event in events if event["ph"] == "C")
    assert json_counters == sorted(counters)


def test_postmortem_hlog_decodes_with_hdrhistogram(ring_dir, tmp_path):
    require_hdrhistogram()
    killed_bot_postmortem(ring_dir, str(tmp_path))
    path = str(tmp_path / "pmpy-postmortem.hlog")
    totals, maxima = read_hlog(path)
    values, _ = written_values()
    largest = max(max(each) for each in values.values())
    assert totals == {"pmpy.py_fill{venue=X}@ns": COUNT * len(THREADS), "pmpy.py_size@bytes": 2}
    assert abs(maxima["pmpy.py_fill{venue=X}@ns"] - largest) <= largest / 1000
