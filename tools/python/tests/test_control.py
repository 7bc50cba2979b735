"""The operator's control (CONTROL in ringside.h): a metric's control word turns it off or samples
a histogram 1 in 2^n while the bot runs, the bot's bot_control turns it all off, and the producer
reads them at every call. The tests store the words into the file as the operator's tool does, then
read the file as it lies (BotFile), on both backends."""

import math
import os
import struct
import subprocess
import threading

import ringside
from conftest import CONTROL_BOT_OFF, CONTROL_OFF, BotFile, _ringside, run_python, set_bot_control, set_control
from test_steps import (
    KINDS,
    METRICS,
    UNITS,
    assert_same_one_lane_file,
    calls,
    comparable,
    reference_program,
    register_all,
    run_reference,
    scale_of,
)

assert reference_program  # a fixture of test_steps: the C producer built into a program fed the calls


def backend_expression(backend):
    """The backend, as code for a script run by run_python."""
    name = "_ringside" if backend is _ringside else "_pure"
    return f"__import__('ringside.{name}').{name}"


def declare_consumer(path, pid, reads_weights):
    """What a consumer stores at attach: its pid, and again when it reads gather cells."""
    with open(path, "r+b") as file:
        os.pwrite(file.fileno(), struct.pack("<ii", pid, pid if reads_weights else 0), 0x100)


def make_metrics(bot):
    """One metric of each path a call takes: a histogram (its observe, an exemplar's, a span), a
    histogram and a counter of steps, a counter and a gauge."""
    return {
        "latency": bot.histogram("latency", unit="ns"),
        "timed": bot.histogram("timed", unit="ns"),
        "seconds": bot.histogram("seconds", unit="s"),
        "slippage": bot.histogram("slippage", resolution=0.01, signed=True),
        "orders": bot.counter("orders"),
        "dollars": bot.counter("dollars", resolution=1e-6),
        "level": bot.gauge("level"),
    }


def record_each(metrics, round):
    """One call of each path; returns what each returned."""
    latency = metrics["latency"]
    return [
        latency.observe(round),
        latency.observe(round + 100, exemplar={"order_id": f"A{round}"}),
        metrics["timed"].stop(metrics["timed"].start()),
        metrics["seconds"].observe(0.5),
        metrics["slippage"].observe(-3.5),
        metrics["slippage"].observe(float("inf")),  # clamped: counted in `clamped`, unless the metric is off
        metrics["orders"].inc(2),
        metrics["dollars"].inc(0.37),
        metrics["dollars"].inc(-1.0),  # clamped: counted (and nothing added), unless the metric is off
        metrics["level"].set(round + 0.5),
    ]


def figures(path):
    """What the file holds of make_metrics's metrics."""
    file = BotFile(path)
    return {"latency": (file.values("latency"), file.exemplars("latency")),
            "timed": len(file.spans("timed")),
            "seconds": file.values("seconds"),
            "slippage": (file.signed_values("slippage"), file.clamped("slippage")),
            "orders": file.counter("orders"),
            "dollars": (file.counter("dollars"), file.clamped("dollars")),
            "level": (file.gauge("level"), file.values("level"))}


WRITTEN = [True, True, True, True, True, True, None, None, None, True]
NOTHING = [False, False, False, False, False, False, None, None, None, False]


def test_a_metric_turned_off_records_and_counts_nothing_until_it_is_on_again(ring_dir, backend):
    bot = ringside.Bot("switched", ring_dir, _backend=backend)
    metrics = make_metrics(bot)
    assert record_each(metrics, 1) == WRITTEN
    before = figures(bot.path)
    for name in metrics:
        set_control(bot.path, name, CONTROL_OFF)
    assert record_each(metrics, 2) == NOTHING
    assert figures(bot.path) == before, "nothing recorded, nothing counted (a clamp neither), the gauge not set"
    for name in metrics:
        set_control(bot.path, name, 0)
    assert record_each(metrics, 3) == WRITTEN
    after = figures(bot.path)
    assert after["latency"][0] == before["latency"][0] + [3, 103]
    assert after["orders"] == before["orders"] + 2 and after["level"][0] == 3.5
    assert after["slippage"] == (before["slippage"][0] + [-350, 2**63 - 1], before["slippage"][1] + 1)  # none while off
    bot.close()


def test_a_metric_off_leaves_the_others_alone(ring_dir, backend):
    bot = ringside.Bot("one-off", ring_dir, _backend=backend)
    off, on = bot.histogram("off"), bot.histogram("on")
    set_control(bot.path, "off", CONTROL_OFF)
    assert [off.observe(1), on.observe(2)] == [False, True]
    file = BotFile(bot.path)
    assert (file.values("off"), file.values("on")) == ([], [2])
    bot.close()


def test_the_bot_turned_off_records_nothing_until_it_is_on_again(ring_dir, backend):
    bot = ringside.Bot("bot-off", ring_dir, _backend=backend)
    metrics = make_metrics(bot)
    assert record_each(metrics, 1) == WRITTEN
    before = figures(bot.path)
    # As the tool turns a bot off: bot_control first, then every published metric's word.
    set_bot_control(bot.path, CONTROL_BOT_OFF)
    for name in metrics:
        set_control(bot.path, name, CONTROL_BOT_OFF)
    assert record_each(metrics, 2) == NOTHING
    assert figures(bot.path) == before
    set_bot_control(bot.path, 0)
    for name in metrics:
        set_control(bot.path, name, 0)
    assert record_each(metrics, 3) == WRITTEN
    assert figures(bot.path)["orders"] == before["orders"] + 2
    bot.close()


def test_a_metric_registered_while_the_bot_is_off_starts_off(ring_dir, backend):
    bot = ringside.Bot("late", ring_dir, _backend=backend)
    bot.counter("early").inc()
    set_bot_control(bot.path, CONTROL_BOT_OFF)
    late = bot.histogram("late")
    file = BotFile(bot.path)
    assert file.controls[file.index("late")] == CONTROL_BOT_OFF
    assert file.controls[file.index("early")] == 0, "the tool's business, not the producer's"
    assert late.observe(5) is False and BotFile(bot.path).values("late") == []
    bot.close()


def test_the_words_stay_in_the_file_when_the_bot_attaches_it_again(ring_dir, backend):
    bot = ringside.Bot("restart", ring_dir, _backend=backend)
    bot.histogram("latency")
    set_control(bot.path, "latency", CONTROL_OFF | 3)
    bot.close()
    bot = ringside.Bot("restart", ring_dir, _backend=backend)
    assert bot.histogram("latency").observe(1) is False
    assert BotFile(bot.path).controls == [CONTROL_OFF | 3]
    bot.close()


def sampled_run(ring_dir, backend, reads_weights, calls):
    bot = ringside.Bot("sampled", ring_dir, _backend=backend)
    fill = bot.histogram("fill")
    declare_consumer(bot.path, 4242, reads_weights)
    set_control(bot.path, "fill", 7)  # 1 in 2^7
    values = [1 + (index * 2_654_435_761) % 1_000_000 for index in range(calls)]
    written = [fill.observe(value) for value in values]
    file = BotFile(bot.path)
    bot.close()
    return values, written, file


def test_a_histogram_sampled_1_in_128_writes_every_128th_call_and_gathers_the_rest(ring_dir, backend):
    calls = 128 * 40 + 77
    values, written, file = sampled_run(ring_dir, backend, True, calls)
    assert [index for index, was in enumerate(written) if was] == list(range(127, calls, 128))
    assert file.values("fill") == values[127::128]
    assert file.weights("fill") == [128] * 40, "each record stands for itself and the 127 calls gathered before it"
    gathered, gathered_sum, gathered_max = file.gathered("fill")
    assert len(file.values("fill")) + gathered == calls and file.dropped("fill") == 0
    assert sum(file.values("fill")) + gathered_sum == sum(values)
    assert max(max(file.values("fill")), gathered_max) == max(values)


def test_a_control_sample_writes_every_call_for_a_consumer_that_reads_no_gather_cells(ring_dir, backend):
    values, written, file = sampled_run(ring_dir, backend, False, 1000)
    assert all(written) and file.values("fill") == values and file.weights("fill") == [1] * 1000
    assert file.gathered("fill") == (0, 0, 0)


def test_a_histogram_under_any_control_records_its_calls_without_their_exemplars(ring_dir, backend):
    bot = ringside.Bot("no-exemplars", ring_dir, _backend=backend)
    fill, timed = bot.histogram("fill"), bot.histogram("timed", unit="ns")
    fill.observe(1, exemplar={"order_id": "A1"})
    set_control(bot.path, "fill", 4)  # sampled, but the consumer reads no gather cells: every call written
    set_control(bot.path, "timed", 4)
    assert fill.observe(2, exemplar={"order_id": "A2"}) is True
    assert timed.stop(timed.start(), {"order_id": "A3"}) is True
    file = BotFile(bot.path)
    assert file.values("fill") == [1, 2] and [text for _, _, text in file.exemplars("fill")] == ["order_id=A1"]
    assert len(file.spans("timed")) == 1 and file.exemplars("timed") == []
    bot.close()


def test_a_control_sample_records_a_call_without_its_exemplar_and_counters_ignore_it(ring_dir, backend):
    bot = ringside.Bot("sampled-exemplar", ring_dir, _backend=backend)
    fill, orders = bot.histogram("fill"), bot.counter("orders")
    declare_consumer(bot.path, 4242, True)
    set_control(bot.path, "fill", 2)
    set_control(bot.path, "orders", 2)  # no sampling for a counter: counted as ever
    written = [fill.observe(value, exemplar={"order_id": f"A{value}"}) for value in range(1, 9)]
    for _ in range(5):
        orders.inc()
    file = BotFile(bot.path)
    assert written == [False, False, False, True, False, False, False, True]
    assert (file.values("fill"), file.weights("fill"), file.exemplars("fill")) == ([4, 8], [4, 4], [])
    assert file.gathered("fill") == (6, 1 + 2 + 3 + 5 + 6 + 7, 7)
    assert file.counter("orders") == 5
    bot.close()


def test_a_histogram_registered_1_in_2_is_sampled_so_first_then_by_the_control(ring_dir, backend):
    bot = ringside.Bot("both", ring_dir, _backend=backend)
    fill = bot.histogram("fill", sample_every=2)
    declare_consumer(bot.path, 4242, True)
    set_control(bot.path, "fill", 1)
    values = list(range(1, 41))
    written = [fill.observe(value) for value in values]
    file = BotFile(bot.path)
    # Calls 1, 3, 5, ... pass the registered sampling; the control writes every 2nd of them.
    assert [value for value, was in zip(values, written) if was] == file.values("fill") == values[2::4]
    assert file.weights("fill") == [2] * 10 and file.gathered("fill")[:2] == (10, sum(values[0::4]))
    bot.close()


def test_a_thread_without_a_lane_counts_nothing_for_a_metric_off(ring_dir, backend):
    bot = ringside.Bot("laneless", ring_dir, max_lanes=1, _backend=backend)
    orders, fill = bot.counter("orders"), bot.histogram("fill")
    orders.inc()  # this thread holds the one lane
    set_control(bot.path, "orders", CONTROL_OFF)
    set_control(bot.path, "fill", CONTROL_OFF)
    thread = threading.Thread(target=lambda: (orders.inc(5), fill.observe(3)))
    thread.start()
    thread.join()
    file = BotFile(bot.path)
    assert (file.counter("orders"), file.dropped("fill")) == (1, 0), "neither counted nor dropped"
    set_control(bot.path, "orders", 0)
    thread = threading.Thread(target=lambda: orders.inc(5))
    thread.start()
    thread.join()
    assert BotFile(bot.path).counter("orders") == 6
    bot.close()


def test_a_worker_registering_a_metric_off_in_the_bots_file_starts_it_off(ring_dir, backend):
    bot = ringside.Bot("workers", ring_dir, _backend=backend)
    bot.histogram("latency")
    bot.counter("orders")
    set_control(bot.path, "latency", CONTROL_OFF | 5)
    worker = ringside.Bot("workers", ring_dir, worker=True, _backend=backend)
    latency, orders = worker.histogram("latency"), worker.counter("orders")
    assert latency.observe(1) is False
    orders.inc()
    file = BotFile(worker.path)
    assert (file.controls, file.values("latency"), file.counter("orders")) == ([CONTROL_OFF | 5, 0], [], 1)
    set_bot_control(bot.path, CONTROL_BOT_OFF)  # the bot's bot_control reaches the worker's next metric
    worker.histogram("next")
    assert BotFile(worker.path).controls[2] == CONTROL_BOT_OFF
    worker.close()
    bot.close()


FORK = """
import os, struct, ringside
bot = ringside.Bot("forked", {directory!r}, _backend={backend})
off, on = bot.histogram("off"), bot.histogram("on")
cells_offset = struct.unpack_from("<Q", open(bot.path, "rb").read(0x30), 0x28)[0]
with open(bot.path, "r+b") as file:
    os.pwrite(file.fileno(), struct.pack("<I", 0x80000000), cells_offset + 0x30)  # "off": metric 0
pid = os.fork()
if pid == 0:
    print("child", os.getpid(), off.observe(1), on.observe(2), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
bot.close()
"""


def test_a_forked_child_copies_the_off_word_into_its_worker_file(ring_dir, backend):
    result = run_python(FORK.format(directory=ring_dir, backend=backend_expression(backend)))
    assert result.returncode == 0, result.stderr
    _, pid, *returned = next(line for line in result.stdout.splitlines() if line.startswith("child ")).split()
    assert returned == ["False", "True"]
    worker = BotFile(f"{ring_dir}/ringside.forked@{pid}")
    assert (worker.controls, worker.values("off"), worker.values("on")) == ([CONTROL_OFF, 0], [], [2])


# The operator's switches at points of test_steps' calls (the call's position: lines), each as the
# reference program's line and as the test stores it: (metric name or None for bot_control, word).
SWITCHES = {
    0: [("consumer", 4242)],
    400: [("slippage_bps", 3), ("commission_usd", CONTROL_OFF), ("signal", 2)],
    1200: [(None, CONTROL_BOT_OFF)] + [(name, CONTROL_BOT_OFF) for name, *_ in METRICS] + [("late", None)],
    1700: [(None, 0)] + [(name, 0) for name, *_ in METRICS] + [("order_size", CONTROL_OFF | 5), ("pnl_usd", 4)],
    2600: [("order_size", 0), ("pnl_usd", 0), ("notional", 15), ("fees", 1)],
}


def test_each_backend_writes_what_the_c_producer_writes_byte_for_byte_under_control(backend, ring_dir, reference_program):
    """test_steps' calls, with metrics and the bot switched off, sampled and back on at the same
    calls, and a metric registered while the bot is off: the file, gather cells and weighted
    records included, is the C producer's byte for byte (a lane large enough that the C producer's
    own sampling of a filling lane never starts)."""
    names = [name for name, *_ in METRICS]
    lines = [f"r {name} {KINDS[kind]} {UNITS[unit]} {int(signed)} {scale_of(resolution)} {every}\n"
             for name, kind, unit, resolution, signed, every in METRICS]
    every_call = calls()
    for position, (index, value) in enumerate(every_call):
        for name, word in SWITCHES.get(position, []):
            lines.append("w 4242\n" if name == "consumer" else f"b {word}\n" if name is None
                         else "r late 3 0 0 0 1\n" if word is None else f"c {names.index(name)} {word}\n")
        lines.append(f"v {index} {value.hex() if math.isfinite(value) else value}\n")
    run_reference(reference_program, ring_dir, "c", lines, capacity=1 << 16)

    bot = ringside.Bot("py", ring_dir, lane_capacity=1 << 16, _backend=backend)
    metrics, _ = register_all(bot)
    for position, (index, value) in enumerate(every_call):
        for name, word in SWITCHES.get(position, []):
            if name == "consumer":
                declare_consumer(bot.path, 4242, True)
            elif name is None:
                set_bot_control(bot.path, word)
            elif word is None:
                metrics.append(bot.histogram("late"))
            else:
                set_control(bot.path, name, word)
        (metrics[index].inc if METRICS[index][1] == "counter" else metrics[index].observe)(value)
    bot.close()

    ours, theirs = comparable(f"{ring_dir}/ringside.py"), comparable(f"{ring_dir}/ringside.c")
    assert theirs["lanes"][0]["gathered"] > 100 and theirs["lanes"][0]["dropped"] == 0, "calls gathered, none dropped"
    assert BotFile(f"{ring_dir}/ringside.c").controls[-1] == CONTROL_BOT_OFF, "registered while the bot was off"
    assert_same_one_lane_file(ours, theirs)


def test_sample_above_percent_100_keeps_the_operators_sampling_from_sampling(ring_dir, backend):
    """As the C library's lanes keep no sampling state then, every call is written."""
    bot = ringside.Bot("never", ring_dir, sample_above_percent=100, _backend=backend)
    fill = bot.histogram("fill")
    declare_consumer(bot.path, 4242, True)
    set_control(bot.path, "fill", 3)
    assert [fill.observe(value) for value in range(1, 17)] == [True] * 16
    file = BotFile(bot.path)
    assert (file.values("fill"), file.gathered("fill")) == (list(range(1, 17)), (0, 0, 0))
    bot.close()


def test_ringside_dump_control_switches_a_python_bot_and_its_worker(ring_dir, backend, dump_tool):
    def control(*arguments):
        run = subprocess.run([dump_tool, "--dir", ring_dir, "control", "e2e", *arguments], capture_output=True, text=True,
                             timeout=60)
        assert run.returncode == 0, run.stderr

    bot = ringside.Bot("e2e", ring_dir, _backend=backend)
    fill, orders = bot.histogram("fill", unit="ns"), bot.counter("orders")
    worker = ringside.Bot("e2e", ring_dir, worker=True, _backend=backend)
    worker_fill = worker.histogram("fill", unit="ns")
    for path in (bot.path, worker.path):
        declare_consumer(path, 4242, True)
    control("--metric", "fill", "--sample-every", "100")  # 1 in 128, in the bot's file and the worker's
    values = list(range(1, 1281))
    written = [fill.observe(value) for value in values] + [worker_fill.observe(value) for value in values]
    assert written.count(True) == 20
    for path in (bot.path, worker.path):
        file = BotFile(path)
        assert (file.values("fill"), file.weights("fill")) == (values[127::128], [128] * 10)
        assert file.gathered("fill")[:2] == (1270, sum(values) - sum(values[127::128]))

    control("--bot-off")
    late = bot.histogram("late")  # registered while the bot is off: off too
    assert [fill.observe(1), worker_fill.observe(1), late.observe(1), orders.inc(3)] == [False, False, False, None]
    control("--bot-on")
    control("--metric", "fill", "--on")
    assert [fill.observe(7), worker_fill.observe(7), late.observe(7), orders.inc(3)] == [True, True, True, None]
    file, worker_file = BotFile(bot.path), BotFile(worker.path)
    assert (file.values("fill")[-1], file.weights("fill")[-1], worker_file.values("fill")[-1]) == (7, 1, 7)
    assert (file.values("late"), file.counter("orders"), file.controls, worker_file.controls) == ([7], 3, [0, 0, 0], [0])
    worker.close()
    bot.close()
