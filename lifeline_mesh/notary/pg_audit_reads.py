"""The reads of a streaming audit on a hub's line: the PostgreSQL twin of
:class:`~lifeline_mesh.notary.audit_reads.SqliteAuditReads` (issue 21 on a hub root).

Each read is one page or one lookup, so that ``lifeline-mesh verify`` on a hub root holds a
bounded part of the line, as on a line file (decision 0110). Pages are keyset pages over
an index the schemas already keep: the items by ``(line_id, sort_key, id)``
(``<table>_order``), the entries backwards by ``(line_id, height, ts, id)``
(``entries_order``); lookups by subject use ``<table>_subject`` and receipts by the entries
they name the primary key of ``witnessed``. No migration was needed.

What differs from a line file, and why the findings are still the same:

* a PostgreSQL column holds only its declared type, so no row is damaged the way a SQLite
  row can be (:class:`~lifeline_mesh.notary.audit_reads.DamagedRow`): none is returned;
* subjects and receipts are matched on the whole id, where SQLite first narrows by a
  16-character key: the audit compares whole ids either way;
* an id is stored as its 32 bytes: what is held is returned as lowercase hex, the form a
  line file stores, so an id written otherwise is not held, as on a line file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence

from asyncpg import Record

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.store.pg_writes import ids_bytes
from lifeline.store.postgres import PgStore
from lifeline_mesh.notary.audit_reads import (
    ITEM_PAGE,
    REVERSE_PAGE,
    TABLES,
    Cursor,
    DamagedRow,
    ItemRow,
)
from lifeline_mesh.notary.provenance import Outcome, SourceRow, sources_found
from lifeline_mesh.notary.rules import Finding

__all__ = ["PgAuditReads"]


class PgAuditReads:
    """:class:`~lifeline_mesh.notary.audit_reads.AuditReads` of one line of a hub's
    database, through its store's pool (``PgStore.fetch_line``: ``$1`` is the line)."""

    def __init__(self, store: PgStore) -> None:
        self.store = store

    async def _page(
        self,
        select: str,
        keys: Sequence[str],
        cursor: Cursor | None,
        *,
        limit: int,
        backwards: bool = False,
    ) -> list[Record]:
        """A keyset page of ``select`` (whose WHERE is ``line_id = $1``): the rows past
        ``cursor`` (before it ``backwards``) in the order of ``keys``, ``limit`` at most."""
        sql, args = select, []
        if cursor is not None:
            assert isinstance(cursor, tuple)
            marks = ", ".join(f"${n}" for n in range(2, len(keys) + 2))
            sql += f" AND ({', '.join(keys)}) {'<' if backwards else '>'} ({marks})"
            args = [*cursor]
        order = ", ".join(f"{k} DESC" if backwards else k for k in keys)
        return await self.store.fetch_line(f"{sql} ORDER BY {order} LIMIT {limit}", *args)

    async def enrolled_items(self) -> list[bytes]:
        out: list[bytes] = []
        for table in TABLES:
            rows = await self.store.fetch_line(
                f"SELECT item FROM {table} WHERE line_id = $1 AND role = 'enrolled'"
                " ORDER BY sort_key, id"
            )
            out.extend(bytes(r[0]) for r in rows)
        return out

    async def item_page(
        self, table: str, after: Cursor | None
    ) -> tuple[list[ItemRow], list[DamagedRow], Cursor | None]:
        rows = await self._page(
            f"SELECT sort_key, id, role, subject, item FROM {table} WHERE line_id = $1",
            ("sort_key", "id"),
            after,
            limit=ITEM_PAGE,
        )
        items: list[ItemRow] = [
            (int(k), bytes(i), str(r), str(s), bytes(b)) for k, i, r, s, b in rows
        ]
        return items, [], ((items[-1][0], items[-1][1]) if items else None)

    async def items_about(
        self, table: str, role: str, subjects: Sequence[str]
    ) -> list[tuple[bytes, bytes]]:
        rows = await self.store.fetch_line(
            f"SELECT item FROM {table} WHERE line_id = $1 AND role = $2"
            " AND subject = ANY($3::text[]) ORDER BY sort_key, id",
            role,
            list(dict.fromkeys(subjects)),
        )
        return [(hashlib.sha256(bytes(r[0])).digest(), bytes(r[0])) for r in rows]

    async def held_ids(self, ids: Sequence[str]) -> set[str]:
        wanted = ids_bytes(ids)
        if not wanted:
            return set()
        rows = await self.store.fetch_line(
            "SELECT id FROM entries WHERE line_id = $1 AND id = ANY($2::bytea[])", wanted
        )
        return {bytes(r[0]).hex() for r in rows}

    async def ts_of_ids(self, ids: Sequence[str]) -> dict[str, str]:
        wanted = ids_bytes(ids)
        if not wanted:
            return {}
        rows = await self.store.fetch_line(
            "SELECT id, ts FROM entries WHERE line_id = $1 AND id = ANY($2::bytea[])", wanted
        )
        return {bytes(i).hex(): str(t) for i, t in rows}

    async def receipts_of(
        self, ids: Sequence[str], known: set[Hashable]
    ) -> tuple[list[Hashable], list[tuple[Hashable, bytes]]]:
        rows = await self.store.fetch_line(
            "SELECT DISTINCT att_id FROM witnessed WHERE line_id = $1"
            " AND entry_id = ANY($2::text[])",
            list(dict.fromkeys(ids)),
        )
        found_keys = sorted(bytes(r[0]) for r in rows)
        wanted = [k for k in found_keys if k not in known]
        items: list[tuple[Hashable, bytes]] = []
        if wanted:
            found = await self.store.fetch_line(
                "SELECT id, item FROM attestations WHERE line_id = $1"
                " AND id = ANY($2::bytea[]) ORDER BY id",
                wanted,
            )
            items = [(bytes(i), bytes(b)) for i, b in found]
        return list[Hashable](found_keys), items

    async def reverse_page(self, before: Cursor | None) -> tuple[list[Entry], Cursor | None]:
        rows = await self._page(
            "SELECT height, ts, id, doc FROM entries WHERE line_id = $1",
            ("height", "ts", "id"),
            before,
            limit=REVERSE_PAGE,
            backwards=True,
        )
        out: list[Entry] = []
        for _height, _ts, _id, doc in rows:
            try:  # as the forward stream reads a row (PgStore.stream): one it cannot is left out
                out.append(Entry.from_json(doc, check=False))
            except InvalidEntry:
                continue
        last = rows[-1] if len(rows) == REVERSE_PAGE else None
        return out, (None if last is None else (int(last[0]), str(last[1]), bytes(last[2])))

    async def source_findings(self) -> list[Finding]:
        kept = await self.store.fetch_line(
            "SELECT entry_id, ts, source, outcome, at, detail FROM entry_sources"
            " WHERE line_id = $1 AND outcome = ANY($2::text[]) ORDER BY entry_id, at, source",
            [Outcome.REFUSED.value, Outcome.REPLACED.value],
        )
        unsigned = await self.store.fetch_line(
            "SELECT source, count(*), min(entry_id), min(at) FROM entry_sources s"
            " WHERE line_id = $1 AND outcome = 'unsigned' AND NOT EXISTS (SELECT 1"
            " FROM attestations a WHERE a.line_id = s.line_id AND a.role = 'author'"
            " AND a.subject = s.entry_id) GROUP BY source ORDER BY source"
        )
        return sources_found(
            (SourceRow(e, t, s, Outcome(o), a, d) for e, t, s, o, a, d in kept),
            ((str(s), int(n), str(f), str(a)) for s, n, f, a in unsigned),
        )
