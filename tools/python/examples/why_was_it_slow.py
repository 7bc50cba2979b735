"""The order desk of docs/why-was-it-slow.md: a thread that prices one order every 2 ms.

Pricing an order takes about 100 us of CPU. When another busy process shares the desk's CPU, the
scheduler makes the desk wait its turn now and then, and those orders take milliseconds: the
tail the walkthrough finds. Each order's latency is recorded with its order id as an exemplar.

    taskset -c 0 python3 why_was_it_slow.py [seconds]      # the desk, on CPU 0
    taskset -c 0 python3 -c 'while True: pass'             # later: a neighbour on CPU 0
"""

from __future__ import annotations

import sys
import threading
import time

import ringside


def price(order: int) -> int:
    """About 100 us of arithmetic: what the desk does for one order."""
    total = order
    for step in range(3000):
        total = (total * 31 + step) % 1_000_003
    return total


def desk(latency: ringside.Histogram, until: float) -> None:
    order = 0
    while time.monotonic() < until:
        order += 1
        start = time.perf_counter_ns()
        price(order)
        latency.observe(time.perf_counter_ns() - start, exemplar={"order_id": f"O-{order}"})
        time.sleep(0.002)


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 600.0
    bot = ringside.attach("order-desk")
    latency = bot.histogram("order_latency", unit="ns", help="From an order's arrival to its price")
    worker = threading.Thread(target=desk, args=(latency, time.monotonic() + seconds), name="order-desk")
    worker.start()
    worker.join()
    bot.close()


if __name__ == "__main__":
    main()
