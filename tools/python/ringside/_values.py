"""Units, values and labels, as both backends (the C extension and _pure) take them.

A histogram stores whole numbers. One declared in a time unit ("s", "ms", "us", "ns") stores
nanoseconds: a value is multiplied by 10^9, 10^6, 10^3 or 1, and a float product is rounded to
the nearest nanosecond, ties to even. A float holds its decimal to within 2^-53 of its value, and
the product adds at most as much again, so any decimal number of nanoseconds below 2^51 (26 days)
is stored exactly: 0.0012 s is 1,200,000 ns, never 1,199,999. An int is multiplied exactly.
A histogram in "bytes" or "none" takes whole numbers only (an int, or a float such as 3.0).
Counters add whole numbers from 0 to 2^64-1; gauges take any float.

VALUES (format 4, VALUES in ringside.h): a histogram in "none" or "bytes" declared with a
resolution (a power of ten: 0.01, 1e-6, 1, 100) or signed, and a counter declared with a
resolution, store whole numbers of that step, 10^scale of the unit: a value is turned into steps
as the C producer does (rs_bot_record_value, rs_bot_count_value): a float multiplied by 10^-scale
and rounded to the nearest step, ties to even; an int exactly. A value the metric cannot hold
(below 0 for an unsigned histogram or a counter, beyond its range, an infinity) is clamped to the
nearest end and recorded (a counter adds nothing for a negative one), a NaN is not recorded, and
both are counted in the metric cell's `clamped`: never raised, never wrapped. A signed value is
stored as its offset binary, (steps as u64) ^ 2^63.

Each backend converts the common cases itself (an exact int or float) and hands everything else
to a converter made here, which returns the stored value. A value the metric cannot take as given
never raises on the hot path (BAD VALUES): the converter counts it (`count`, into the metric
cell's `clamped`) and returns what the C producer records for it: below 0, 0 (a counter adds
nothing); too large or an infinity, the largest the metric holds; a fraction given to a metric of
whole numbers, the nearest whole number (ties to even); a NaN, or a value that is not a number,
None: nothing recorded. A strict bot (`strict=True`, or RINGSIDE_STRICT=1) makes converters with
no `count`, which raise RingValueError or RingTypeError naming the bot, the metric and the value,
recording nothing: for tests.
"""

from __future__ import annotations

import math
import operator
import re
from decimal import Decimal
from fractions import Fraction
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
I64_MAX = (1 << 63) - 1
LABELS_MAX = 256
# The steps a metric's scale may choose: 10^-18 to 10^18 of its unit (RS_SCALE_MIN, RS_SCALE_MAX).
SCALE_MIN, SCALE_MAX = -18, 18
FORM_UNSIGNED, FORM_SIGNED = 0, 1  # rs_value_form
OFFSET_BINARY_BIAS = 1 << 63  # a signed value's top bit, flipped (RS_OFFSET_BINARY_BIAS)
POWERS_OF_TEN = [10 ** n for n in range(SCALE_MAX + 1)]

_IDENTIFIER = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_NOT_NUMBERS = (str, bytes, bytearray, memoryview)


def stored_unit(kind: int, unit: str) -> int:
    """The rs_unit code a metric declared in `unit` is registered with."""
    if kind == KIND_HISTOGRAM and unit in NANOSECONDS_PER:
        return UNIT_CODES["ns"]
    return UNIT_CODES[unit]


class _Unrepresentable(RingValueError):
    """A value the metric cannot hold as given, and what is recorded for it when the bot is not
    strict (None: nothing)."""

    def __init__(self, message: str, recorded: float | None) -> None:
        super().__init__(message)
        self.recorded = recorded


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
                raise _Unrepresentable(f"{where} is negative; {what}", 0)
            if whole * scale > U64:
                raise _Unrepresentable(f"{where} is too large; {what} to 2^64-1 {'ns' if scale > 1 else unit}", U64)
            return whole * scale
        number = _as_float(value, where, what)
        if math.isnan(number):
            raise _Unrepresentable(f"{where} is not a number; {what}", None)
        if number < 0:
            raise _Unrepresentable(f"{where} is negative; {what}", 0)
        product = number * scale  # infinite when the nanoseconds of a finite value overflow a float
        if product > U64:
            raise _Unrepresentable(f"{where} is too large; {what} to 2^64-1 {'ns' if scale > 1 else unit}", U64)
        stored = round(product)  # to the nearest, ties to even, as the C extension's nearbyint
        if whole_only and stored != number:
            raise _Unrepresentable(f"{where} is not a whole number; a histogram in {unit} records whole numbers",
                                   min(stored, U64))
        return stored
    return convert


def _increment(value: Any, where: str, what: str) -> int:
    """A counter's increment to the whole number added."""
    try:
        whole = operator.index(value)
    except TypeError:
        number = _as_float(value, where, what)
        if math.isnan(number):
            raise _Unrepresentable(f"{where} is not a number; {what}", None) from None
        if number < 0:
            raise _Unrepresentable(f"{where} is negative; {what} (a counter never goes down)", None) from None
        if math.isinf(number) or number >= 2.0**64:
            raise _Unrepresentable(f"{where} is out of range; {what}", U64) from None
        if number != math.floor(number):
            raise _Unrepresentable(f"{where} is not a whole number; {what}", min(round(number), U64)) from None
        whole = int(number)
    if whole < 0:
        raise _Unrepresentable(f"{where} is negative; {what} (a counter never goes down)", None)
    if whole > U64:
        raise _Unrepresentable(f"{where} is out of range; {what}", U64)
    return whole


def steps_per_unit(scale: int) -> float:
    """10^-scale as a double, as ringside_producer.c computes it (rsp_power_of_ten): exact for a
    whole power, the nearest double to 10^-scale for a fraction."""
    return float(POWERS_OF_TEN[-scale]) if scale <= 0 else 1 / float(POWERS_OF_TEN[scale])


def scale_of(bot: str, metric: str, resolution: object) -> int:
    """The scale of a resolution given as a power of ten (0.01: -2; 1e-6: -6; 1: 0; 100: 2), or
    the error naming the metric. A float is taken when it is the double nearest 10^scale (0.01 is
    not exactly a hundredth); an int, Decimal or Fraction when it is 10^scale exactly."""
    where = f"bot {bot}: metric {metric}: resolution {resolution!r}"
    if isinstance(resolution, (bool, *_NOT_NUMBERS)) or not isinstance(resolution, (int, float, Decimal, Fraction)):
        raise RingTypeError(f"{where} is not a number; a resolution is a power of ten (0.01, 1e-6, 1, 100)")
    try:
        exact = Fraction(resolution)
    except (ValueError, OverflowError):  # a NaN or an infinity
        exact = Fraction(0)
    if exact <= 0:
        raise RingValueError(f"{where} is not a power of ten (0.01, 1e-6, 1, 100)")
    scale = round(math.log10(exact.numerator) - math.log10(exact.denominator))
    power = Fraction(10) ** scale
    if exact != power and not (isinstance(resolution, float) and resolution == float(power)):
        raise RingValueError(f"{where} is not a power of ten (0.01, 1e-6, 1, 100)")
    if not SCALE_MIN <= scale <= SCALE_MAX:
        raise RingValueError(f"{where} is 1e{scale}: a resolution is from 1e{SCALE_MIN} to 1e{SCALE_MAX}")
    return scale


def _steps_conversion(signed: bool, scale: int) -> Callable[[Any, str, str], float]:
    """A value of a metric of steps (VALUES above) to what the backends record: an int, the
    exact number of steps of an integral value in the metric's range; else a float in the unit,
    which the backend turns into steps as the C producer does (rounded, clamped and counted, a NaN
    counted). An integral value out of range is an infinity of its sign: clamped and counted too."""
    low, high = (-I64_MAX, I64_MAX) if signed else (0, U64)

    def convert(value: Any, where: str, what: str) -> float:
        try:
            whole: int = operator.index(value)
        except TypeError:
            return _as_float(value, where, what)
        steps: int
        if scale <= 0:
            steps = whole * POWERS_OF_TEN[-scale]
        else:  # to the nearest step, ties to even, exactly
            power = POWERS_OF_TEN[scale]
            steps, rest = divmod(whole, power)
            if 2 * rest > power or (2 * rest == power and steps % 2 == 1):
                steps += 1
        if steps < low or (not signed and whole < 0):  # below 0, even if it rounds to 0 steps, as C tests it
            return -math.inf
        if steps > high:
            return math.inf
        return steps
    return convert


def converter(kind: int, bot: str, metric: str, unit: str, signed: bool = False, scale: int | None = None,
              count: Callable[[], None] | None = None) -> Callable[[Any], float | None]:
    """The converter of a metric of `kind` (KIND_*) declared in `unit` (and, for one of steps, its
    form and scale: VALUES above): a function from a value to the value stored. A value it cannot
    take as given is counted (`count`) and what is recorded for it returned (None: nothing); with
    no `count` (a strict bot), it raises RingValueError or RingTypeError instead."""
    convert: Callable[[Any, str, str], float]
    if signed or scale is not None:
        form = "signed" if signed else "unsigned"
        what = (f"a {form} histogram records numbers" if kind == KIND_HISTOGRAM
                else "a counter adds numbers") + f" in steps of 1e{scale or 0}"
        convert = _steps_conversion(signed, scale or 0)
    elif kind == KIND_HISTOGRAM:
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

    if count is None:
        return checked

    def tolerant(value: Any) -> float | None:
        try:
            return checked(value)
        except _Unrepresentable as bad:
            count()
            return bad.recorded
        except (RingTypeError, RingValueError):  # not a number: nothing to record
            count()
            return None
    return tolerant


def values_phrase(signed: bool, scale: int | None) -> str:
    """A metric's values in a conflict's message, as the C producer says them ("signed values in
    steps of 1e-2"); "whole values without a resolution" for one declared with neither."""
    if scale is None and not signed:
        return "whole values without a resolution"
    return f"{'signed' if signed else 'unsigned'} values in steps of 1e{scale or 0}"


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
