"""The newest entries of a line, read from its end (``lifeline history --limit N``).

The same entries as the last ``N`` of :meth:`~lifeline.store.port.Store.stream` (stream
order: height, ts, id), without reading the line from its start: a line file and a hub line
walk their order index backwards, so the cost is that of ``N`` rows, not of the line (at a
million entries, 4.7 s on a laptop before). Any other store (memory) keeps the last ``N`` of
its stream. Damaged rows are skipped and reported as the stream reports them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.store.backend import on_backend
from lifeline.store.port import RowProblem, Store
from lifeline.store.rows import decode_row
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_reads import COLUMNS

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore

__all__ = ["newest"]


async def newest(
    store: Store, limit: int, kind: str | None = None, problems: list[RowProblem] | None = None
) -> list[Entry]:
    """The last ``limit`` entries of the line in stream order (of ``kind`` only, when
    given), oldest first; undecodable rows are added to ``problems``."""
    if limit <= 0:
        return []
    return await on_backend(store, _Newest(limit, kind, [] if problems is None else problems))


Key = tuple[Any, Any, Any]  # (height, ts, id) of a row, as the backend holds them
PAGE = 2_000  # rows a read: a large N is read in pages, as the stream reads the line


class _Damaged(Exception):
    def __init__(self, problem: RowProblem) -> None:
        super().__init__(problem.reason)
        self.problem = problem


class _Newest:
    def __init__(self, limit: int, kind: str | None, problems: list[RowProblem]) -> None:
        self.limit, self.kind, self.problems = limit, kind, problems

    def sqlite(self, store: SqliteStore) -> Awaitable[list[Entry]]:
        return self._file(store)

    def postgres(self, store: PgStore) -> Awaitable[list[Entry]]:
        return self._hub(store)

    def plain(self, store: Store) -> Awaitable[list[Entry]]:
        return self._streamed(store)

    async def _file(self, store: SqliteStore) -> list[Entry]:
        kind = " AND kind = ?" if self.kind is not None else ""

        def read(before: Key | None, limit: int) -> Awaitable[list[tuple[Any, ...]]]:
            where = "(height, ts, id) < (?, ?, ?)" if before is not None else "1"
            args = (*(before or ()), *([self.kind] if self.kind is not None else []), limit)
            return store.run_read(
                lambda conn: conn.execute(
                    f"SELECT height, ts, id, {COLUMNS} FROM entries WHERE {where}{kind}"
                    " ORDER BY height DESC, ts DESC, id DESC LIMIT ?",
                    args,
                ).fetchall()
            )

        def entry(row: tuple[Any, ...]) -> Entry:
            try:
                return decode_row(row[3:])
            except (ValueError, TypeError) as exc:
                raise _Damaged(RowProblem(int(row[3]), str(row[4])[:64], str(exc))) from exc

        return await self._from_the_end(read, entry)

    async def _hub(self, store: PgStore) -> list[Entry]:
        async def read(before: Key | None, limit: int) -> list[tuple[Any, ...]]:
            args: list[Any] = [limit]
            where = ""
            if before is not None:
                args += before
                where += " AND (height, ts, id) < ($3, $4, $5)"
            if self.kind is not None:
                args.append(self.kind)
                where += f" AND doc::json->>'kind' = ${len(args) + 1}"
            rows = await store.fetch_line(
                f"SELECT height, ts, id, seq, doc FROM entries WHERE line_id = $1{where}"
                " ORDER BY height DESC, ts DESC, id DESC LIMIT $2",
                *args,
            )
            return [tuple(r) for r in rows]

        def entry(row: tuple[Any, ...]) -> Entry:
            try:
                return Entry.from_json(row[4], check=False)
            except InvalidEntry as exc:
                raise _Damaged(RowProblem(int(row[3]), bytes(row[2]).hex(), str(exc))) from exc

        return await self._from_the_end(read, entry)

    async def _from_the_end(
        self,
        read: Callable[[Key | None, int], Awaitable[list[tuple[Any, ...]]]],
        entry: Callable[[tuple[Any, ...]], Entry],
    ) -> list[Entry]:
        """Pages from the line's end until ``limit`` entries decode (a damaged row is
        skipped, as the stream skips it) or the line is read."""
        out: list[Entry] = []
        damage: list[RowProblem] = []
        before: Key | None = None
        while len(out) < self.limit:
            wanted = min(self.limit - len(out), PAGE)
            rows = await read(before, wanted)
            for row in rows:
                try:
                    out.append(entry(row))
                except _Damaged as damaged:
                    damage.append(damaged.problem)
            if len(rows) < wanted:
                break
            before = (rows[-1][0], rows[-1][1], rows[-1][2])
        self.problems.extend(reversed(damage))  # in stream order, as the stream reports
        out.reverse()
        return out

    async def _streamed(self, store: Store) -> list[Entry]:
        last: deque[Entry] = deque(maxlen=self.limit)
        async for entry in store.stream(problems=self.problems):
            if self.kind is None or entry.kind == self.kind:
                last.append(entry)
        return list(last)
