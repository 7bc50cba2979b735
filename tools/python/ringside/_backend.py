"""What a backend is to the package's classes (ringside/__init__.py), for type checkers: the C
extension (_ringside, described by _ringside.pyi) and the pure module (_pure) both are one."""

from __future__ import annotations

from typing import Any, Callable, Protocol

# A metric's converter (_values.py): any value the hot path did not take, to the value stored (an
# int for histograms and counters, a float for gauges); None: nothing to record (a bad value, counted);
# a strict bot's raises the exception naming what is wrong instead.
Converter = Callable[[Any], "float | None"]


class Core(Protocol):
    """An attached bot."""

    @property
    def path(self) -> str | None: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def lanes_allocated(self) -> int: ...
    @property
    def metric_count(self) -> int: ...
    @property
    def records_written(self) -> int: ...
    @property
    def records_dropped(self) -> int: ...

    # Registers (or finds again) a metric: its index. `unit` and `merge` are rs_unit and
    # rs_gauge_merge codes (merge: 0 but for gauges), `labels` the stored encoding; `form` and
    # `scale` its values' (VALUES in ringside.h: rs_value_form, and steps of 10^scale; 0 and 0: whole
    # units, unsigned, as format 3).
    def register(self, name: str, kind: int, unit: int, labels: bytes, help: str, sample_every: int, merge: int,
                 form: int = 0, scale: int = 0, /) -> int: ...

    # Returns the metric's calls, as attributes: observe, start, stop; inc; set, inc, dec.
    # `encode_exemplar`: a histogram's exemplar encoder (_exemplars.py), None for the other kinds.
    # `steps`: None, or the (form, scale) it was registered with for a metric of steps (VALUES in
    # _values.py), whose values are rounded, clamped and counted as the C producer's
    # rs_bot_record_value and rs_bot_count_value do; `scale` and `whole_only` are then unused.
    def handle(self, index: int, kind: int, scale: int, whole_only: bool, convert: Converter,
               encode_exemplar: Callable[[Any], bytes | None] | None, steps: tuple[int, int] | None = None, /
               ) -> object: ...

    # Counts a value metric `index` could not take as given (its cell's `clamped`), or with
    # `exemplar` an exemplar refused (`exemplars_refused`): nothing while it or the bot is off.
    def count_refused(self, index: int, exemplar: bool, /) -> None: ...

    # Retires the metric at `index` (RETIRING A SERIES in ringside.h): registering it again revives it.
    def retire(self, index: int, /) -> None: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """A backend module: attach() makes a Core; span_clock() says what its spans are timed with."""

    def attach(self, name: str, directory: str | None, lane_capacity: int | None, max_metrics: int | None,
               max_lanes: int | None, mode: int, worker: bool, max_workers: int | None,
               sample_above_percent: int | None, /) -> Core: ...

    # Which clock the backend's spans start on, and why (the extension's: rs_span_clock_describe).
    def span_clock(self) -> str: ...
