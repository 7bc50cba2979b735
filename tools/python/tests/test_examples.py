"""The examples under tools/python/examples run as their documents say."""

import os
import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def test_the_order_desk_records_its_orders_with_their_ids(collector, ring_dir):
    """docs/why-was-it-slow.md's desk: every order's latency, the slowest with their order ids,
    from the thread named order-desk."""
    environment = dict(os.environ, RINGSIDE_DIR=ring_dir)
    run = subprocess.run([sys.executable, str(EXAMPLES / "why_was_it_slow.py"), "0.5"], env=environment,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr

    def slowest():
        series = collector.series("order-desk", "order_latency")
        if series is None:
            return None
        return [exemplar for window in series["windows"].values() for exemplar in window.get("exemplars", [])]

    exemplars = collector.wait_for("the desk's orders in /latest", slowest)
    assert all(e["labels"]["order_id"].startswith("O-") and e["thread_name"] == "order-desk" for e in exemplars)
    assert all(e["value"] > 0 for e in exemplars)
