"""Exemplars, as both backends take them (EXEMPLARS in ringside.h).

An exemplar is a mapping of label names to str values, {"order_id": "A17"}, as prometheus_client
takes one. It is stored as its "key=value" pairs, in the mapping's order, joined by newlines and
encoded as UTF-8: at most EXEMPLAR_MAX (64) bytes in all, keys names ([a-zA-Z_][a-zA-Z0-9_]*),
values without newline or NUL. Anything else is refused: never cut, never written; the value is
recorded without it and the exemplar counted (the metric cell's `exemplars_refused`), or, for a
strict bot, RingTypeError (not a mapping of str to str) or RingValueError (naming what is wrong)
is raised and nothing is recorded.

The checks are made on the mapping, so that a value holding a newline (or a key holding "=") can
never read as another pair once joined: for a dict they are rs_exemplar_check's rules, whole.
`problem()`, those rules on the bytes (ported, and held to the C function by the tests), checks
any other mapping's, whose items() might name a key twice, so neither backend writes what the C
producer would refuse. The C extension
encodes a dict of str itself and checks it with rs_exemplar_check; anything its fast path does not
take comes here, for the same error as the pure backend's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Callable

from ._errors import RingTypeError, RingValueError

EXEMPLAR_MAX = 64  # RS_EXEMPLAR_MAX: an exemplar's bytes at the most
EXEMPLAR_BYTES_PER_RECORD = 16  # RS_EXEMPLAR_BYTES_PER_RECORD: its bytes in each exemplar record

_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_NAME_BYTE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_DIGIT = frozenset(b"0123456789")

# A histogram's exemplar encoder: an exemplar to the bytes stored; None for one refused and counted.
Encoder = Callable[[Any], "bytes | None"]


def problem(encoded: bytes) -> str | None:
    """Why `encoded` is no exemplar, by rs_exemplar_check's rules (ringside_producer.c), or None:
    1 to EXEMPLAR_MAX bytes of "key=value" pairs joined by newlines, keys names and unique, values
    without newline or NUL."""
    length = len(encoded)
    if not 1 <= length <= EXEMPLAR_MAX:
        return f"an exemplar has 1 to {EXEMPLAR_MAX} bytes, not {length}"
    keys: set[bytes] = set()
    at = 0
    while at < length:
        start = at
        while at < length and encoded[at] not in b"=\n":
            byte = encoded[at]
            if byte not in _NAME_BYTE and not (at > start and byte in _DIGIT):
                return f"an exemplar's key is a name ([a-zA-Z_][a-zA-Z0-9_]*): byte {at}"
            at += 1
        if at == start or at == length or encoded[at] != ord("="):
            return f"an exemplar is key=value pairs joined by newlines: byte {at}"
        key = encoded[start:at]
        if key in keys:
            return f"an exemplar's key {key.decode()} is given twice"
        keys.add(key)
        at += 1
        while at < length and encoded[at] != ord("\n"):
            if encoded[at] == 0:
                return f"an exemplar's value holds a NUL (byte {at})"
            at += 1
        if at < length:
            at += 1
            if at == length:
                return "an exemplar ends with a newline"
    return None


def refuser(bot: str, metric: str, count: Callable[[], None] | None = None) -> Encoder:
    """The exemplar "encoder" of signed histogram `metric`: a signed histogram's values carry no
    exemplars (EXEMPLARS in ringside.h), so any exemplar is refused as every producer refuses it:
    counted (`count`, into the metric cell's `exemplars_refused`) and None returned, the value
    recorded without it; with no `count` (a strict bot), a RingValueError naming the bot and the
    metric, raised before anything is recorded."""

    def refuse(exemplar: Any) -> bytes | None:
        if count is not None:
            count()
            return None
        raise RingValueError(f"bot {bot}: metric {metric}: a signed histogram's values carry no exemplars; "
                             "record the value without one")

    return refuse


def encoder(bot: str, metric: str, count: Callable[[], None] | None = None) -> Encoder:
    """The exemplar encoder of histogram `metric` of bot `bot`: a mapping to the bytes stored. One
    it cannot take is counted (`count`, into the metric cell's `exemplars_refused`) and None
    returned, the value recorded without it; with no `count` (a strict bot), RingTypeError or
    RingValueError naming the bot, the metric, the exemplar and the problem."""
    checked = _strict_encoder(bot, metric)
    if count is None:
        return checked

    def tolerant(exemplar: Any) -> bytes | None:
        try:
            return checked(exemplar)
        except (RingTypeError, RingValueError):
            count()
            return None
    return tolerant


def _strict_encoder(bot: str, metric: str) -> Callable[[Any], bytes]:
    """`encoder`'s checks: the bytes, or the error naming the problem."""

    def refused(error: type[RingTypeError | RingValueError], exemplar: Any, problem: str) -> Exception:
        shown = repr(exemplar)  # only now: a refusal's words cost nothing until one is made
        shown = shown if len(shown) <= 100 else shown[:96] + "..."
        return error(f"bot {bot}: metric {metric}: exemplar {shown}{problem}")

    def encode(exemplar: Any) -> bytes:
        if exemplar.__class__ is not dict and not isinstance(exemplar, Mapping):
            raise refused(RingTypeError, exemplar, f" ({type(exemplar).__name__}) is not a mapping of label names to "
                          "str values, such as {'order_id': 'A17'}")
        pairs = []
        for key, value in exemplar.items():
            if not isinstance(key, str):
                raise refused(RingTypeError, exemplar, f": label name {key!r} is {type(key).__name__}, not str")
            if not isinstance(value, str):
                raise refused(RingTypeError, exemplar, f": the value of {key!r} is {type(value).__name__}, not str")
            if not _NAME.match(key):
                raise refused(RingValueError, exemplar, f": label name {key!r} must match [a-zA-Z_][a-zA-Z0-9_]*")
            if "\n" in value or "\0" in value:
                raise refused(RingValueError, exemplar, f": the value of {key!r} holds a newline or NUL")
            try:
                pairs.append(f"{key}={value}".encode())
            except UnicodeEncodeError:
                raise refused(RingValueError, exemplar, f": the value of {key!r} is not text UTF-8 can encode (a "
                              "lone surrogate)") from None
        if not pairs:
            raise refused(RingValueError, exemplar, ": an exemplar has at least one label (pass None for no exemplar)")
        encoded = b"\n".join(pairs)
        if len(encoded) > EXEMPLAR_MAX:
            raise refused(RingValueError, exemplar, f": takes {len(encoded)} bytes as key=value pairs joined by "
                          f"newlines, over the {EXEMPLAR_MAX} an exemplar may take (it is never cut)")
        # A dict's pairs, checked above, are rs_exemplar_check's grammar exactly, and its keys are
        # unique; another mapping's items() may name a key twice: its bytes are checked too.
        reason = problem(encoded) if exemplar.__class__ is not dict else None
        if reason is not None:
            raise refused(RingValueError, exemplar, f": {reason}")
        return encoded
    return encode
