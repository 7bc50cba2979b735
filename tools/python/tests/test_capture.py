"""The collector's captures of its flight recorder, read back by the readers of their formats: a
real collector with --capture-dir, a Python bot recording known latencies (every tenth with an
exemplar) on two named threads, POST /api/capture; then the capture's Perfetto trace (.pftrace)
decoded with the protos PyPI's `perfetto` ships (perfetto_trace_pb2) and its interval log (.hlog)
by HdrHistogram's own Python package (PyPI's `hdrhistogram`): its slices' count and durations,
and the log's counts, are what the bot recorded in the captured span."""

import json
import subprocess
import sys
import textwrap
import urllib.request

from conftest import Collector, _collector_path, missing
from traces import read_hlog, read_pftrace, require_hdrhistogram, require_perfetto, slices_of_values

COUNT = 300  # cap_fill values per thread
THREADS = ("cap-fills-a", "cap-fills-b")

BOT = textwrap.dedent("""
    import sys, threading
    import ringside

    bot = ringside.Bot("pycap", sys.argv[1])
    fill = bot.histogram("cap_fill", unit="ns")
    size = bot.histogram("cap_size", unit="bytes")

    def work(t):
        for i in range(1, COUNT + 1):
            value = (t + 1) * 50_000 + i * 13
            if i % 10 == 0:
                fill.observe(value, exemplar={"order_id": f"{t}-{i}"})
            else:
                fill.observe(value)
        size.observe(512 + t)
        recorded.wait()
        done.wait()  # holds its lane until the test is done: a lane let go is the next thread's

    recorded = threading.Barrier(len(THREADS) + 1)
    done = threading.Event()
    threads = [threading.Thread(target=work, args=(t,), name=name, daemon=True) for t, name in enumerate(THREADS)]
    for thread in threads:
        thread.start()
    recorded.wait()
    print("ready", flush=True)
    sys.stdin.read()
    done.set()
""").replace("COUNT", str(COUNT)).replace("THREADS", repr(THREADS))


def written_values():
    """Each thread's cap_fill values, and those with an exemplar (the value and its order id)."""
    values, exemplars = {}, {}
    for t, name in enumerate(THREADS):
        values[name] = [(t + 1) * 50_000 + i * 13 for i in range(1, COUNT + 1)]
        for i in range(10, COUNT + 1, 10):
            exemplars[(t + 1) * 50_000 + i * 13] = f"{t}-{i}"
    return values, exemplars


def captured(ring_dir, tmp_path):
    """Runs the collector and the bot, asks for a capture of the bot once the collector drained
    its values, and returns the capture as /api/captures lists it and the capture directory."""
    binary = _collector_path()
    if binary is None:
        missing("ringside-collector is not built: run `swift build` or set RINGSIDE_COLLECTOR")
    directory = tmp_path / "captures"
    collector = Collector(binary, ring_dir, "--capture-dir", str(directory), "--recorder-seconds", "1m",
                          "--capture-after", "200ms", "--capture-min-interval", "1h")
    bot = subprocess.Popen([sys.executable, "-c", BOT, ring_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert bot.stdout.readline().strip() == "ready"
        collector.wait_until_equal("the bot's values drained",
                                   lambda: (collector.series("pycap", "cap_fill") or {}).get("total_count"), COUNT * len(THREADS))
        request = urllib.request.Request(collector.address + "/api/capture?bot=pycap", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 202
            asked = json.loads(response.read())

        def finished():
            listed = json.loads(collector.get("/api/captures"))["captures"]
            return next((entry for entry in listed if entry["id"] == asked["id"] and entry["status"] != "pending"), None)
        capture = collector.wait_for("the capture written", finished, timeout=60)
    finally:
        bot.communicate(timeout=30)  # its input's end lets it finish
        collector.stop()
    assert capture["status"] == "written" and capture["trigger"] == "request" and capture["bots"] == ["pycap"], capture
    return capture, directory


def capture_file(capture, directory, suffix):
    [name] = [name for name in capture["files"] if name.endswith(suffix)]
    return directory / name


def test_capture_trace_decodes_with_perfettos_protos_and_holds_what_the_bot_recorded(ring_dir, tmp_path):
    require_perfetto()
    capture, directory = captured(ring_dir, tmp_path)
    tracks, slices, counters = read_pftrace(capture_file(capture, directory, ".pftrace"))
    processes = [track.process.process_name for track in tracks.values() if track.HasField("process")]
    assert len(processes) == 1 and processes[0].startswith("bot pycap (pid "), processes

    # Every value recorded is a slice of its thread, its duration the value in ns, exactly; each
    # exemplar an argument of its value's slice.
    values, exemplars = written_values()
    assert all(len(values[name]) == COUNT for name in THREADS)
    fills = slices_of_values(slices, "cap_fill", THREADS, values, exemplars)
    # A size is no time: a counter track.
    assert sorted(value for track, _, value in counters if track == "cap_size") == [512.0, 513.0]

    # The JSON trace holds as many slices, and the capture counts its records: values and exemplar records.
    with open(capture_file(capture, directory, ".trace.json"), encoding="utf-8") as file:
        events = json.load(file)["traceEvents"]
    assert sum(1 for event in events if event["ph"] == "X" and event["name"] == "cap_fill") == len(fills)
    assert capture["records"] >= len(fills) + len(exemplars) + 2 and capture["records_left_out"] == 0, capture


def test_capture_hlog_decodes_with_hdrhistogram(ring_dir, tmp_path):
    require_hdrhistogram()
    capture, directory = captured(ring_dir, tmp_path)
    totals, maxima = read_hlog(str(capture_file(capture, directory, ".hlog")))
    values, _ = written_values()
    largest = max(max(each) for each in values.values())
    assert totals == {"pycap.cap_fill@ns": COUNT * len(THREADS), "pycap.cap_size@bytes": 2}
    assert abs(maxima["pycap.cap_fill@ns"] - largest) <= largest / 1000
