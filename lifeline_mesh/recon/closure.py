"""Closure of received items: an item is delivered only once its parents are known.

Items whose parents are missing wait in a bounded orphan pool; their missing parents are
reported so the session can ask for them. Pure: the caller supplies what is known.
"""

from __future__ import annotations

from collections.abc import Callable

from lifeline.errors import RemoteProtocolError
from lifeline_mesh.recon.sets import ParsedItem

__all__ = ["OrphanPool"]


class OrphanPool:
    """Holds items waiting for parents; ``cap`` bounds how many may wait at once."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._waiting: dict[bytes, ParsedItem] = {}
        self._blocked_on: dict[bytes, set[bytes]] = {}  # missing parent -> waiting ids
        self._asked: set[bytes] = set()

    def __len__(self) -> int:
        return len(self._waiting)

    def admit(
        self, items: list[ParsedItem], known: Callable[[bytes], bool], mark: Callable[[bytes], None]
    ) -> list[ParsedItem]:
        """The items (from ``items`` or released from the pool) ready to deliver, in order."""
        ready: list[ParsedItem] = []
        for item in items:
            if item.id in self._waiting:
                continue
            missing = [d for d in item.deps if not known(d)]
            if known(item.id) or not missing:
                ready.append(item)
                mark(item.id)
                self._release(item.id, known, mark, ready)
            else:
                self._park(item, missing)
        return ready

    def _park(self, item: ParsedItem, missing: list[bytes]) -> None:
        if len(self._waiting) >= self.cap:
            raise RemoteProtocolError(
                f"orphan pool is full (cap orphan_pool={self.cap}): the peer sent items "
                f"whose parents never came (e.g. {item.id.hex()[:12]})"
            )
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
        return sorted(
            p for p in self._blocked_on if p not in self._asked and p not in self._waiting
        )

    def has_unasked(self) -> bool:
        return bool(self._unasked())

    def unasked_parents(self) -> list[bytes]:
        """Missing parents not yet requested (each is asked for once per session)."""
        fresh = self._unasked()
        self._asked.update(fresh)
        return fresh
