"""The order desk of docs/why-was-it-slow.md: a thread that prices an order arriving every 2 ms.

An order's latency runs from its arrival to its price. Pricing takes about 0.8 ms of CPU, so the
desk keeps 40 % of a CPU busy. When other busy processes share the desk's CPU, the desk, woken for
an order, waits its turn on the CPU, and its orders take milliseconds, then hundreds: the tail the
walkthrough finds. Each order's latency is recorded with its order id as an exemplar.

    taskset -c 0 python3 why_was_it_slow.py [seconds]      # the desk, on CPU 0
    for i in 1 2 3; do taskset -c 0 python3 -c 'while True: pass' & done    # later: neighbours
"""

from __future__ import annotations

import sys
import threading
import time

import ringside


def price(order: int) -> int:
    """About 0.8 ms of arithmetic: what the desk does for one order."""
    total = order
    for step in range(7000):
        total = (total * 31 + step) % 1_000_003
    return total


def desk(latency: ringside.Histogram, seconds: float) -> None:
    interval = 2_000_000  # ns between orders
    start = time.monotonic_ns()
    for order in range(1, int(seconds * 1e9 / interval) + 1):
        arrival = start + order * interval
        wait = arrival - time.monotonic_ns()
        if wait > 0:
            time.sleep(wait / 1e9)  # no order yet: the desk sleeps, as on a socket
        price(order)
        latency.observe(max(0, time.monotonic_ns() - arrival), exemplar={"order_id": f"O-{order}"})


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 600.0
    bot = ringside.attach("order-desk")
    latency = bot.histogram("order_latency", unit="ns", help="From an order's arrival to its price")
    worker = threading.Thread(target=desk, args=(latency, seconds), name="order-desk")
    worker.start()
    worker.join()
    bot.close()


if __name__ == "__main__":
    main()
