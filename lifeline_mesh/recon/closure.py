"""Closure of received items: an item is delivered only once its parents are known.

Items whose parents are missing wait in a bounded orphan pool; their missing parents are
reported so the session can ask for them. The pool is bounded twice: ``cap`` items and
``byte_cap`` bytes of raw items (10,000 orphans of 64 KB held ~1.3 GB once parsed). When
either is reached, further orphans are not kept: only their ids are (32 bytes each, up to
``overflow_cap``), and they are asked for again once reconciliation has settled — a large
sync where children are found in an earlier round than their parents then costs a
re-send, not unbounded memory. Pure: the caller supplies what is known.
"""

from __future__ import annotations

from collections.abc import Callable

from lifeline.errors import RemoteProtocolError
from lifeline_mesh.recon.sets import ParsedItem

__all__ = ["OrphanPool"]


class OrphanPool:
    """Holds items waiting for parents; ``cap`` bounds how many may wait at once, and
    ``byte_cap`` how many bytes of raw items."""

    def __init__(self, cap: int, overflow_cap: int = 1_000_000, byte_cap: int = 64 << 20) -> None:
        self.cap = cap
        self.overflow_cap = overflow_cap
        self.byte_cap = byte_cap
        self.bytes = 0  # raw bytes of the items waiting
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
        waiting = self._waiting
        for item in items:
            if waiting and item.id in waiting:
                continue
            missing = [d for d in item.deps if not known(d)] if item.deps else None
            if not missing or known(item.id):  # (its own id is looked up only if need be)
                if self._overflow:
                    self._overflow.discard(item.id)
                ready.append(item)
                mark(item.id)
                if self._blocked_on:  # (a million items pass here in an initial sync)
                    self._release(item.id, known, mark, ready)
            else:
                self._park(item, missing)
        return ready

    def _park(self, item: ParsedItem, missing: list[bytes]) -> None:
        if len(self._waiting) >= self.cap or self.bytes + len(item.raw) > self.byte_cap:
            if len(self._overflow) >= self.overflow_cap:
                raise RemoteProtocolError(
                    f"too many orphans in one session (caps orphan_pool={self.cap} and "
                    f"orphan_pool_bytes={self.byte_cap} kept, orphan_overflow="
                    f"{self.overflow_cap} remembered): the peer sends items whose parents "
                    f"never come (e.g. {item.id.hex()[:12]})"
                )
            self._overflow.add(item.id)
            return
        self._waiting[item.id] = item
        self.bytes += len(item.raw)
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
                self.bytes -= len(child.raw)
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
