"""The truth tables on PostgreSQL: the twin of :mod:`lifeline.truth.table` for a hub's lines.

Same rows, same meaning, one more column: every row carries its line's number, as the
ledger's own tables do in a hub's database (lifeline/store/pg_schema.py). Text is kept as
the bytes of its UTF-8 (``bytea``, with lone surrogates passed through): an entry may hold
U+0000 or text that is not UTF-8, which PostgreSQL's ``text`` refuses, and bytes compare
and sort as SQLite compares text, byte for byte.

Kept up to date by the writers (decision 0077): each append of new entries folds them into
the tables inside its own transaction, under the line's lock (:func:`fold_appended`, the
``lifeline.pg_append`` hook of :mod:`lifeline.store.pg_writes`), whichever hub process
writes. Tables that are behind (none yet after the upgrade that adds them, a writer without
the hook, a ts changed: a trigger drops ``truth_core`` as SQLite's does) are caught up by
the next reader, under the same lock (:func:`catch_up`). The reducers, the rows an entry
gives (:func:`~lifeline.truth.table.rows_of`) and the correction graph
(:func:`~lifeline.truth.table.roles_from`) are SQLite's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry, StoreError
from lifeline.truth.progress import fold_progress
from lifeline.truth.reducers import fold
from lifeline.truth.state import STATE_VERSION, State
from lifeline.truth.table import (
    SHOWN_FOLD,
    TABLES,
    core_of,
    core_text,
    merge_core,
    roles_from,
    rows_of,
)

if TYPE_CHECKING:
    from lifeline.store.pg_schema import Conn, Migrations

__all__ = [
    "PG_TRUTH",
    "PgTruthLine",
    "b",
    "catch_up",
    "derive_roles",
    "fold_after_load",
    "fold_appended",
    "is_current",
    "lock_line",
    "read_core",
    "rebuild",
    "s",
    "texts",
]

log = logging.getLogger(__name__)
_CHUNK = 5_000


def _t(name: str) -> str:
    return f"{name} bytea NOT NULL"


PG_TRUTH: Migrations = {
    "truth": [
        (
            1,
            [
                "CREATE TABLE truth_generation (line_id int PRIMARY KEY, n bigint NOT NULL)",
                "INSERT INTO truth_generation SELECT line_id, 0 FROM lines",
                f"""CREATE TABLE truth_core (
                    line_id  int PRIMARY KEY,
                    last_seq bigint NOT NULL,
                    count    bigint NOT NULL,
                    version  int NOT NULL,
                    {_t("digest")}, {_t("ended")}, {_t("state")})""",
                f"""CREATE TABLE truth_items (
                    line_id int NOT NULL, {_t("id")}, {_t("kind")}, {_t("ts")},
                    {_t("summary")}, {_t("why")}, {_t("thread")}, {_t("role")},
                    PRIMARY KEY (line_id, id))""",
                "CREATE INDEX truth_items_role ON truth_items (line_id, role, ts, id)",
                f"""CREATE TABLE truth_marks (
                    line_id int NOT NULL, {_t("thread")}, {_t("ts")}, {_t("id")},
                    cp int NOT NULL, PRIMARY KEY (line_id, thread, ts, id))""",
                "CREATE INDEX truth_marks_cp ON truth_marks (line_id, thread, ts, id) WHERE cp = 1",
                f"""CREATE TABLE truth_corrections (
                    line_id int NOT NULL, {_t("id")}, {_t("targets")},
                    PRIMARY KEY (line_id, id))""",
                f"""CREATE TABLE truth_targets (
                    line_id int NOT NULL, {_t("target")}, {_t("cid")},
                    PRIMARY KEY (line_id, target, cid))""",
                f"""CREATE TABLE truth_superseded (
                    line_id int NOT NULL, {_t("id")}, {_t("by")}, PRIMARY KEY (line_id, id))""",
                # As on SQLite: an entry changed in place (a ts lowered, or replaced by its
                # author's signed one) leaves the tables to be folded again by the next read.
                """CREATE FUNCTION truth_entry_changed() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    DELETE FROM truth_core WHERE line_id = OLD.line_id;
                    INSERT INTO truth_generation VALUES (OLD.line_id, 1) ON CONFLICT (line_id)
                        DO UPDATE SET n = truth_generation.n + 1;
                    RETURN NULL;
                END $$""",
                "CREATE TRIGGER truth_on_update AFTER UPDATE OR DELETE ON entries"
                " FOR EACH ROW EXECUTE FUNCTION truth_entry_changed()",
            ],
        ),
        (
            2,
            [
                # When an item was stored or last given a role: a mark from one sequence,
                # taken by the database on every write of the row (so a writer of any
                # version takes it; folds hold the line's lock, so marks grow in commit
                # order). A reader that kept what is in force reads only the items marked
                # past the highest mark it saw (lifeline/truth/pg_view.py, decision 0087).
                "CREATE SEQUENCE truth_touch",
                "ALTER TABLE truth_items ADD COLUMN touched bigint NOT NULL DEFAULT 0",
                "CREATE INDEX truth_items_touched ON truth_items (line_id, touched)",
                """CREATE FUNCTION truth_item_touched() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    NEW.touched := nextval('truth_touch');
                    RETURN NEW;
                END $$""",
                "CREATE TRIGGER truth_items_touch BEFORE INSERT OR UPDATE ON truth_items"
                " FOR EACH ROW EXECUTE FUNCTION truth_item_touched()",
            ],
        ),
    ]
}


def b(text: str) -> bytes:
    """Text as the truth tables hold it on PostgreSQL."""
    return text.encode("utf-8", "surrogatepass")


def s(raw: bytes) -> str:
    """Text read back from the truth tables on PostgreSQL."""
    return raw.decode("utf-8", "surrogatepass")


def texts(rows: Iterable[Any], column: int = 0) -> list[str]:
    """A column of rows read back as text (:func:`s`, without a call per row)."""
    return [r[column].decode("utf-8", "surrogatepass") for r in rows]


class PgTruthLine(Protocol):
    """A line of a hub's database (:class:`~lifeline.store.postgres.PgStore`)."""

    line_id: int

    @property
    def components(self) -> frozenset[str]:
        """The components whose tables the database holds."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[Conn]: ...

    def read_view(self) -> AbstractAsyncContextManager[Conn]: ...


async def lock_line(conn: Conn, line_id: int) -> tuple[int, int]:
    """The line's writer lock, as every append takes it; (highest row, count)."""
    row = await conn.fetchrow(
        "SELECT next_seq, n FROM lines WHERE line_id = $1 FOR UPDATE", line_id
    )
    if row is None:
        raise StoreError(f"line {line_id} is gone from the database")
    return int(row[0]) - 1, int(row[1])


async def read_core(conn: Conn, line_id: int) -> tuple[int, State, list[str]] | None:
    """(last row folded, the small accumulators, threads ended), None when absent/other."""
    row = await conn.fetchrow(
        "SELECT last_seq, count, digest, ended, state, version FROM truth_core WHERE line_id = $1",
        line_id,
    )
    if row is None or row[5] != STATE_VERSION:
        return None
    state = core_of(int(row[1]), s(row[2]), bytes(row[4]))
    return None if state is None else (int(row[0]), state, list(json.loads(bytes(row[3]))))


async def is_current(conn: Conn, line_id: int) -> bool:
    """Whether the tables cover every row of the line (two primary-key reads)."""
    row = await conn.fetchrow(
        "SELECT c.last_seq = l.next_seq - 1 AND c.count = l.n AND c.version = $2"
        " FROM lines l JOIN truth_core c USING (line_id) WHERE l.line_id = $1",
        line_id,
        STATE_VERSION,
    )
    return row is not None and bool(row[0])


async def generation(conn: Conn, line_id: int) -> int | None:
    found = await conn.fetchval("SELECT n FROM truth_generation WHERE line_id = $1", line_id)
    return None if found is None else int(found)


async def _write_core(
    conn: Conn, line_id: int, last: int, state: State, ended: Iterable[str]
) -> None:
    await conn.execute(
        "INSERT INTO truth_core VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (line_id)"
        " DO UPDATE SET last_seq = $2, count = $3, version = $4, digest = $5, ended = $6,"
        " state = $7",
        line_id,
        last,
        state.count,
        STATE_VERSION,
        b(f"{state.digest:064x}"),
        b(json.dumps(sorted(ended))),
        b(core_text(state)),
    )


_COLUMNS = {
    "truth_items": ("id", "kind", "ts", "summary", "why", "thread", "role"),
    "truth_marks": ("thread", "ts", "id", "cp"),
    "truth_corrections": ("id", "targets"),
    "truth_targets": ("target", "cid"),
}


async def _store_rows(conn: Conn, line_id: int, delta: State) -> None:
    for table, rows in rows_of(delta).items():
        if not rows:
            continue
        names = _COLUMNS[table]
        arrays = ", ".join(
            f"${k + 2}::{'int' if name == 'cp' else 'bytea'}[]" for k, name in enumerate(names)
        )
        await conn.execute(
            f"INSERT INTO {table} (line_id, {', '.join(names)}) SELECT $1, * FROM"
            f" unnest({arrays}) ON CONFLICT DO NOTHING",
            line_id,
            *[[r[k] if name == "cp" else b(r[k]) for r in rows] for k, name in enumerate(names)],
        )


async def _names_a_target(conn: Conn, line_id: int, ids: list[str]) -> bool:
    found = await conn.fetchval(
        "SELECT 1 FROM truth_targets WHERE line_id = $1 AND target = ANY($2::bytea[]) LIMIT 1",
        line_id,
        [b(i) for i in ids],
    )
    return found is not None


async def derive_roles(
    conn: Conn, line_id: int, rewords: list[str]
) -> tuple[dict[str, str], dict[str, str], dict[str, str], list[str]]:
    """:func:`lifeline.truth.table.derive_roles` on a line of the database."""
    corrections = [
        (s(i), s(t))
        for i, t in await conn.fetch(
            "SELECT id, targets FROM truth_corrections WHERE line_id = $1", line_id
        )
    ]
    named = [
        (s(i), s(k), s(t), s(th), s(r))
        for i, k, t, th, r in await conn.fetch(
            "SELECT id, kind, ts, thread, role FROM truth_items WHERE line_id = $1 AND id IN"
            " (SELECT id FROM truth_corrections WHERE line_id = $1"
            "  UNION SELECT target FROM truth_targets WHERE line_id = $1)",
            line_id,
        )
    ]
    return roles_from(corrections, named, rewords)


async def _rederive(conn: Conn, line_id: int, rewords: list[str]) -> list[str]:
    wanted, roles, superseded, ended = await derive_roles(conn, line_id, rewords)
    changed = [(i, role) for i, role in wanted.items() if role != roles[i]]
    if changed:
        await conn.execute(
            "UPDATE truth_items t SET role = u.role FROM unnest($2::bytea[], $3::bytea[])"
            " AS u(id, role) WHERE t.line_id = $1 AND t.id = u.id",
            line_id,
            [b(i) for i, _ in changed],
            [b(r) for _, r in changed],
        )
    old = {
        s(i): s(by)
        for i, by in await conn.fetch(
            "SELECT id, by FROM truth_superseded WHERE line_id = $1", line_id
        )
    }
    gone = [b(i) for i in old if i not in superseded]
    if gone:
        await conn.execute(
            "DELETE FROM truth_superseded WHERE line_id = $1 AND id = ANY($2::bytea[])",
            line_id,
            gone,
        )
    new = [(i, by) for i, by in superseded.items() if old.get(i) != by]
    if new:
        await conn.execute(
            "INSERT INTO truth_superseded (line_id, id, by) SELECT $1, * FROM"
            " unnest($2::bytea[], $3::bytea[]) ON CONFLICT (line_id, id) DO UPDATE"
            " SET by = excluded.by",
            line_id,
            [b(i) for i, _ in new],
            [b(by) for _, by in new],
        )
    return ended


async def _merge(conn: Conn, line_id: int, core: State, delta: State) -> bool:
    """Store ``delta``'s rows and add its accumulators to ``core``; whether the
    correction graph must be derived again."""
    await _store_rows(conn, line_id, delta)
    merge_core(core, delta)
    return bool(delta.corrections) or await _names_a_target(conn, line_id, list(delta.items))


async def fold_appended(conn: Conn, line_id: int, first_seq: int, entries: Sequence[Entry]) -> None:
    """The append hook: ``entries``, just stored as rows ``first_seq…``, folded into the
    tables in the append's transaction, when they were current before it; else the next
    reader catches them up."""
    if not entries:
        return
    found = await read_core(conn, line_id)
    if found is None or found[0] != first_seq - 1:
        return
    _last, core, ended = found
    delta = State()
    for entry in entries:
        fold(delta, entry)
    if await _merge(conn, line_id, core, delta):
        ended = await _rederive(conn, line_id, core.rewords)
    await _write_core(conn, line_id, first_seq + len(entries) - 1, core, ended)


async def catch_up(conn: Conn, line_id: int) -> None:
    """Bring the tables up to every row of the line, inside a transaction that holds the
    line's lock (:func:`lock_line`)."""
    top, total = await lock_line(conn, line_id)
    found = await read_core(conn, line_id)
    ended: list[str]
    if found is not None and found[0] == top and found[1].count == total:
        return
    if found is None or found[0] > top or found[1].count > total:
        # folded again from the first row: a new generation (what readers kept is void)
        await _next_generation(conn, line_id)
        for table in (*TABLES, "truth_core"):
            await conn.execute(f"DELETE FROM {table} WHERE line_id = $1", line_id)
        last, core, ended, again = 0, State(), [], True
    else:
        (last, core, ended), again = found, False
    shown = fold_progress() if total - core.count >= SHOWN_FOLD else None
    while True:
        rows = await conn.fetch(
            "SELECT seq, doc FROM entries WHERE line_id = $1 AND seq > $2 ORDER BY seq"
            f" LIMIT {_CHUNK}",
            line_id,
            last,
        )
        if not rows:
            break
        delta = State()
        for seq, doc in rows:
            try:
                fold(delta, Entry.from_json(doc, check=False))
            except InvalidEntry as exc:  # the audit's rule for a stored row (stream())
                log.warning("truth: skipping undecodable row %s: %s", seq, exc)
                delta.count += 1
        again = await _merge(conn, line_id, core, delta) or again
        last = int(rows[-1][0])
        if shown is not None:
            shown(core.count, total)
    if core.count != total:
        if found is None:
            raise StoreError(f"truth fold saw {core.count} rows but the line holds {total}")
        # rows changed behind the trigger's back: trust nothing, fold it all
        await conn.execute("DELETE FROM truth_core WHERE line_id = $1", line_id)
        await catch_up(conn, line_id)
        return
    if again:
        ended = await _rederive(conn, line_id, core.rewords)
    await _write_core(conn, line_id, last, core, ended)


async def fold_after_load(conn: Conn, line_id: int) -> None:
    """After a large load (``lifeline.pg_after_load``: the store's background upkeep, and
    `migrate-store` before it ends): the tables brought up to date, so that the first
    reader does not wait for them (rows written by a writer without the hook)."""
    async with conn.transaction():
        await catch_up(conn, line_id)


async def rebuild(conn: Conn, line_id: int) -> None:
    """Fold every row of the line into the tables again (a new generation), inside a
    transaction; e.g. after ``verify`` found a row that lies."""
    await lock_line(conn, line_id)
    await conn.execute("DELETE FROM truth_core WHERE line_id = $1", line_id)
    # what a line's memo kept from the tables is read again (its change token moves)
    await conn.execute("UPDATE lines SET version = version + 1 WHERE line_id = $1", line_id)
    await catch_up(conn, line_id)  # from the first row: a new generation


async def _next_generation(conn: Conn, line_id: int) -> None:
    await conn.execute(
        "INSERT INTO truth_generation VALUES ($1, 1) ON CONFLICT (line_id)"
        " DO UPDATE SET n = truth_generation.n + 1",
        line_id,
    )
