"""The author signatures a session stored, kept in 8 to 16 bytes each (decision 0105).

An initial sync stores every author signature before the entries they sign (the sets are
reconciled in that order). Each received entry must then be found signed as dated (DESIGN
§5). Looking that up in the table costs a random read of the index and of the row: at a
million entries, 14% of the pulling process's samples (decision 0102). So the notary
remembers what it stored in the session. A map of entry id to signed ts held 100,000 of
them at ~250 bytes each; past that, entries were looked up in the table again.

:class:`SignedTimes` keeps each signature as a 64-bit digest of (entry id, ts), keyed by
a random secret of the session. A sender cannot aim at a digest it cannot compute, so a
forged ts passes by chance at most once in ~2^64 / n lookups, n the signatures held. The
digests live in one array used as an open-addressing hash table (linear probing, at most
half full): a lookup reads one or two slots. A million signatures take 16 MB.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable
from hashlib import blake2b

__all__ = ["MAX_SIGNED_TIMES", "SignedTimes"]

MAX_SIGNED_TIMES = 4_000_000  # 64 MB at most; past it, entries are looked up in the table
_FIRST_SLOTS = 1 << 12


class SignedTimes:
    """(entry id, signed ts) pairs, as keyed 64-bit digests in an open-addressing table."""

    def __init__(self, limit: int | None = None) -> None:
        self._key = os.urandom(16)
        self._slots = array("Q", bytes(8 * _FIRST_SLOTS))  # 0: an empty slot
        self._size = 0
        self.limit = MAX_SIGNED_TIMES if limit is None else limit

    def __len__(self) -> int:
        return self._size

    def nbytes(self) -> int:
        """The table's memory."""
        return self._slots.itemsize * len(self._slots)

    def _digest(self, entry_id: str, ts: str) -> int:
        pair = f"{entry_id}\n{ts}".encode()
        digest = int.from_bytes(blake2b(pair, digest_size=8, key=self._key).digest(), "big")
        return digest or 1  # 0 marks an empty slot

    def add(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Remember ``pairs`` (a batch of stored signatures), up to ``limit`` in all."""
        for entry_id, ts in pairs:
            if self._size >= self.limit:
                return
            if 2 * (self._size + 1) > len(self._slots):
                self._grow()
            self._size += self._put(self._slots, self._digest(entry_id, ts))

    @staticmethod
    def _slot(slots: array[int], digest: int) -> int:
        """The slot holding ``digest``, or the empty one where it would go."""
        mask = len(slots) - 1
        at = digest & mask
        while (held := slots[at]) != 0 and held != digest:
            at = (at + 1) & mask
        return at

    @classmethod
    def _put(cls, slots: array[int], digest: int) -> int:
        at = cls._slot(slots, digest)
        if slots[at]:
            return 0
        slots[at] = digest
        return 1

    def _grow(self) -> None:
        old, self._slots = self._slots, array("Q", bytes(16 * len(self._slots)))
        for digest in old:
            if digest:
                self._put(self._slots, digest)

    def holds(self, entry_id: str, ts: str) -> bool:
        """Whether a signature of ``entry_id`` dated ``ts`` was remembered."""
        slots = self._slots
        return slots[self._slot(slots, self._digest(entry_id, ts))] != 0
