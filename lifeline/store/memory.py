"""MemoryStore: the in-memory twin of SqliteStore, for tests and ephemeral nodes."""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import replace

from lifeline.entry import Entry
from lifeline.errors import AmbiguousPrefix, NotFound
from lifeline.store.order import order_batch
from lifeline.store.port import AppendResult, RowProblem

__all__ = ["MemoryStore"]


class MemoryStore:
    """Keeps one line in dictionaries; same semantics as the SQLite adapter."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._height: dict[str, int] = {}
        self._children: dict[str, set[str]] = {}
        self._dedup: dict[str, str] = {}
        self._externals: dict[str, str] = {}
        self._sorted_ids: list[str] = []

    async def append(self, entry: Entry) -> bool:
        return bool((await self.append_many([entry])).added)

    async def append_many(self, entries: Sequence[Entry]) -> AppendResult:
        ordered = order_batch(entries, self._height.get, self._externals)
        added: list[str] = []
        lowered: list[str] = []
        for entry, height in ordered:
            old = self._entries.get(entry.id)
            if old is not None:
                if entry.ts < old.ts:
                    self._entries[entry.id] = old.with_ts(entry.ts)
                    lowered.append(entry.id)
                continue
            key = entry.dedup_key
            if key is not None:
                if key in self._dedup:
                    entry = replace(entry, dedup_key=None)
                else:
                    self._dedup[key] = entry.id
            self._entries[entry.id] = entry
            self._height[entry.id] = height
            for parent in set(entry.parents):
                self._children.setdefault(parent, set()).add(entry.id)
            bisect.insort(self._sorted_ids, entry.id)
            added.append(entry.id)
        return AppendResult(tuple(added), tuple(lowered))

    async def get(self, entry_id: str) -> Entry:
        try:
            return self._entries[entry_id]
        except KeyError:
            raise NotFound(f"no entry {entry_id[:64]!r} in this line") from None

    async def get_many(self, ids: Iterable[str]) -> list[Entry]:
        return [self._entries[i] for i in ids if i in self._entries]

    async def resolve(self, prefix: str) -> Entry:
        prefix = prefix.lower()
        at = bisect.bisect_left(self._sorted_ids, prefix)
        found = [i for i in self._sorted_ids[at : at + 2] if i.startswith(prefix)]
        if not found or not prefix:
            raise NotFound(f"no entry id starts with {prefix!r}; `lifeline history` lists them")
        if len(found) > 1:
            raise AmbiguousPrefix(
                f"prefix {prefix!r} matches more than one entry; type more characters"
            )
        return self._entries[found[0]]

    async def contains(self, ids: Iterable[str]) -> set[str]:
        return {i for i in ids if i in self._entries}

    async def children(self, entry_id: str) -> list[str]:
        return sorted(self._children.get(entry_id, ()))

    async def tips(self, limit: int | None = None) -> list[str]:
        return sorted(i for i in self._entries if not self._children.get(i))[:limit]

    async def count(self) -> int:
        return len(self._entries)

    async def by_dedup_key(self, key: str) -> Entry | None:
        entry_id = self._dedup.get(key)
        return self._entries[entry_id] if entry_id else None

    async def declare_external(self, entry_id: str, line: str) -> None:
        if entry_id not in self._entries:  # held: no cross-line parent; declared: kept
            self._externals.setdefault(entry_id, line)

    async def externals(self) -> dict[str, str]:
        return dict(self._externals)

    async def keys(self) -> list[tuple[int, str]]:
        return sorted((h, i) for i, h in self._height.items())

    async def stream(self, *, problems: list[RowProblem] | None = None) -> AsyncIterator[Entry]:
        order = sorted(self._entries.values(), key=lambda e: (self._height[e.id], e.ts, e.id))
        for entry in order:
            yield entry

    async def close(self) -> None:
        return None
