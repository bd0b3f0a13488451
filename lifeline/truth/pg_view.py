"""Reading the truth tables of a hub's line (:mod:`lifeline.truth.pg_table`): the twin of
:mod:`lifeline.truth.tableview`, with the same choices of what a context reads (the ends of
the decisions, the newest open items, pins, identity, thread labels; the helpers are
tableview's) in a few queries, so a context costs a few round trips, not a fold.

:func:`read_current` reads a current line in one read-only REPEATABLE READ transaction (a
consistent view); a line that is behind is caught up and read under the line's lock.
:class:`PgTruth` is a hub line's :class:`~lifeline.truth.source.TruthSource` (decision 0088).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from lifeline.errors import StoreError
from lifeline.truth.order_memo import IN_FORCE_ROLES, InForce, Read
from lifeline.truth.pg_table import (
    PgTruthLine,
    b,
    catch_up,
    generation,
    is_current,
    read_core,
    s,
    texts,
)
from lifeline.truth.source import FoldedTruth, ShownQuery, Superseded
from lifeline.truth.state import Item, State
from lifeline.truth.tableview import ItemMemo, ends, pinned_order, pins_in_force
from lifeline.truth.views import Truth

if TYPE_CHECKING:
    from lifeline.store.pg_schema import Conn
    from lifeline.store.postgres import PgStore

__all__ = ["PgTruth", "full_state", "read_current", "shown_state", "superseded"]

log = logging.getLogger(__name__)
T = TypeVar("T")
Reader = Callable[["Conn", int], Awaitable[T]]


async def read_current(store: PgTruthLine, reader: Reader[T]) -> T | None:
    """``reader(conn, line_id)`` on tables that cover every row of the line; None when they
    are behind and cannot be brought up to date here (a user that may not write, the line's
    lock held too long): the caller folds the line instead, as on a read-only line file."""
    line = store.line_id
    async with store.read_view() as conn:
        if await is_current(conn, line):
            return await reader(conn, line)
    try:
        async with store.transaction() as conn:
            await catch_up(conn, line)
            return await reader(conn, line)
    except StoreError as exc:
        log.warning("could not bring the truth tables up to date: %s", exc)
        return None


async def superseded(conn: Conn, line: int) -> dict[str, str]:
    rows = await conn.fetch("SELECT id, by FROM truth_superseded WHERE line_id = $1", line)
    return dict(zip(texts(rows, 0), texts(rows, 1), strict=True))


async def _items(
    conn: Conn, line: int, ids: Iterable[str], known: ItemMemo | None, gen: int | None
) -> dict[str, Item]:
    if known is not None:
        out, missing = known.kept(gen, ids)
    else:
        out, missing = {}, set(ids)
    fresh: dict[str, Item] = {}
    if missing:
        for i, kind, ts, summary, why, thread in await conn.fetch(
            "SELECT id, kind, ts, summary, why, thread FROM truth_items"
            " WHERE line_id = $1 AND id = ANY($2::bytea[])",
            line,
            [b(i) for i in missing],
        ):
            fresh[s(i)] = [s(kind), s(ts), s(summary), s(why), s(thread)]
    if known is not None:
        known.keep(gen, fresh)
    out.update(fresh)
    return out


async def _ids(conn: Conn, sql: str, *args: object) -> list[str]:
    return texts(await conn.fetch(sql, *args))


# The decisions in force and the open items (sorted here: see InForce), and the highest
# mark of any item; then only the items touched since (decision 0087).
_IN_FORCE = "SELECT id, role, ts FROM truth_items WHERE line_id = $1 AND role = ANY($2::bytea[])"
_TOUCHED = "SELECT max(touched) FROM truth_items WHERE line_id = $1"
_TOUCHED_SINCE = "SELECT id, role, ts, touched FROM truth_items WHERE line_id = $1 AND touched > $2"


async def _in_force(
    conn: Conn, line: int, gen: int | None, last: int, known: ItemMemo | None
) -> InForce:
    """The decisions in force and the open items, each in order: those kept by ``known``
    moved by the items touched since they were read, or all of them read."""
    memo = None if known is None else known.order
    base = None if memo is None else memo.since(gen, last)
    if base is None:
        lists = InForce.of(tuple(r) for r in await conn.fetch(_IN_FORCE, line, IN_FORCE_ROLES))
        read = Read(gen, last, int(await conn.fetchval(_TOUCHED, line) or 0))
    else:
        seen, kept = base
        rows = await conn.fetch(_TOUCHED_SINCE, line, seen.touched)
        lists = kept.moved((r[0], r[1], r[2]) for r in rows)
        read = Read(gen, last, max([seen.touched, *(int(r[3]) for r in rows)]))
    if memo is not None:
        memo.keep(read, lists)
    return lists


# Every thread with a mark: a loose index scan (one seek per thread), as tableview's
# thread_names walks SQLite's index.
_THREADS = """WITH RECURSIVE t(th) AS (
    (SELECT thread FROM truth_marks WHERE line_id = $1 ORDER BY thread LIMIT 1)
    UNION ALL
    SELECT (SELECT m.thread FROM truth_marks m WHERE m.line_id = $1 AND m.thread > t.th
            ORDER BY m.thread LIMIT 1) FROM t WHERE t.th IS NOT NULL)
SELECT th FROM t WHERE th IS NOT NULL"""
# Each thread with a checkpoint (the same walk, on the checkpoints' index) and its newest
# checkpoint that is not superseded: a few index seeks per thread, as tableview's _resume.
_RESUME = """WITH RECURSIVE t(th) AS (
    (SELECT thread FROM truth_marks WHERE line_id = $1 AND cp = 1 ORDER BY thread LIMIT 1)
    UNION ALL
    SELECT (SELECT m.thread FROM truth_marks m WHERE m.line_id = $1 AND m.cp = 1
            AND m.thread > t.th ORDER BY m.thread LIMIT 1) FROM t WHERE t.th IS NOT NULL)
SELECT t.th, (SELECT m.id FROM truth_marks m WHERE m.line_id = $1 AND m.cp = 1
    AND m.thread = t.th AND NOT EXISTS (SELECT 1 FROM truth_superseded x
        WHERE x.line_id = $1 AND x.id = m.id)
    ORDER BY m.ts DESC, m.id DESC LIMIT 1) FROM t WHERE t.th IS NOT NULL"""


async def _truth(
    conn: Conn,
    line: int,
    state: State,
    ended: list[str],
    known: ItemMemo | None,
    at: tuple[int | None, int],
) -> Truth:
    """tableview's ``truth_of`` on a hub's line (``at``: the tables' generation, the last
    row they folded)."""
    gone = await superseded(conn, line)
    boot = await conn.fetchval(
        "SELECT id FROM truth_items WHERE line_id = $1 AND role = $2"
        " ORDER BY ts DESC, id DESC LIMIT 1",
        line,
        b"b",
    )
    pin_notes = pins_in_force(state, gone)
    pin_items = await _items(conn, line, pin_notes, known, at[0])
    times = {i: item[1] for i, item in pin_items.items()}
    closed = set(ended)
    resume = {
        s(t): s(i)
        for t, i in await conn.fetch(_RESUME, line)
        if i is not None and s(t) not in closed
    }
    in_force = await _in_force(conn, line, at[0], at[1], known)
    return Truth(
        superseded=gone,
        decisions=in_force.ids(b"d"),
        open=in_force.ids(b"o"),
        identity=None if boot is None else s(boot),
        pinned=pinned_order(pin_notes, times),
        pin_notes=pin_notes,
        resume=dict(sorted(resume.items())),
    )


def shown_state(
    thread: str | None,
    recent: int,
    max_items: int,
    resolve: Callable[[Iterable[str], str], str],
    items: ItemMemo | None = None,
) -> Reader[tuple[State, Truth, str | None]]:
    """A reader of what a context reads (see tableview's ``shown_state``)."""

    async def read(conn: Conn, line: int) -> tuple[State, Truth, str | None]:
        found = await read_core(conn, line)
        if found is None:
            raise LookupError("the truth tables are not up to date")
        last, state, ended = found
        gen = None if items is None else await generation(conn, line)
        names = await _ids(conn, _THREADS, line)
        chosen = thread if thread is None else resolve(names, thread)
        truth = await _truth(conn, line, state, ended, items, (gen, last))
        wanted: set[str] = set(truth.pinned) | set(truth.resume)
        if truth.identity is not None:
            wanted.add(truth.identity)
        if chosen is None:
            pinned = set(truth.pinned)
            decisions = ends([d for d in truth.decisions if d not in pinned], max_items, False)
            opens = ends(truth.open, max_items, True)
        else:
            mine = "SELECT id FROM truth_items WHERE line_id = $1 AND role = $2 AND {}"
            order = " ORDER BY ts, id"
            decisions = await _ids(conn, mine.format("thread = $3") + order, line, b"d", b(chosen))
            opens = await _ids(
                conn, mine.format("(thread = $3 OR id = $3)") + order, line, b"o", b(chosen)
            )
            truth = Truth(truth.superseded, decisions, opens, truth.identity, truth.pinned,
                          truth.pin_notes, truth.resume)  # fmt: skip
        wanted.update(decisions)
        wanted.update(opens)
        state.items = await _items(conn, line, wanted, items, gen)
        fixes = sorted({d for d in decisions if state.items[d][0] == "correction"})
        for cid, targets in await conn.fetch(
            "SELECT id, targets FROM truth_corrections WHERE line_id = $1"
            " AND id = ANY($2::bytea[])",
            line,
            [b(i) for i in fixes],
        ):
            state.corrections[s(cid)] = json.loads(s(targets))
        state.threads = {t: [] for t in names}
        if chosen is not None and chosen in state.threads:
            rows = await conn.fetch(
                "SELECT ts, id FROM truth_marks WHERE line_id = $1 AND thread = $2"
                " ORDER BY ts DESC, id DESC LIMIT $3",
                line,
                b(chosen),
                recent if recent > 0 else None,
            )
            state.threads[chosen] = [[s(ts), s(i)] for ts, i in reversed(rows)]
        return state, truth, chosen

    return read


async def full_state(conn: Conn, line: int) -> State:
    """The whole folded state, read back from the tables (what a full fold gives)."""
    found = await read_core(conn, line)
    if found is None:
        raise LookupError("the truth tables are not up to date")
    state = found[1]
    for i, kind, ts, summary, why, thread in await conn.fetch(
        "SELECT id, kind, ts, summary, why, thread FROM truth_items WHERE line_id = $1 ORDER BY id",
        line,
    ):
        state.items[s(i)] = [s(kind), s(ts), s(summary), s(why), s(thread)]
    for cid, targets in await conn.fetch(
        "SELECT id, targets FROM truth_corrections WHERE line_id = $1 ORDER BY id", line
    ):
        state.corrections[s(cid)] = json.loads(s(targets))
    for thread, ts, i, cp in await conn.fetch(
        "SELECT thread, ts, id, cp FROM truth_marks WHERE line_id = $1 ORDER BY thread, ts, id",
        line,
    ):
        state.threads.setdefault(s(thread), []).append([s(ts), s(i)])
        if cp:
            state.checkpoints.setdefault(s(thread), []).append([s(ts), s(i)])
    return state


class PgTruth(FoldedTruth):
    """The truth tables of a hub's line; a fold when they cannot be brought up to date."""

    def __init__(self, store: PgStore) -> None:
        super().__init__(store)
        self.tables: PgTruthLine = store

    async def state(self) -> State:
        state = await read_current(self.tables, full_state)
        return state if state is not None else await super().state()

    async def shown(self, query: ShownQuery) -> tuple[State, Truth, str | None]:
        reader = shown_state(
            query.thread, query.recent, query.max_items, query.resolve, query.items
        )
        found = await read_current(self.tables, reader)
        if found is not None:
            return found
        return await super().shown(query)

    async def superseded(self) -> Superseded:
        gone = await read_current(self.tables, superseded)
        return Superseded(gone) if gone is not None else await super().superseded()
