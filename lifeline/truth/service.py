"""The truth of one line, read from a store: state, views, context and resume.

The async glue around the pure core: it loads the (incremental) state, fetches the few
entries the context quotes, drops any that no longer verify (anchored at read time), and
hands everything to :func:`~lifeline.truth.assemble.assemble`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass

from lifeline.entry import Entry
from lifeline.errors import NotFound
from lifeline.store.port import Store
from lifeline.truth.assemble import TIPS_SHOWN, Context, assemble, needed_ids
from lifeline.truth.budget import Budget
from lifeline.truth.parse import parse_checkpoint
from lifeline.truth.recall import recall
from lifeline.truth.sections import Inputs, PieceMemo
from lifeline.truth.snapshot import truth_source
from lifeline.truth.source import ShownQuery
from lifeline.truth.state import State
from lifeline.truth.tableview import ItemMemo
from lifeline.truth.views import Truth, derive

__all__ = [
    "LineTruth",
    "build_context",
    "read_shown",
    "read_truth",
    "resolve_name",
    "resolve_thread",
    "resume_of",
    "thread_head",
]


@dataclass(frozen=True, slots=True)
class LineTruth:
    state: State
    truth: Truth


async def read_truth(store: Store) -> LineTruth:
    state = await truth_source(store).state()
    return LineTruth(state, derive(state))


async def fetch_verified(store: Store, ids: Iterable[str]) -> dict[str, Entry]:
    """The entries among ``ids`` whose content still matches their id."""
    return {e.id: e for e in await store.get_many(sorted(set(ids))) if e.is_intact()}


def resolve_thread(lt: LineTruth, name: str) -> str:
    """A thread by exact name, or an open entry by id prefix."""
    return resolve_name(lt.state.threads, name)


def resolve_name(names: Iterable[str], name: str) -> str:
    """A thread among ``names`` by exact name, or an open entry by id prefix."""
    known = set(names)
    if name in known:
        return name
    hits = sorted(t for t in known if len(name) >= 6 and t.startswith(name.lower()))
    if len(hits) == 1:
        return hits[0]
    listing = ", ".join(sorted(known)[:10]) or "none yet"
    raise NotFound(f"no thread {name!r}; known threads: {listing}")


def _exactly(_names: Iterable[str], name: str) -> str:
    return name


async def thread_head(store: Store, thread: str) -> tuple[str | None, Truth]:
    """The newest entry whose body names ``thread`` exactly (by ts, then id; None when no
    entry does), and what is in force, in one read."""
    state, truth, _t = await truth_source(store).shown(
        ShownQuery(thread=thread, recent=1, max_items=0, resolve=_exactly)
    )
    marks = state.threads.get(thread) or []
    return (marks[-1][1] if marks else None), truth


async def build_context(
    store: Store,
    *,
    line: str,
    budget: Budget,
    query: str | None = None,
    thread: str | None = None,
    recent: int = 12,
    pieces: PieceMemo | None = None,
    items: ItemMemo | None = None,
) -> Context:
    """The context of ``store``. What earlier calls on the same line kept, reused and added
    to: ``items`` read (:class:`~lifeline.truth.tableview.ItemMemo`), ``pieces`` rendered
    (:class:`~lifeline.truth.sections.PieceMemo`)."""
    state, truth, thread = await truth_source(store).shown(
        ShownQuery(
            thread=thread,
            recent=recent,
            max_items=budget.max_items,
            resolve=resolve_name,
            items=items,
        )
    )
    hits = await recall(store, truth, query) if query else []
    probe = Inputs(state, truth, {}, hits, thread, recent, budget.max_items)
    entries = await fetch_verified(store, needed_ids(probe))
    inp = Inputs(state, truth, entries, hits, thread, recent, budget.max_items)
    tips = await store.tips(limit=TIPS_SHOWN + 1)  # what the footer shows: not all of them
    return assemble(inp, line=line, budget=budget, tips=tips, query=bool(query), pieces=pieces)


async def read_shown(store: Store) -> LineTruth:
    """What is in force and the few items it names (identity, pins, thread labels), without
    the whole state: for commands that need the truth but not every item."""
    state, truth, _t = await truth_source(store).shown(
        ShownQuery(thread=None, recent=0, max_items=0, resolve=resolve_name)
    )
    return LineTruth(state, truth)


async def read_for_exam(store: Store) -> LineTruth:
    """Every decision in force and open question with its item, and the items the truth
    names (identity, pins), in one read: what ``exam`` scores, without the whole state
    (every item, thread mark and correction of the line). The same answers elsewhere."""
    state, truth, _t = await truth_source(store).shown(
        ShownQuery(thread=None, recent=0, max_items=sys.maxsize, resolve=resolve_name)
    )
    return LineTruth(state, truth)


async def resume_of(store: Store) -> list[dict[str, object]]:
    """Every thread's live checkpoint, parsed (``lifeline resume``)."""
    lt = await read_shown(store)
    entries = await fetch_verified(store, lt.truth.resume.values())
    out: list[dict[str, object]] = []
    for thread, cid in lt.truth.resume.items():
        entry = entries.get(cid)
        if entry is None:
            continue
        item = lt.state.items.get(thread)
        out.append(
            {
                "thread": thread,
                "label": item[2] if item else thread,
                "checkpoint": cid,
                "ts": entry.ts,
                "blocks": {k: list(v) for k, v in parse_checkpoint(entry.body).blocks.items()},
            }
        )
    out.sort(key=lambda r: (str(r["ts"]), str(r["checkpoint"])))
    return out
