"""Give the memory of a session's snapshots back to the system once no session runs.

A snapshot of a large set is a few large flat buffers (about 110 MB per million items,
docs/protocol.md), grown as the rows stream in. When the session ends they are freed, but
glibc's allocator keeps freed heap memory for reuse, so a `serve` process stayed at its
peak (478 MB after serving one initial sync of a million entries, issue 14) although
nothing used it. After the last running session that built a snapshot ends, this asks the
allocator to return free memory (``malloc_trim``), never after an in-sync check alone.

Not at once, though (decision 0044): a trim hands every free page of the heap back, and a
node syncing a change every second or two (issue 14's soak) faulted the same pages in
again in the next session. So the memory is given back once no session has run for
``GIVE_BACK_IDLE_S``, or
at once when the process's resident memory is ``GIVE_BACK_ABOVE`` over what it was after
the last give-back (a large transfer: the peak goes back at the end of it, as before).
Between sessions that follow each other closely the freed heap is kept for the next one:
what it holds is bounded by what one session uses. Every thread allocates from one heap
(``lifeline_mesh/heap.py``): each session's worker thread had a heap of its own that glibc
shrank at every session's end (most of the soak's page faults).

A snapshot holds no reference cycle, so it is freed the moment its session drops it; the
collection that precedes the trim is for what a failed session leaves in cycles (its
traceback). A full collection walks every object the process holds — grpc's, the
modules', the caches' — which at a write every 2 s per peer was a fifth of a node's CPU
(bench/history/soak.md). So in ``serve`` (``freezing``; a process that runs one
session does not need it) the survivors of each collection are frozen (``gc.freeze``):
the next collection walks only what was made since. Frozen objects are
still freed by reference counting; only a cycle among them that became garbage later
would wait, so every ``FULL_EVERY_S`` the freeze is lifted for one full collection.

While sessions run, the collector's first generation waits for ``SESSION_GC_THRESHOLD``
new objects instead of Python's 700: a received batch of thousands of entries stays alive
until it is stored, and each young collection walked it again (about an eighth of the
node's own work in an initial sync: bench/history/sync.md). Collections still run,
only less often; the thresholds return to what they were when the last session ends.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import os
import time
from collections.abc import Callable

__all__ = ["SessionMemory"]

log = logging.getLogger(__name__)

FULL_EVERY_S = 600.0  # a full collection, frozen objects included, at most this often
SESSION_GC_THRESHOLD = 50_000  # new objects between two young collections while sessions run
GIVE_BACK_IDLE_S = 5.0  # no session for this long: the freed heap goes back to the system
GIVE_BACK_ABOVE = 64 << 20  # resident bytes over the level after the last give-back: at once

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


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


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux), None where /proc does not say."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


class SessionMemory:
    """Counts running sessions; once the last one out that built snapshots has been
    followed by ``idle_s`` without a session, or at once when resident memory is
    ``above`` bytes over its level, the heap is trimmed."""

    def __init__(
        self,
        trim: Callable[[int], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        resident: Callable[[], int | None] = resident_bytes,
        idle_s: float = GIVE_BACK_IDLE_S,
        above: int = GIVE_BACK_ABOVE,
    ) -> None:
        self._trim = trim if trim is not None else _load_trim()
        self._clock = clock
        self._resident = resident
        self.idle_s = idle_s
        self.above = above
        self.running = 0
        self._dirty = False  # a snapshot was built since the last give-back
        self._waiting: asyncio.TimerHandle | None = None  # the give-back once idle
        self._level: int | None = None  # resident bytes after the last give-back
        self.trims = 0
        self.freezing = False  # set by `serve`: a long-running process of many sessions
        self.full_collections = 0
        self._full_at: float | None = None  # when the freeze was last lifted
        self._thresholds: tuple[int, int, int] | None = None  # to restore after the sessions

    def enter(self) -> None:
        if self._waiting is not None:  # not idle after all: the session ending decides
            self._waiting.cancel()
            self._waiting = None
        if self.running == 0:
            first, *older = gc.get_threshold()
            if 0 < first < SESSION_GC_THRESHOLD:  # 0: collection is off; leave it so
                self._thresholds = (first, older[0], older[1])
                gc.set_threshold(SESSION_GC_THRESHOLD, *older)
        self.running += 1

    def trim(self) -> None:
        """Return free heap memory now: a long session calls this between batches, so the
        heap of a large transfer does not keep the high-water mark of every batch."""
        if self._trim is not None:
            self._trim(0)
            self.trims += 1

    def leave(self, built_snapshots: bool) -> None:
        self.running -= 1
        if self.running == 0 and self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        self._dirty = self._dirty or built_snapshots
        if self.running or not self._dirty:
            return
        if self._over_level():
            self.give_back()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop to wait on: now
            self.give_back()
            return
        self._waiting = loop.call_later(self.idle_s, self._idle)

    def _over_level(self) -> bool:
        if self._level is None:
            return True  # the first give-back measures the level
        now = self._resident()
        return now is None or now - self._level > self.above

    def _idle(self) -> None:
        self._waiting = None
        if self.running == 0 and self._dirty:
            self.give_back()

    def give_back(self) -> None:
        """Collect what a failed session left in cycles, then return the free heap."""
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None
        self._dirty = False
        self.collect()  # cycles holding a snapshot (a failed session's traceback) go first
        if self._trim is not None:
            self._trim(0)
            self.trims += 1
            log.debug("returned freed session memory to the system")
        self._level = self._resident()

    def collect(self) -> None:
        """Collect what was made since the last freeze, then freeze the survivors; lift the
        freeze for a full collection when the last one is ``FULL_EVERY_S`` old."""
        if not self.freezing:
            gc.collect()
            return
        now = self._clock()
        if self._full_at is None or now - self._full_at >= FULL_EVERY_S:
            gc.unfreeze()
            self._full_at = now
            self.full_collections += 1
        gc.collect()
        gc.freeze()


SESSIONS = SessionMemory()
