"""The reducers: fold one entry into a :class:`~lifeline.truth.state.State`.

Each reducer adds the entry to an order-independent accumulator (DESIGN §4, "same set, same
truth"), so the fold of a set does not depend on arrival order and an incremental fold of
new entries equals a full fold. The integrity gate runs first: an entry whose id does not
match its content is recorded in ``state.integrity`` and feeds no other reducer.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import NamedTuple

from lifeline.entry import Entry
from lifeline.truth.parse import pin_target, rewords, thread_of
from lifeline.truth.state import RECENT_KEEP, Item, State

__all__ = [
    "NO_FACTS",
    "TRACKED_KINDS",
    "WHY_KEEP",
    "Facts",
    "contributor",
    "facts_of",
    "fold",
    "fold_all",
    "id_value",
    "integrity_of",
    "keep_recent",
    "why_excerpt",
]

TRACKED_KINDS = frozenset({"bootstrap", "decision", "open", "correction"})
WHY_KEEP = 400  # chars of the body kept in the state as the "why" of a tracked item
_MOD = 2**256


def why_excerpt(body: str, limit: int = WHY_KEEP) -> str:
    """The body on one line, without a trailing ``origin:`` block, cut at ``limit``."""
    text = body.split("\norigin:\n", 1)[0]
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def integrity_of(entry: Entry) -> str | None:
    """None when the entry's id matches its content; else what its content hashes to
    (``not-utf8`` for text that cannot be hashed)."""
    try:
        expected = entry.expected_id()
    except UnicodeEncodeError:
        expected = "not-utf8"
    return None if expected == entry.id else expected


def id_value(entry_id: str) -> int:
    """An id as an integer, for the set digest (0 for an id that is not hex)."""
    try:
        return int(entry_id, 16)
    except ValueError:
        return 0


def keep_recent(recent: list[list[str]], key: list[str]) -> None:
    """Add ``[ts, id]`` to the sorted newest-:data:`RECENT_KEEP` list ``recent``."""
    if len(recent) >= RECENT_KEEP and key <= recent[0]:
        return
    bisect.insort(recent, key)
    if len(recent) > RECENT_KEEP:
        del recent[0]


def contributor(provider: str, model: str) -> str:
    return f"{provider}/{model}"


class Facts(NamedTuple):
    """What an intact entry adds to the state beyond its counters."""

    thread: str  # "" for none
    checkpoint: bool  # a checkpoint of ``thread``
    pinned: str | None  # the id it pins
    targets: list[str] | None  # what it corrects (a correction)
    reword: bool  # a correction that keeps the question open
    item: Item | None  # its tracked item


NO_FACTS = Facts("", False, None, None, False, None)


def facts_of(kind: str, ts: str, summary: str, body: str, parents: Iterable[str]) -> Facts:
    """The facts of one intact entry (the rows of the truth tables it derives)."""
    if kind not in TRACKED_KINDS and "thread:" not in body and not body.startswith("pin:"):
        return NO_FACTS  # most entries: no thread, not tracked, not a pin
    thread = thread_of(body) or ""
    pinned = pin_target(kind, body)
    targets = sorted(set(parents)) if kind == "correction" else None
    item = None
    if kind in TRACKED_KINDS or pinned is not None:
        item = [kind, ts, " ".join(summary.split()), why_excerpt(body), thread]
    return Facts(
        thread,
        kind == "checkpoint" and bool(thread),
        pinned,
        targets,
        targets is not None and rewords(kind, body),
        item,
    )


def fold(state: State, entry: Entry) -> None:
    """Add one entry (not folded before) to ``state``."""
    state.count += 1
    state.digest = (state.digest + id_value(entry.id)) % _MOD
    expected = integrity_of(entry)
    if expected is not None:
        state.integrity[entry.id] = expected
        return
    key = [entry.ts, entry.id]
    who = contributor(entry.provider, entry.model)
    state.contributors[who] = state.contributors.get(who, 0) + 1
    state.kinds[entry.kind] = state.kinds.get(entry.kind, 0) + 1
    keep_recent(state.recent, key)
    facts = facts_of(entry.kind, entry.ts, entry.summary, entry.body, entry.parents)
    if facts.thread:
        bisect.insort(state.threads.setdefault(facts.thread, []), key)
    if facts.checkpoint:
        bisect.insort(state.checkpoints.setdefault(facts.thread, []), key)
    if facts.pinned is not None:
        state.pins[entry.id] = facts.pinned
    if facts.targets is not None:
        state.corrections[entry.id] = facts.targets
        if facts.reword:
            bisect.insort(state.rewords, entry.id)
    if facts.item is not None:
        state.items[entry.id] = facts.item


def fold_all(entries: Iterable[Entry], state: State | None = None) -> State:
    """Fold every entry into ``state`` (a new one by default) and return it."""
    out = state if state is not None else State()
    for entry in entries:
        fold(out, entry)
    return out
