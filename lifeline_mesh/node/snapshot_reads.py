"""What a shallow snapshot reads of a line, on either backend (decision 0063, 0081).

:func:`~lifeline_mesh.node.shallow_serve.snapshot_of` builds and signs a snapshot from a
:class:`SnapshotReads`: whether the line is itself shallow, the rows of the entries it sends
(heights and parents: their order, parents first, and the boundary's heights), the newest
state statement of each node with the ``imported`` statements of the entries sent, and the
ids of their author signatures. A line file answers with SQL on its SQLite connection
(:class:`SqliteSnapshotReads`); a hub's line with SQL on its PostgreSQL partition
(:class:`PgSnapshotReads`). The truth in force is read through the line's truth API
(``lifeline.truth.in_force``) by the caller, whatever keeps it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Protocol

from lifeline.store.change import content_sql
from lifeline.store.port import Store
from lifeline.store.shallow import boundary_size
from lifeline.store.tiers import SqlLine
from lifeline_mesh.notary.port import Notary
from lifeline_mesh.notary.storage import NotaryStore

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore

__all__ = ["Layout", "PgSnapshotReads", "SnapshotReads", "SqliteSnapshotReads"]

# (entry ids parents first, the boundary: absent parents -> height, statements to send)
Layout = tuple[list[str], dict[str, int], list[bytes]]
_VARS = 500


class SnapshotReads(Protocol):
    """One line's reads for a snapshot."""

    @property
    def store(self) -> Store: ...

    async def shallow(self) -> bool:
        """Whether the line lacks older history (then it serves no snapshot)."""
        ...

    async def count(self) -> int:
        """How many entries the line holds (the head says it): its kept totals, no scan."""
        ...

    async def version(self) -> Hashable:
        """A value that moves whenever the entries, signatures or statements change."""
        ...

    async def layout(self, wanted: Sequence[str]) -> Layout:
        """``wanted`` parents first, the heights of the parents they name and the line does
        not send, and the statements that witness them."""
        ...

    async def author_ids(self, ordered: Sequence[str]) -> list[bytes]:
        """The ids of the author signatures of ``ordered``."""
        ...

    def notary(self) -> Notary:
        """The line's author signatures, as a session's set reads them."""
        ...


def _order(rows: Sequence[tuple[str, int, list[str]]]) -> tuple[list[str], list[str]]:
    """The ids parents first (height, then id), and the parents named but not among them."""
    ordered = sorted(rows, key=lambda r: (r[1], r[0]))
    held = {r[0] for r in ordered}
    named = sorted({p for _i, _h, ps in ordered for p in ps} - held)
    return [r[0] for r in ordered], named


# -- a line file -----------------------------------------------------------------------


def _rows(conn: sqlite3.Connection, ids: Sequence[str]) -> list[tuple[str, int, list[str]]]:
    out: list[tuple[str, int, list[str]]] = []
    for start in range(0, len(ids), _VARS):
        part = list(ids[start : start + _VARS])
        marks = ",".join("?" * len(part))
        sql = f"SELECT id, height, parents FROM entries WHERE id IN ({marks})"
        out += [(i, int(h), json.loads(p)) for i, h, p in conn.execute(sql, part)]
    return out


def _latest_states(conn: sqlite3.Connection) -> list[bytes]:
    """The newest state statement of each node (every part of it): one scan, grouped."""
    newest = conn.execute(
        "SELECT node_id, max(ts) FROM statements WHERE role = 'state' GROUP BY node_id"
    ).fetchall()
    out: list[bytes] = []
    for node_id, ts in sorted(newest):
        rows = conn.execute(
            "SELECT item FROM statements WHERE role = 'state' AND node_id = ? AND ts = ?"
            " ORDER BY id",
            (node_id, ts),
        )
        out += [bytes(r[0]) for r in rows]
    return out


def _imported(conn: sqlite3.Connection, ids: Sequence[str]) -> list[bytes]:
    """The `imported` statements of ``ids`` (custody of entries written unsigned)."""
    wanted = set(ids)
    out: list[bytes] = []
    for start in range(0, len(ids), _VARS):
        part = sorted({i[:16] for i in ids[start : start + _VARS]})
        marks = ",".join("?" * len(part))
        sql = (
            "SELECT subject, item FROM statements WHERE role = 'imported'"
            f" AND substr(subject, 1, 16) IN ({marks})"
        )
        out += [bytes(item) for subject, item in conn.execute(sql, part) if subject in wanted]
    return out


class SqliteSnapshotReads:
    """A line file's reads: its SQLite connection, with the notary's tables."""

    def __init__(self, store: SqlLine) -> None:
        self.sql = store  # a line file, opened with the notary's tables (NodeLine.sql_tables)

    @property
    def store(self) -> Store:
        return self.sql

    async def shallow(self) -> bool:
        return bool(await self.sql.run_read(boundary_size))

    async def count(self) -> int:
        return (await self.sql.entry_totals()).count  # count(*) scans: 0.3-0.5 s at 1M

    async def version(self) -> Hashable:
        content = await self.sql.run_read(lambda c: tuple(c.execute(content_sql(c)).fetchone()))
        notary = NotaryStore(self.sql)
        return content, await notary.totals(), await notary.statements().totals()

    async def layout(self, wanted: Sequence[str]) -> Layout:
        def read(conn: sqlite3.Connection) -> Layout:
            order, named = _order(_rows(conn, wanted))
            heights = {i: h for i, h, _p in _rows(conn, named)}
            return order, heights, _latest_states(conn) + _imported(conn, order)

        return await self.sql.run_read(read)

    async def author_ids(self, ordered: Sequence[str]) -> list[bytes]:
        return await NotaryStore(self.sql).author_ids(ordered)

    def notary(self) -> Notary:
        return NotaryStore(self.sql)


# -- a hub's line ----------------------------------------------------------------------


class PgSnapshotReads:
    """A hub line's reads: its partition of ``entries`` and the notary's twin tables, in
    one repeatable-read view (every process of the database writes them)."""

    def __init__(self, store: PgStore) -> None:
        self.pg = store

    @property
    def store(self) -> Store:
        return self.pg

    async def shallow(self) -> bool:
        return False  # a hub's lines are filled by sessions and pushes: never shallow

    async def count(self) -> int:
        return await self.pg.count()  # the line's `lines` row

    async def version(self) -> Hashable:
        notary = self.notary()
        return (
            await self.pg.change_token(),
            await notary.totals(),
            await notary.statements().totals(),
        )

    async def layout(self, wanted: Sequence[str]) -> Layout:
        line = self.pg.line_id
        async with self.pg.read_view() as conn:
            found = await conn.fetch(
                "SELECT id, height, doc FROM entries WHERE line_id = $1 AND id = ANY($2::bytea[])",
                line,
                [bytes.fromhex(i) for i in wanted],
            )
            rows = [(bytes(i).hex(), int(h), json.loads(d)["parents"]) for i, h, d in found]
            order, named = _order(rows)
            absent = await conn.fetch(
                "SELECT id, height FROM entries WHERE line_id = $1 AND id = ANY($2::bytea[])",
                line,
                [bytes.fromhex(i) for i in named],
            )
            states = await conn.fetch(
                "SELECT item FROM statements s WHERE line_id = $1 AND role = 'state' AND ts ="
                " (SELECT max(ts) FROM statements m WHERE m.line_id = $1 AND m.role = 'state'"
                " AND m.node_id = s.node_id) ORDER BY node_id, id",
                line,
            )
            imported = await conn.fetch(
                "SELECT item FROM statements WHERE line_id = $1 AND role = 'imported'"
                " AND subject = ANY($2::text[]) ORDER BY id",
                line,
                order,
            )
        heights = {bytes(i).hex(): int(h) for i, h in absent}
        return order, heights, [bytes(r[0]) for r in [*states, *imported]]

    async def author_ids(self, ordered: Sequence[str]) -> list[bytes]:
        position = {e: n for n, e in enumerate(ordered)}
        rows = await self.pg.fetch_line(
            "SELECT subject, id FROM attestations WHERE line_id = $1 AND role = 'author'"
            " AND subject = ANY($2::text[])",
            list(ordered),
        )
        return [bytes(i) for _n, i in sorted((position[s], bytes(i)) for s, i in rows)]

    def notary(self) -> Notary:
        from lifeline_mesh.notary.pg_storage import PgNotaryStore

        return PgNotaryStore(self.pg)
