"""What the collector's OTLP exports cost on the wire, per series per minute.

A producer process writes a realistic mix of series (by default 1,000: 200 histograms of
lognormal latencies around 50 us, each taking 20 values a second; 600 counters, each moving a
little every second; 200 gauges, set every second); ringside-collector pushes them with
--otlp-endpoint to a receiver in this process, which counts every request's bytes as they come:
the request line and headers, and the gzipped body. Exports are counted from the second minute
on, once the histograms' buckets have spread as a long-running bot's have. Reported: the bytes an
export takes on average, and per series per minute at --interval (10 s by default: 6 exports a
minute), in all and for the body alone.

    python tools/python/bench/otlp_bytes.py [--collector PATH] [--series N] [--histograms H]
        [--minutes M] [--interval 10s] [--native-histograms SCHEMA] [--json]

Needs the ringside package and ringside-collector (--collector, else $RINGSIDE_COLLECTOR, else the
checkout's .build/release or .build/debug).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from collector_binary import collector_path

PRODUCER = """
import math, random, sys, time
import ringside
directory, histograms, counters, gauges = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
bot = ringside.Bot("otlpbytes", directory, max_metrics=4096)
latency = bot.histogram("request_latency", unit="ns", labelnames=("endpoint",), help="Request latency")
hits = bot.counter("requests", labelnames=("endpoint",), help="Requests served")
depth = bot.gauge("queue_depth", labelnames=("endpoint",), help="Requests waiting")
random.seed(7)
lat = [latency.labels(endpoint=f"e{i}") for i in range(histograms)]
hit = [hits.labels(endpoint=f"e{i}") for i in range(counters)]
dep = [depth.labels(endpoint=f"e{i}") for i in range(gauges)]
while True:
    began = time.monotonic()
    for child in lat:
        for _ in range(20):
            child.observe(int(50_000 * math.exp(random.gauss(0, 0.6))))
    for child in hit:
        child.inc(random.randint(0, 40))
    for child in dep:
        child.set(random.randint(0, 500))
    time.sleep(max(0.0, 1 - (time.monotonic() - began)))
"""


class Counting(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    exports: list[tuple[float, int, int]] = []  # (monotonic time, head bytes, body bytes)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        head = len(self.requestline) + 2 + len(str(self.headers).replace("\n", "\r\n"))
        Counting.exports.append((time.monotonic(), head, len(body)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *arguments: object) -> None:
        pass


def parse_duration(text: str) -> float:
    """Nanoseconds in a duration as the collector writes them: 10s, 500ms, 1m."""
    for unit, nanos in (("ms", 1e6), ("us", 1e3), ("ns", 1), ("s", 1e9), ("m", 60e9), ("h", 3600e9)):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * nanos
    raise SystemExit(f"--interval {text}: expected a duration such as 10s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collector")
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--histograms", type=int, default=200)
    parser.add_argument("--minutes", type=float, default=3)
    parser.add_argument("--interval", default="10s")
    parser.add_argument("--native-histograms", dest="schema")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    counters = (options.series - options.histograms) * 3 // 4
    gauges = options.series - options.histograms - counters

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    directory = tempfile.mkdtemp(prefix="ringside-otlp-bytes.", dir="/dev/shm")
    producer = subprocess.Popen([sys.executable, "-c", PRODUCER, directory, str(options.histograms), str(counters), str(gauges)])
    arguments = [collector_path(options.collector), "--dir", directory, "--listen", "127.0.0.1:0", "--history", "0",
                 "--otlp-endpoint", f"http://127.0.0.1:{server.server_address[1]}", "--otlp-interval", options.interval]
    if options.schema is not None:
        arguments += ["--native-histograms", options.schema]
    collector = subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        began = time.monotonic()
        time.sleep(options.minutes * 60 + 1)
    finally:
        collector.terminate()
        producer.terminate()
        collector.wait()
        producer.wait()
        shutil.rmtree(directory, ignore_errors=True)
        server.shutdown()
    counted = [export for export in Counting.exports if export[0] >= began + 60]
    if len(counted) < 2:
        sys.exit(f"only {len(counted)} exports after the first minute: run longer (--minutes)")
    head = sum(export[1] for export in counted) / len(counted)
    body = sum(export[2] for export in counted) / len(counted)
    per_minute = 60 / (parse_duration(options.interval) / 1e9)  # exports a minute at the interval
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "series": options.series, "histograms": options.histograms, "counters": counters, "gauges": gauges,
        "interval": options.interval, "scale": options.schema or "5 (default)", "exports": len(counted),
        "bytes_per_export": round(head + body), "body_bytes_per_export": round(body),
        "bytes_per_series_per_minute": round((head + body) * per_minute / options.series, 1),
        "body_bytes_per_series_per_minute": round(body * per_minute / options.series, 1),
    }
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:34} {value}")


if __name__ == "__main__":
    main()
