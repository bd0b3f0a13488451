"""The ids a session received, in a few bytes each: the closure asks whether an item's
parents arrived, and an initial sync receives every item of a line.

A Python set of 32-byte ids costs ~100 bytes an id (the bytes object and its slot), so a
session that pulls a million entries held ~100 MB for this alone (issue 21: the pulling
`sync` process peaked at 373 MB). Here the latest ids stay in a set (a parent is nearly
always among them), and older ones are sealed into sorted runs: the ids side by side in
one bytes object, and their first 8 bytes in an ``array('Q')`` to bisect — 40 bytes an
id. A run holds at least a sixteenth of what was sealed before it, so a million ids make
16 runs and five million ~40, and a lookup that misses every run (rare: an orphan's
parent) costs a bisection in each, ~1 µs. Exact: a
prefix match is confirmed on the whole id. Pure: no I/O.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

__all__ = ["NoIds", "ReceivedIds"]

ID_BYTES = 32  # sha256 ids; ids of any other length stay in the set
MIN_RUN = 1 << 16  # ids kept in the set before the first run is sealed


class _Run:
    __slots__ = ("ids", "keys")

    def __init__(self, ids: list[bytes]) -> None:
        ids.sort()
        self.ids = b"".join(ids)
        self.keys = array("Q", [int.from_bytes(i[:8], "big") for i in ids])

    def __contains__(self, item_id: bytes) -> bool:
        key = int.from_bytes(item_id[:8], "big")
        keys, ids = self.keys, self.ids
        at = bisect_left(keys, key)
        while at < len(keys) and keys[at] == key:
            if ids[at * ID_BYTES : (at + 1) * ID_BYTES] == item_id:
                return True
            at += 1
        return False


class ReceivedIds:
    """A set of ids that only grows: ``add`` and ``in``."""

    def __init__(self, min_run: int = MIN_RUN) -> None:
        self._min_run = min_run
        self._recent: set[bytes] = set()
        self._runs: list[_Run] = []
        self._sealed = 0
        self._limit = min_run  # the size of the set at which its ids are sealed

    def __contains__(self, item_id: object) -> bool:
        if item_id in self._recent:
            return True
        if not self._runs or not isinstance(item_id, bytes) or len(item_id) != ID_BYTES:
            return False
        return any(item_id in run for run in reversed(self._runs))

    def add(self, item_id: bytes) -> None:
        """Add ``item_id`` (the closure adds each delivered id once; one added again is
        only held twice, never wrongly answered)."""
        recent = self._recent
        recent.add(item_id)
        if len(recent) >= self._limit:
            self._seal()

    def _seal(self) -> None:
        ids = [i for i in self._recent if len(i) == ID_BYTES]
        self._recent = (
            {i for i in self._recent if len(i) != ID_BYTES}
            if len(ids) < len(self._recent)
            else set()
        )
        if ids:
            self._runs.append(_Run(ids))
            self._sealed += len(ids)
        self._limit = max(self._min_run, self._sealed // 16) + len(self._recent)


class NoIds:
    """What a flat set's session keeps of its received ids: nothing (no item of the set
    names another, so the closure never asks; ``ItemCodec``)."""

    __slots__ = ()

    def __contains__(self, item_id: object) -> bool:
        return False

    def add(self, item_id: bytes) -> None:
        pass
