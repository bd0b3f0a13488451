"""OrderMemo: the decisions in force and the open items of a line, each in (ts, id) order,
kept between reads of a hub's truth tables (decision 0087).

A context shows the ends of those lists and counts and names what it leaves out, so it
needs every id in order; at 100k entries that is ~13k rows, which a hub's database sorts
and sends again on each read after a change (10–40 ms). The tables say which items a fold
stored or gave another role, and when: ``truth_items.touched``, a mark from one sequence
that the database takes on every write of an item (:mod:`lifeline.truth.pg_table`); folds
take the line's lock one after another, so marks grow in the order they commit. So a reader
that kept the lists as read from one generation of the tables, with the highest mark it
saw, reads only the items marked past it and moves those (:mod:`lifeline.truth.pg_view`).
A generation ends whenever the tables are folded again from the first row (a lowered ts, a
rebuild, tables that lie): then everything is read again.

Pure: rows in, lists out; the reads are the caller's. Several reads of the line may run at
once (threads): each works on its own copy and keeps it only if it is newer.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["IN_FORCE_ROLES", "InForce", "OrderMemo", "Read"]

IN_FORCE_ROLES = (b"d", b"o")  # truth_items.role of a decision in force, of an open item

Row = tuple[bytes, bytes, bytes]  # (id, role, ts) as the tables hold them


@dataclass(slots=True)
class InForce:
    """Per role, the items' (ts, id) keys sorted as the database sorts bytea, their ids as
    text in the same order, and where each item is filed."""

    keys: dict[bytes, list[tuple[bytes, bytes]]] = field(default_factory=dict)
    texts: dict[bytes, list[str]] = field(default_factory=dict)
    filed: dict[bytes, tuple[bytes, bytes, bytes]] = field(default_factory=dict)  # id: role, ts

    @classmethod
    def of(cls, rows: Iterable[Row]) -> InForce:
        """From every item of the roles in force (any order)."""
        keys: dict[bytes, list[tuple[bytes, bytes]]] = {role: [] for role in IN_FORCE_ROLES}
        filed = {}
        for i, role, ts in rows:
            if role in keys:
                keys[role].append((ts, i))
                filed[i] = (role, ts, i)
        for ordered in keys.values():
            ordered.sort()
        texts = {role: [i.decode() for _ts, i in ordered] for role, ordered in keys.items()}
        return cls(keys, texts, filed)

    def moved(self, rows: Iterable[Row]) -> InForce:
        """A copy with the items of ``rows`` (stored or given a role since) filed anew."""
        rows = list(rows)
        if not rows:
            return self
        out = InForce(
            {r: list(k) for r, k in self.keys.items()},
            {r: list(t) for r, t in self.texts.items()},
            dict(self.filed),
        )
        for i, role, ts in rows:
            was = out.filed.pop(i, None)
            if was is not None:
                at = bisect_left(out.keys[was[0]], (was[1], was[2]))
                del out.keys[was[0]][at], out.texts[was[0]][at]
            if role in out.keys:
                at = bisect_left(out.keys[role], (ts, i))
                out.keys[role].insert(at, (ts, i))
                out.texts[role].insert(at, i.decode())
                out.filed[i] = (role, ts, i)
        return out

    def ids(self, role: bytes) -> list[str]:
        """The ids of ``role`` in order (entry ids: hex), a list of the caller's."""
        return list(self.texts.get(role, ()))


@dataclass(frozen=True, slots=True)
class Read:
    """What a view of the tables showed: their generation, the last row they had folded,
    the highest ``touched`` among their items."""

    generation: int | None
    last: int
    touched: int


class OrderMemo:
    """The newest :class:`InForce` read, and from which view of the tables (:class:`Read`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: tuple[Read, InForce] | None = None

    def since(self, generation: int | None, last: int) -> tuple[Read, InForce] | None:
        """The lists kept, and from which view, to bring up to a view of ``generation``
        that had folded up to row ``last``; None: read them all (nothing kept, another
        generation, or kept from a newer view, which an older one cannot take back)."""
        with self._lock:
            kept = self._kept
        if kept is None or kept[0].generation != generation or kept[0].last > last:
            return None
        return kept

    def keep(self, read: Read, lists: InForce) -> None:
        """``lists`` as ``read`` showed them, unless lists of a newer view are kept."""
        with self._lock:
            kept = self._kept
            if kept is None or kept[0].generation != read.generation or kept[0].last <= read.last:
                self._kept = (read, lists)
