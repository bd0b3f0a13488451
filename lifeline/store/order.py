"""Pure helpers shared by the store adapters: heights and batch ordering."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry

__all__ = ["newest_first", "order_batch"]


def order_batch(
    entries: Sequence[Entry],
    stored_height: Callable[[str], int | None],
    externals: Mapping[str, str],
) -> list[tuple[Entry, int]]:
    """Order a batch parents-first (linear time) and give each entry its height.

    ``stored_height(id)`` returns the height of an already stored entry, or None. A parent
    that is neither stored, in the batch, nor a declared external breaks closure: the whole
    batch is refused, naming the missing parent.
    """
    fast = _in_order(entries, stored_height, externals)
    if fast is not None:
        return fast
    batch: dict[str, Entry] = {}
    for entry in entries:
        batch.setdefault(entry.id, entry)
    base: dict[str, int] = {}
    blockers: dict[str, int] = {}
    dependants: dict[str, list[str]] = defaultdict(list)
    for entry in batch.values():
        top = 0
        waiting = 0
        for parent in set(entry.parents):
            if parent in batch and parent != entry.id:
                waiting += 1
                dependants[parent].append(entry.id)
                continue
            h = stored_height(parent)
            if h is None:
                if parent in externals:
                    continue
                raise InvalidEntry(
                    f"entry {entry.id[:12]} names parent {parent[:12]}, which is not in this "
                    "line; add the parent first or declare it as a cross-line reference"
                )
            top = max(top, h)
        base[entry.id] = top
        blockers[entry.id] = waiting
    ready = deque(eid for eid, n in blockers.items() if n == 0)
    out: list[tuple[Entry, int]] = []
    while ready:
        eid = ready.popleft()
        height = base[eid] + 1
        out.append((batch[eid], height))
        for child in dependants.get(eid, ()):
            base[child] = max(base[child], height)
            blockers[child] -= 1
            if blockers[child] == 0:
                ready.append(child)
    if len(out) != len(batch):
        stuck = [eid[:12] for eid, n in blockers.items() if n > 0][:3]
        raise InvalidEntry(f"entries {', '.join(stuck)} form a parent cycle; refusing the batch")
    return out


def _in_order(
    entries: Sequence[Entry],
    stored_height: Callable[[str], int | None],
    externals: Mapping[str, str],
) -> list[tuple[Entry, int]] | None:
    """The usual case in one pass: a batch already parents-first, with no repeated id.

    Local batches and sync batches arrive that way. Returns None (the general path then
    runs) as soon as a parent is neither earlier in the batch nor stored nor external, or
    an id repeats; the general path then orders the batch or names the problem.
    """
    heights: dict[str, int] = {}
    out: list[tuple[Entry, int]] = []
    for entry in entries:
        if entry.id in heights:
            return None
        top = 0
        for parent in entry.parents:
            h = heights.get(parent)
            if h is None:
                h = stored_height(parent)
                if h is None:
                    if parent in externals:
                        continue
                    return None
            if h > top:
                top = h
        heights[entry.id] = top + 1
        out.append((entry, top + 1))
    return out


def newest_first(*parts: Iterable[Sequence[Any]]) -> list[Sequence[Any]]:
    """Rows ``(id, body, height, ts)`` of several reads, each id once (the later read's
    row wins), newest first in stream order (height, ts, id descending)."""
    rows = {r[0]: r for part in parts for r in part}
    return sorted(rows.values(), key=lambda r: (r[2], r[3], r[0]), reverse=True)
