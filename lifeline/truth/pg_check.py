"""The truth tables of a hub's line as ``verify`` reads them (:class:`PgTables`, a
:class:`~lifeline.truth.audit.TruthTables`): the reads of :mod:`lifeline.truth.check` on
PostgreSQL. What is derived from the entries and how it is judged are the SQLite audit's
(:class:`~lifeline.truth.check.RowCheck`, :func:`~lifeline.truth.check.stored_of`,
:func:`~lifeline.truth.check.judge`); only the queries differ. Values are compared as the
bytes the tables hold (text as UTF-8; :mod:`lifeline.truth.pg_table`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry, LifelineError
from lifeline.truth.check import (
    ROW,
    RowCheck,
    Stored,
    TruthFinding,
    Typed,
    derived_keys,
    stored_of,
)
from lifeline.truth.pg_table import PgTruthLine, b, derive_roles, read_core, rebuild, s
from lifeline.truth.table import ROLE_OF_KIND

if TYPE_CHECKING:
    from lifeline.store.pg_schema import Conn

__all__ = ["PgTables"]

# key columns, compared columns (as check.py's _COLUMNS); integer columns by name
_KEYS = {
    "truth_items": (("id",), ("kind", "ts", "summary", "why", "thread")),
    "truth_marks": (("thread", "ts", "id"), ("cp",)),
    "truth_corrections": (("id",), ("targets",)),
    "truth_targets": (("target", "cid"), ()),
}
_PAGE = 2_000


def _value(name: str, value: Any) -> Any:
    return int(value) if name == "cp" else b(value)


def _typed(name: str, value: Any) -> Typed:
    if name == "cp":
        return ("integer", str(int(value)).encode())
    return ("text", bytes(value))


def _is_id(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


class PgTables:
    """The truth tables of one line of a hub's database."""

    read_only = False
    errors: tuple[type[BaseException], ...] = (LifelineError,)

    def __init__(self, store: PgTruthLine) -> None:
        self.store = store
        self.line = store.line_id

    async def read_stored(self) -> Stored | None:
        async with self.store.read_view() as conn:
            found = await read_core(conn, self.line)
            if found is None:
                return None
            mark, core, _ended = found
            counts = {
                t: int(
                    await conn.fetchval(f"SELECT count(*) FROM {t} WHERE line_id = $1", self.line)
                )
                for t in _KEYS
            }
            derived = await derive_roles(conn, self.line, list(core.rewords))
            cases = " ".join(
                f"WHEN '{k}'::bytea THEN '{r}'::bytea" for k, r in ROLE_OF_KIND.items()
            )
            odd = await conn.fetch(
                "SELECT id, kind, role FROM truth_items WHERE line_id = $1"
                f" AND role IS DISTINCT FROM (CASE kind {cases} ELSE ''::bytea END)",
                self.line,
            )
            held = await conn.fetch(
                "SELECT id, by FROM truth_superseded WHERE line_id = $1", self.line
            )
            ended = await conn.fetchval(
                "SELECT ended FROM truth_core WHERE line_id = $1", self.line
            )
        return stored_of(
            Stored(mark, core, counts),
            derived,
            {s(i): (s(k), bytes(r).decode("utf-8", "replace")) for i, k, r in odd},
            {s(i): s(by) for i, by in held},
            json.loads(bytes(ended)),
        )

    async def entries_after(self, mark: int) -> set[str]:
        async with self.store.read_view() as conn:
            rows = await conn.fetch(
                "SELECT id FROM entries WHERE line_id = $1 AND seq > $2", self.line, mark
            )
        return {bytes(r[0]).hex() for r in rows}

    async def flush(self, check: RowCheck) -> None:
        pending = check.take()
        if not pending:
            return
        async with self.store.read_view() as conn:
            for table, rows in pending.items():
                odd = await self._differing(conn, table, rows)
                if odd:
                    check.compare(table, rows, odd, await self._stored(conn, table, odd))

    async def _differing(
        self, conn: Conn, table: str, rows: list[tuple[Any, ...]]
    ) -> set[tuple[str, ...]]:
        """The keys of ``rows`` that ``table`` lacks or holds otherwise: the rows as
        arrays joined with the table on its primary key."""
        keys, columns = _KEYS[table]
        every = (*keys, *columns)
        arrays = ", ".join(
            f"${k + 2}::{'int' if c == 'cp' else 'bytea'}[]" for k, c in enumerate(every)
        )
        on = " AND ".join(f"t.{c} = k.{c}" for c in keys)
        differ = " OR ".join(
            [f"t.{keys[0]} IS NULL"] + [f"t.{c} IS DISTINCT FROM k.{c}" for c in columns]
        )
        sql = (
            f"SELECT {', '.join(f'k.{c}' for c in keys)} FROM unnest({arrays})"
            f" AS k({', '.join(every)}) LEFT JOIN {table} t ON t.line_id = $1 AND {on}"
            f" WHERE {differ}"
        )
        args = [[_value(c, r[i]) for r in rows] for i, c in enumerate(every)]
        found = await conn.fetch(sql, self.line, *args)
        return {tuple(s(v) for v in r) for r in found}

    async def _stored(
        self, conn: Conn, table: str, odd: set[tuple[str, ...]]
    ) -> dict[tuple[str, ...], tuple[Typed, ...]]:
        keys, columns = _KEYS[table]
        where = " AND ".join(f"{c} = ${k + 2}" for k, c in enumerate(keys))
        out: dict[tuple[str, ...], tuple[Typed, ...]] = {}
        for key in sorted(odd):
            row = await conn.fetchrow(
                f"SELECT 1{''.join(', ' + c for c in columns)} FROM {table}"
                f" WHERE line_id = $1 AND {where}",
                self.line,
                *[b(v) for v in key],
            )
            if row is not None:
                out[key] = tuple(_typed(c, row[k + 1]) for k, c in enumerate(columns))
        return out

    async def scan(self, mark: int) -> tuple[Any, ...]:
        check = RowCheck(None)
        last = 0
        while True:
            async with self.store.read_view() as conn:
                rows = await conn.fetch(
                    "SELECT seq, doc FROM entries WHERE line_id = $1 AND seq > $2"
                    f" AND seq <= $3 ORDER BY seq LIMIT {_PAGE}",
                    self.line,
                    last,
                    mark,
                )
            if not rows:
                return check.result()
            for _seq, doc in rows:
                try:
                    check.entry(Entry.from_json(doc, check=False))
                except InvalidEntry:
                    check.undecoded()
            await self.flush(check)
            last = int(rows[-1][0])

    async def extra_rows(self, table: str, mark: int) -> list[TruthFinding]:
        """The rows of ``table`` that no entry up to ``mark`` gives (see check.py's)."""
        keys, _columns = _KEYS[table]
        subject = keys.index("cid" if table == "truth_targets" else "id")
        async with self.store.read_view() as conn:
            held = [
                tuple(s(v) for v in r)
                for r in await conn.fetch(
                    f"SELECT {', '.join(keys)} FROM {table} WHERE line_id = $1", self.line
                )
            ]
            ids = sorted({k[subject] for k in held})
            docs = await conn.fetch(
                "SELECT doc FROM entries WHERE line_id = $1 AND seq <= $2"
                " AND id = ANY($3::bytea[])",
                self.line,
                mark,
                [bytes.fromhex(i) for i in ids if _is_id(i)],
            )
        given: set[tuple[str, ...]] = set()
        for (doc,) in docs:
            try:
                given |= derived_keys(table, Entry.from_json(doc, check=False))
            except InvalidEntry:
                continue
        out: list[TruthFinding] = []
        for key in held:
            if key not in given:
                where = ", ".join(f"{k} {v!r}" for k, v in zip(keys, key, strict=True))
                out.append((ROW, key[subject], f"{table} has a row ({where}) no entry gives"))
        return out

    async def rebuild(self) -> None:
        async with self.store.transaction() as conn:
            await rebuild(conn, self.line)
