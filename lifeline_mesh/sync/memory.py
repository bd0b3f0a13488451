"""Give the memory of a session's snapshots back to the system once no session runs.

A snapshot of a large set is a few large flat buffers (about 110 MB per million items,
docs/protocol.md), grown as the rows stream in. When the session ends they are freed, but
glibc's allocator keeps freed heap memory for reuse, so a `serve` process stayed at its
peak (478 MB after serving one initial sync of a million entries, issue 14) although
nothing used it. After the last running session that built a snapshot ends, this asks the
allocator to return free memory (``malloc_trim``): a few milliseconds, paid only by
sessions that built snapshots, never by an in-sync check.

A snapshot holds no reference cycle, so it is freed the moment its session drops it; the
collection that precedes the trim is for what a failed session leaves in cycles (its
traceback). A full collection walks every object the process holds — grpc's, the
modules', the caches' — which at a write every 2 s per peer was a fifth of a node's CPU
(docs/benchmarks.md, *Soak*). So in ``serve`` (``freezing``; a process that runs one
session does not need it) the survivors of each collection are frozen (``gc.freeze``):
the next collection walks only what was made since. Frozen objects are
still freed by reference counting; only a cycle among them that became garbage later
would wait, so every ``FULL_EVERY_S`` the freeze is lifted for one full collection.

While sessions run, the collector's first generation waits for ``SESSION_GC_THRESHOLD``
new objects instead of Python's 700: a received batch of thousands of entries stays alive
until it is stored, and each young collection walked it again (about an eighth of the
node's own work in an initial sync: docs/benchmarks.md, *Sync*). Collections still run,
only less often; the thresholds return to what they were when the last session ends.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import time
from collections.abc import Callable

__all__ = ["SessionMemory"]

log = logging.getLogger(__name__)

FULL_EVERY_S = 600.0  # a full collection, frozen objects included, at most this often
SESSION_GC_THRESHOLD = 50_000  # new objects between two young collections while sessions run


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
    """Counts running sessions; the last one out that built snapshots trims the heap."""

    def __init__(
        self,
        trim: Callable[[int], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._trim = trim if trim is not None else _load_trim()
        self._clock = clock
        self.running = 0
        self._dirty = False  # a snapshot was built since the last trim
        self.trims = 0
        self.freezing = False  # set by `serve`: a long-running process of many sessions
        self.full_collections = 0
        self._full_at: float | None = None  # when the freeze was last lifted
        self._thresholds: tuple[int, int, int] | None = None  # to restore after the sessions

    def enter(self) -> None:
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
        self._dirty = False
        self.collect()  # cycles holding a snapshot (a failed session's traceback) go first
        if self._trim is not None:
            self._trim(0)
            self.trims += 1
            log.debug("returned freed session memory to the system")

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
