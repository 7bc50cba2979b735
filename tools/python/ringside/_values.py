"""Units, values and labels, as both backends (the C extension and _pure) take them.

A histogram stores whole numbers. One declared in a time unit ("s", "ms", "us", "ns") stores
nanoseconds: a value is multiplied by 10^9, 10^6, 10^3 or 1, and a float product is rounded to
the nearest nanosecond, ties to even. A float holds its decimal to within 2^-53 of its value, and
the product adds at most as much again, so any decimal number of nanoseconds below 2^51 (26 days)
is stored exactly: 0.0012 s is 1,200,000 ns, never 1,199,999. An int is multiplied exactly.
A histogram in "bytes" or "none" takes whole numbers only (an int, or a float such as 3.0).
Counters add whole numbers from 0 to 2^64-1; gauges take any float.

Each backend converts the common cases itself (an exact int or float) and hands everything else
to a converter made here, which returns the stored value or raises RingValueError or
RingTypeError naming the bot, the metric and the value.
"""

from __future__ import annotations

import math
import operator
import re
from typing import Any, Callable, Mapping

from ._errors import RingTypeError, RingValueError

KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM = 1, 2, 3
KIND_NAMES = {KIND_COUNTER: "counter", KIND_GAUGE: "gauge", KIND_HISTOGRAM: "histogram"}
# The units a metric is declared in, and their rs_unit codes (ringside.h).
UNIT_CODES = {"none": 0, "ns": 1, "us": 2, "ms": 3, "s": 4, "bytes": 5}
# Nanoseconds per declared time unit: a time histogram stores nanoseconds.
NANOSECONDS_PER = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
# How the collector merges a gauge across a bot's workers, and their rs_gauge_merge codes
# (ringside.h): the value set last (by any worker), the sum, max or min of the live workers' last
# values, or a series per live worker labelled pid. Only gauges have one; the others store 0.
MERGE_CODES = {"last": 0, "sum": 1, "max": 2, "min": 3, "per_worker": 4}
# Each policy in messages, as the C producer says it ("merging its workers by sum").
MERGE_PHRASES = ("the last set", "sum", "max", "min", "per worker")
U64 = (1 << 64) - 1
LABELS_MAX = 256

_IDENTIFIER = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_NOT_NUMBERS = (str, bytes, bytearray, memoryview)


def stored_unit(kind: int, unit: str) -> int:
    """The rs_unit code a metric declared in `unit` is registered with."""
    if kind == KIND_HISTOGRAM and unit in NANOSECONDS_PER:
        return UNIT_CODES["ns"]
    return UNIT_CODES[unit]


def _where(bot: str, metric: str, value: object) -> str:
    shown = repr(value)
    return f"bot {bot}: metric {metric}: value {shown if len(shown) <= 64 else shown[:60] + '...'}"


def _as_float(value: Any, where: str, what: str) -> float:
    """`float(value)`, or the error that names the bot, the metric and the value."""
    try:
        return float(value)
    except TypeError:
        raise RingTypeError(f"{where} ({type(value).__name__}) is not a number; {what}") from None
    except (ValueError, OverflowError) as error:
        raise RingValueError(f"{where} is not a float: {error}") from None


def _histogram_conversion(unit: str) -> Callable[[Any, str, str], int]:
    """A number observed in `unit` to the whole number stored: nanoseconds for a time unit."""
    scale = NANOSECONDS_PER.get(unit, 1)
    whole_only = unit not in NANOSECONDS_PER

    def convert(value: Any, where: str, what: str) -> int:
        try:
            whole = operator.index(value)
        except TypeError:
            pass
        else:
            if whole < 0:
                raise RingValueError(f"{where} is negative; {what}")
            if whole * scale > U64:
                raise RingValueError(f"{where} is too large; {what} to 2^64-1 {'ns' if scale > 1 else unit}")
            return whole * scale
        number = _as_float(value, where, what)
        if math.isnan(number) or math.isinf(number):
            raise RingValueError(f"{where} is not finite; {what}")
        if number < 0:
            raise RingValueError(f"{where} is negative; {what}")
        product = number * scale  # infinite when the nanoseconds of a finite value overflow a float
        if product > U64:
            raise RingValueError(f"{where} is too large; {what} to 2^64-1 {'ns' if scale > 1 else unit}")
        stored = round(product)  # to the nearest, ties to even, as the C extension's nearbyint
        if whole_only and stored != number:
            raise RingValueError(f"{where} is not a whole number; a histogram in {unit} records whole numbers")
        return stored
    return convert


def _increment(value: Any, where: str, what: str) -> int:
    """A counter's increment to the whole number added."""
    try:
        whole = operator.index(value)
    except TypeError:
        number = _as_float(value, where, what)
        if not math.isfinite(number) or number != math.floor(number):
            raise RingValueError(f"{where} is not a whole number; {what}") from None
        whole = int(number)
    if not 0 <= whole <= U64:
        raise RingValueError(f"{where} is out of range; {what} (a counter never goes down)")
    return whole


def converter(kind: int, bot: str, metric: str, unit: str) -> Callable[[Any], float]:
    """The converter of a metric of `kind` (KIND_*) declared in `unit`: a function from a value to
    the value stored, or an exception."""
    convert: Callable[[Any, str, str], float]
    if kind == KIND_HISTOGRAM:
        what, convert = f"a histogram in {unit} records numbers from 0", _histogram_conversion(unit)
    elif kind == KIND_COUNTER:
        what, convert = "a counter adds whole numbers from 0 to 2^64-1", _increment
    else:
        what, convert = "a gauge holds a float", _as_float

    def checked(value: Any) -> float:
        where = _where(bot, metric, value)
        # Text is no number, though int() and float() would parse it.
        if isinstance(value, _NOT_NUMBERS):
            raise RingTypeError(f"{where} ({type(value).__name__}) is not a number; {what}")
        return convert(value, where, what)
    return checked


def merge_phrase(code: int) -> str:
    """An rs_gauge_merge code in a message: "sum", "per worker", "the last set"."""
    return MERGE_PHRASES[code] if 0 <= code < len(MERGE_PHRASES) else "an unknown policy"


def check_name(bot: str, name: str) -> None:
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise ValueError(f"bot {bot}: metric name {name!r} must match [a-zA-Z_][a-zA-Z0-9_]*")


def encode_labels(labels: Mapping[str, object] | None) -> bytes:
    """'key=value' lines sorted by key, as the registry stores them; ValueError says what is wrong."""
    labels = labels or {}
    lines = []
    for key in sorted(labels, key=str):
        value = str(labels[key])
        if not isinstance(key, str) or not _IDENTIFIER.match(key) or key.startswith("__"):
            raise ValueError(f'label name {key!r} must match [a-zA-Z_][a-zA-Z0-9_]* and not start with "__"')
        if "\n" in value or "\0" in value:
            raise ValueError(f'the value of label "{key}" has a newline or NUL')
        lines.append(f"{key}={value}")
    encoded = "\n".join(lines).encode("utf-8")
    if len(encoded) > LABELS_MAX:
        raise ValueError(f"the labels take {len(encoded)} bytes; at most {LABELS_MAX} are allowed")
    return encoded
