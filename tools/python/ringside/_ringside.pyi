"""The C extension ringside._ringside (ringside/_ringside.c), for type checkers: a backend as
ringside/_backend.py describes one. Its functions and methods take positional arguments only (but
an exemplar, positional or by keyword); its types are not attributes of the module
(type_check_only), only of what attach() returns."""

from typing import Any, Callable, Mapping, Protocol, final, type_check_only

from . import _backend

def attach(name: str, directory: str | None, lane_capacity: int | None, max_metrics: int | None, max_lanes: int | None,
           mode: int, worker: bool, max_workers: int | None, sample_above_percent: int | None, /) -> Core: ...

# None, or why rs_exemplar_check refuses the bytes (the tests hold _exemplars.problem to it).
def exemplar_check(data: bytes, /) -> str | None: ...

# Which clock spans start on, and why: rs_span_clock_describe's sentence ("tsc: invariant TSC, ...").
def span_clock() -> str: ...

# rs_span_clock_select: spans started from now on read "tsc" or "monotonic"; False when the TSC
# is asked for and unusable. For the benchmark and the tests.
def select_span_clock(clock: str, /) -> bool: ...

@type_check_only
class Core(_backend.Core, Protocol):
    """An attached bot (made by attach()): a backend's Core (_backend.py), whose handles are Handles."""

    def handle(self, index: int, kind: int, scale: int, whole_only: bool, convert: _backend.Converter,
               encode_exemplar: Callable[[Any], bytes | None] | None, steps: tuple[int, int] | None = None, /
               ) -> Handle: ...

@final
@type_check_only
class Handle:
    """One registered metric's calls (made by Core.handle()). A value the C code does not take
    itself goes to the metric's converter, which returns the value stored, or None for a bad value
    it counted (a strict bot's raises); an exemplar it does not take (anything but a dict of str to
    str that passes rs_exemplar_check) to the metric's exemplar encoder, which returns its bytes, or
    None for one it refused and counted (a strict bot's raises, naming the problem)."""

    def observe(self, value: object, /, exemplar: Mapping[str, str] | None = None) -> bool: ...
    def start(self) -> int: ...  # a span clock reading: a token for stop()
    def stop(self, token: int, /, exemplar: Mapping[str, str] | None = None) -> bool: ...
    def inc(self, amount: object = 1, /) -> None: ...
    def dec(self, amount: object = 1, /) -> None: ...
    def set(self, value: object, /) -> bool: ...
