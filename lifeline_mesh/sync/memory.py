"""Give the memory of a session's snapshots back to the system once no session runs.

A snapshot of a large set is a few large flat buffers (about 110 MB per million items,
docs/protocol.md), grown as the rows stream in. When the session ends they are freed, but
glibc's allocator keeps freed heap memory for reuse, so a `serve` process stayed at its
peak (478 MB after serving one initial sync of a million entries, issue 14) although
nothing used it. After the last running session that built a snapshot ends, this asks the
allocator to return free memory (``malloc_trim``): a few milliseconds, paid only by
sessions that built snapshots, never by an in-sync check.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
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
    """Counts running sessions; the last one out that built snapshots trims the heap."""

    def __init__(self, trim: Callable[[int], int] | None = None) -> None:
        self._trim = trim if trim is not None else _load_trim()
        self.running = 0
        self._dirty = False  # a snapshot was built since the last trim
        self.trims = 0

    def enter(self) -> None:
        self.running += 1

    def trim(self) -> None:
        """Return free heap memory now: a long session calls this between batches, so the
        heap of a large transfer does not keep the high-water mark of every batch."""
        if self._trim is not None:
            self._trim(0)
            self.trims += 1

    def leave(self, built_snapshots: bool) -> None:
        self.running -= 1
        self._dirty = self._dirty or built_snapshots
        if self.running or not self._dirty:
            return
        self._dirty = False
        gc.collect()  # cycles holding a snapshot (a failed session's traceback) go first
        if self._trim is not None:
            self._trim(0)
            self.trims += 1
            log.debug("returned freed session memory to the system")


SESSIONS = SessionMemory()
