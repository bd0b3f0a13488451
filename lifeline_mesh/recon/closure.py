"""Closure of received items: an item is delivered only once its parents are known.

Items whose parents are missing wait in a bounded orphan pool; their missing parents are
reported so the session can ask for them. When the pool is full, further orphans are not
kept: only their ids are (32 bytes each, up to ``overflow_cap``), and they are asked for
again once reconciliation has settled — a large sync where children are found in an
earlier round than their parents then costs a re-send, not unbounded memory. Pure: the
caller supplies what is known.
"""

from __future__ import annotations

from collections.abc import Callable

from lifeline.errors import RemoteProtocolError
from lifeline_mesh.recon.sets import ParsedItem

__all__ = ["OrphanPool"]


class OrphanPool:
    """Holds items waiting for parents; ``cap`` bounds how many may wait at once."""

    def __init__(self, cap: int, overflow_cap: int = 1_000_000) -> None:
        self.cap = cap
        self.overflow_cap = overflow_cap
        self._overflow: set[bytes] = set()  # orphans not kept: asked for again later
        self._waiting: dict[bytes, ParsedItem] = {}
        self._blocked_on: dict[bytes, set[bytes]] = {}  # missing parent -> waiting ids
        self._asked: set[bytes] = set()

    def __len__(self) -> int:
        return len(self._waiting) + len(self._overflow)

    def admit(
        self, items: list[ParsedItem], known: Callable[[bytes], bool], mark: Callable[[bytes], None]
    ) -> list[ParsedItem]:
        """The items (from ``items`` or released from the pool) ready to deliver, in order."""
        ready: list[ParsedItem] = []
        for item in items:
            if item.id in self._waiting:
                continue
            missing = [d for d in item.deps if not known(d)]
            if not missing or known(item.id):  # (its own id is looked up only if need be)
                self._overflow.discard(item.id)
                ready.append(item)
                mark(item.id)
                self._release(item.id, known, mark, ready)
            else:
                self._park(item, missing)
        return ready

    def _park(self, item: ParsedItem, missing: list[bytes]) -> None:
        if len(self._waiting) >= self.cap:
            if len(self._overflow) >= self.overflow_cap:
                raise RemoteProtocolError(
                    f"too many orphans in one session (caps orphan_pool={self.cap} kept, "
                    f"orphan_overflow={self.overflow_cap} remembered): the peer sends items "
                    f"whose parents never come (e.g. {item.id.hex()[:12]})"
                )
            self._overflow.add(item.id)
            return
        self._waiting[item.id] = item
        for dep in missing:
            self._blocked_on.setdefault(dep, set()).add(item.id)

    def _release(
        self,
        parent: bytes,
        known: Callable[[bytes], bool],
        mark: Callable[[bytes], None],
        ready: list[ParsedItem],
    ) -> None:
        stack = [parent]
        while stack:
            for child_id in sorted(self._blocked_on.pop(stack.pop(), ())):
                child = self._waiting.get(child_id)
                if child is None or not all(known(d) for d in child.deps):
                    continue
                del self._waiting[child_id]
                ready.append(child)
                mark(child_id)
                stack.append(child_id)

    def _unasked(self) -> list[bytes]:
        # A parent that itself waits in the pool is not missing: its own parent is.
        parents = (p for p in self._blocked_on if p not in self._waiting)
        wanted = {*parents, *self._overflow}
        return sorted(wanted - self._asked)

    def has_unasked(self) -> bool:
        return bool(self._unasked())

    def unasked_parents(self) -> list[bytes]:
        """Missing parents not yet requested (each is asked for once per session)."""
        fresh = self._unasked()
        self._asked.update(fresh)
        return fresh
