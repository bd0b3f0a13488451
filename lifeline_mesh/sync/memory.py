"""Give the memory of a session's snapshots back to the system once no session runs.

A snapshot of a large set is a few large flat buffers (about 110 MB per million items,
docs/protocol.md), grown as the rows stream in. When the session ends they are freed, but
glibc's allocator keeps freed heap memory for reuse, so a `serve` process stayed at its
peak (478 MB after serving one initial sync of a million entries, issue 14) although
nothing used it. After the last running session that built a snapshot ends, this asks the
allocator to return free memory (``malloc_trim``), paid only by sessions that built
snapshots, never by an in-sync check.

The trim and the ``gc.collect`` before it cost work proportional to the live heap, so on a
busy node (a write every few seconds, each causing a session per peer) trimming after every
session was a fifth of the process's CPU (the 30-minute soak, docs/benchmarks.md). So a node
trims at once only when it has not trimmed for ``every_s`` seconds; otherwise the trim waits
until no session has run for ``quiet_s`` seconds. Freed memory is reused by the next session
meanwhile, so the peak does not grow; it is only given back a few seconds later.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import time
from collections.abc import Callable

__all__ = ["SessionMemory"]

log = logging.getLogger(__name__)


def _load_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to do
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class SessionMemory:
    """Counts running sessions; once none runs after one that built snapshots, the heap is
    trimmed: at once if the last trim is ``every_s`` old, else after ``quiet_s`` quiet."""

    def __init__(
        self,
        trim: Callable[[int], int] | None = None,
        *,
        quiet_s: float = 2.0,
        every_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._trim = trim if trim is not None else _load_trim()
        self.quiet_s = quiet_s
        self.every_s = every_s
        self._clock = clock
        self.running = 0
        self._dirty = False  # a snapshot was built since the last trim
        self._last: float | None = None  # when the heap was last trimmed
        self._timer: asyncio.TimerHandle | None = None
        self.trims = 0

    def enter(self) -> None:
        self.running += 1

    def leave(self, built_snapshots: bool) -> None:
        self.running -= 1
        self._dirty = self._dirty or built_snapshots
        if self.running or not self._dirty:
            return
        if self._last is None or self._clock() - self._last >= self.every_s:
            self._trim_now()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a one-shot caller): nothing to wait for
            self._trim_now()
            return
        if self._timer is not None:
            self._timer.cancel()  # a session just ended: wait for quiet from now
        self._timer = loop.call_later(self.quiet_s, self._when_quiet)

    def _when_quiet(self) -> None:
        self._timer = None
        if not self.running and self._dirty:
            self._trim_now()

    def _trim_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._dirty = False
        self._last = self._clock()
        gc.collect()  # cycles holding a snapshot (a failed session's traceback) go first
        if self._trim is not None:
            self._trim(0)
            self.trims += 1
            log.debug("returned freed session memory to the system")


SESSIONS = SessionMemory()
