"""A thread's name as its lane holds it (THREAD NAMES in ringside.h), for both backends.

A lane records the name of the thread that claimed it, which the collector shows with each exemplar
read from the lane, beside the thread's id: threading's name (threading.current_thread().name:
"MainThread", "Thread-3 (worker)", "ThreadPoolExecutor-0_1", or the name given), not the kernel's,
which CPython before 3.14 leaves as the program's for every thread. It is written when the thread
claims its lane, at its first record through the bot; a thread renamed afterwards keeps the old
name in the lane until it claims one again (in a forked child, or a bot attached anew).
"""

from __future__ import annotations

import threading

THREAD_NAME_MAX = 32  # RS_THREAD_NAME_MAX: a lane's thread name at the most, in bytes


def encoded(name: str) -> bytes:
    """`name` as a lane holds it: UTF-8 (a lone surrogate as "?"), up to its first NUL (where a
    reader's name ends), cut to THREAD_NAME_MAX bytes at a character's boundary. A name is a label
    for humans: it is cut, never refused."""
    data = str(name).split("\0", 1)[0].encode("utf-8", "replace")
    if len(data) <= THREAD_NAME_MAX:
        return data
    cut = THREAD_NAME_MAX
    while cut > 0 and data[cut] & 0xC0 == 0x80:  # not inside a character
        cut -= 1
    return data[:cut]


def current() -> bytes:
    """The calling thread's name, as a lane holds it (the C extension calls it at a lane claim)."""
    return encoded(threading.current_thread().name)
