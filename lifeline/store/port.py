"""The store port: what the ledger needs from any storage of one line.

A line is a set of entries closed under parents (a parent is either stored in the line or
declared as an external, cross-line reference). Adapters: :class:`~lifeline.store.sqlite.
SqliteStore` and the in-memory twin :class:`~lifeline.store.memory.MemoryStore`; one contract
suite (``tests/store/test_store_contract.py``) runs on both.

Semantics every adapter keeps:

* ``append``/``append_many`` are idempotent. A batch is all-or-nothing.
* The same id arriving with an earlier ``ts`` lowers the stored ``ts`` (earliest wins).
* ``dedup_key`` is unique in a line. An entry arriving with a key another entry already holds
  is stored *without* the key: the set of ids must never depend on arrival order.
* ``stream()`` yields entries in a deterministic topological order — by ``(height, ts, id)``,
  where ``height`` is 1 + the greatest height among the parents stored in the line (0 for
  none) — that does not depend on insertion order. Rows that cannot be decoded are skipped
  and reported through ``problems``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from lifeline.entry import Entry

__all__ = ["AppendResult", "RowProblem", "Store"]


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What a batch append did: ids newly stored, ids whose ts was lowered; for received
    entries, why each one their admission refused alone was (the stores never refuse)."""

    added: tuple[str, ...]
    ts_lowered: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return len(self.added)


@dataclass(frozen=True, slots=True)
class RowProblem:
    """A stored row that could not be decoded (reported, then skipped)."""

    rowid: int
    entry_id: str
    reason: str


@runtime_checkable
class Store(Protocol):
    """Async storage of one line."""

    async def append(self, entry: Entry) -> bool:
        """Store one entry; True when it was new."""
        ...

    async def append_many(self, entries: Sequence[Entry]) -> AppendResult:
        """Store a batch in one transaction; parents may come in the same batch."""
        ...

    async def get(self, entry_id: str) -> Entry:
        """The entry by full id, or :class:`~lifeline.errors.NotFound`."""
        ...

    async def get_many(self, ids: Iterable[str]) -> list[Entry]:
        """The entries stored among ``ids``, in the order asked."""
        ...

    async def resolve(self, prefix: str) -> Entry:
        """The one entry whose id starts with ``prefix`` (NotFound / AmbiguousPrefix)."""
        ...

    async def contains(self, ids: Iterable[str]) -> set[str]:
        """The subset of ``ids`` that are stored."""
        ...

    async def children(self, entry_id: str) -> list[str]:
        """Ids of the stored entries that name ``entry_id`` as a parent, sorted."""
        ...

    async def tips(self, limit: int | None = None) -> list[str]:
        """Ids of the entries that no stored entry names as a parent, sorted; with
        ``limit``, only the first ``limit`` of them."""
        ...

    async def count(self) -> int: ...

    async def by_dedup_key(self, key: str) -> Entry | None:
        """The entry a write of this node recorded under ``key`` (what a retried write
        returns); a key that came with a peer's entry finds nothing (decision 0115)."""
        ...

    async def declare_external(self, entry_id: str, line: str) -> None:
        """Record that ``entry_id`` lives in ``line``, so it may be named as a parent. The
        first declaration of an id stays; an id the line holds as an entry is not one."""
        ...

    async def externals(self) -> dict[str, str]:
        """Declared cross-line references: entry id -> line name."""
        ...

    async def keys(self) -> list[tuple[int, str]]:
        """``(height, id)`` of every entry, sorted: the content-derived sync order."""
        ...

    def stream(self, *, problems: list[RowProblem] | None = None) -> AsyncIterator[Entry]:
        """Every entry in the deterministic order (see module docstring)."""
        ...

    async def close(self) -> None: ...
