"""The ledger's audit of a large SQLite line on every core (issue 21).

The serial audit (``lifeline/audit/line.py``) decodes and hashes every row on one core. For a
line of at least :func:`parallel_min` entries, the rows are cut by ``seq`` into one range
per core, and each range is checked by a ``python -m lifeline.audit.worker`` process that
opens the file read-only (``lifeline/audit/worker.py``). This process merges what they
find, sorted by each row's stream position, so the report is the serial one, finding for
finding; cross-line parents and anchors are then resolved here as the serial audit does.

A caller's own page checks (``each_page``: the notary's forward pass) are given the
line in stream order once the workers are done: id and ts of each row read from the
stream's own index (no table lookups), the rows the workers found corrupt left out as
the serial stream leaves them. Parents are given only for the entries the workers list
as *late* (``audit_worker.LateCheck``: a parent whose time may be after the entry's, or
that was not at hand), read from the file for those; every other entry's parents are
stored no later than itself, which is all the page checks look at them for (decision 0041).

Knobs, for tests and measurement: ``LIFELINE_VERIFY_PARALLEL_MIN`` (entries from which
the workers start, default :data:`PARALLEL_MIN`) and ``LIFELINE_VERIFY_WORKERS`` (how many,
default one per usable core, at most :data:`MAX_WORKERS`).
"""

from __future__ import annotations

import asyncio
import logging
import marshal
import os
import sqlite3
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from functools import partial
from itertools import pairwise
from typing import Any, overload

from lifeline.errors import StoreError
from lifeline.store.rows import Links, parents_of
from lifeline.store.tiers import SqlLine

__all__ = [
    "MAX_WORKERS",
    "PARALLEL_MIN",
    "Merged",
    "StreamPage",
    "check_in_workers",
    "frames",
    "parallel_min",
    "workers",
]

PARALLEL_MIN = 50_000  # below this, starting processes costs more than a second core saves
MAX_WORKERS = 8
PAGE = 2_000  # entries given to ``each_page`` at a time, as the serial stream gives them
LATE_MAX = 200_000  # late entries remembered; past it every entry's parents are read
_MIN_ENV = "LIFELINE_VERIFY_PARALLEL_MIN"
_WORKERS_ENV = "LIFELINE_VERIFY_WORKERS"

log = logging.getLogger(__name__)

Position = tuple[Any, Any, Any]  # (height, ts, id) as stored


class StreamPage(Sequence[Links]):
    """A page of the stream given to ``each_page`` after the workers: ids and times in
    stream order, the parents of the late entries (by index; none for the others). Read
    as :class:`Links`, or by its lists (the notary's pass over a run of unsigned entries)."""

    __slots__ = ("ids", "linked", "times")

    def __init__(
        self, ids: list[str], times: list[str], linked: dict[int, tuple[str, ...]]
    ) -> None:
        self.ids, self.times, self.linked = ids, times, linked

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> Links: ...
    @overload
    def __getitem__(self, index: slice) -> list[Links]: ...
    def __getitem__(self, index: int | slice) -> Links | list[Links]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self.ids))[index]]
        if index < 0:
            index += len(self.ids)
        return Links(self.ids[index], self.times[index], self.linked.get(index, ()))

    def __iter__(self) -> Iterator[Links]:
        linked = self.linked
        for i, (eid, ts) in enumerate(zip(self.ids, self.times, strict=True)):
            yield Links(eid, ts, linked.get(i, ()))


Page = tuple[StreamPage, Position | None]  # entries, and where the page ended


def parallel_min(env: str = _MIN_ENV) -> int:
    """Entries from which the workers start: the variable ``env``, else the default."""
    text = os.environ.get(env, "").strip()
    return int(text) if text.isdigit() else PARALLEL_MIN


def workers(env: str = _WORKERS_ENV) -> int:
    """How many workers: the variable ``env``, else one per usable core (at most 8)."""
    text = os.environ.get(env, "").strip()
    if text.isdigit() and int(text) > 0:
        return min(int(text), MAX_WORKERS)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


class Merged:
    """What the workers found, in the serial audit's order."""

    def __init__(self) -> None:
        self.entries = 0
        self.ids: list[tuple[Position, str, str, str]] = []  # (pos, check, entry id, detail)
        self.rows: list[tuple[Position, str, str]] = []  # (pos, entry id, detail)
        self.parents: list[tuple[Position, str, str]] = []  # (pos, entry id, parent)
        self.late: set[str] | None = set()  # None: too many, treat every entry as late
        self.truth: list[tuple[Any, ...]] = []  # each range's truth check (RowCheck.result)

    def add(self, records: list[tuple[Any, ...]], advance: Callable[[int], None]) -> None:
        for record in records:
            kind = record[0]
            if kind == "n":
                advance(record[1])
            elif kind == "id":
                self.ids.append(record[1:])
            elif kind == "row":
                self.rows.append(record[1:])
            elif kind == "parent":
                self.parents.append(record[1:])
            elif kind == "late":
                if self.late is not None:
                    self.late.update(record[1])
                    if len(self.late) > LATE_MAX:
                        self.late = None
            elif kind == "truth":
                self.truth.append(record[1])
            elif kind == "end":
                self.entries += record[1]

    def sort(self) -> None:
        """Each list in stream order (``sorted`` is stable: an entry's parents keep theirs)."""
        for found in (self.ids, self.rows, self.parents):
            found.sort(key=lambda item: _order(item[0]))


def _order(position: Position) -> tuple[Any, ...]:
    """The key that sorts stream positions as SQLite's index on (height, ts, id) does:
    NULL, then numbers, then text (by code point, as UTF-8 bytes compare), then blobs."""
    out: list[Any] = []
    for value in position:
        if value is None:
            out += (0, 0)
        elif isinstance(value, int | float):
            out += (1, value)
        elif isinstance(value, str):
            out += (2, value)
        else:
            out += (3, bytes(value))
    return tuple(out)


async def check_in_workers(
    store: SqlLine,
    count: int,
    *,
    advance: Callable[[int], None],
    each_page: Callable[[Sequence[Links]], Awaitable[None]] | None,
    truth_mark: int | None = None,
) -> Merged:
    """Check every row of ``store`` in ``count`` worker processes; ``each_page`` is then
    given the line in stream order (:class:`StreamPage`). With ``truth_mark``, the rows up
    to it are checked against the truth tables too (``Merged.truth``)."""
    lo, hi = await store.run_read(
        lambda conn: conn.execute(
            "SELECT coalesce(min(seq), 1) - 1, max(seq) FROM entries"
        ).fetchone()
    )
    merged = Merged()
    if hi is None:
        return merged
    cuts = [lo + (hi - lo) * k // count for k in range(count + 1)]
    log.debug("checking rows %d..%d of %s in %d worker processes", lo + 1, hi, store.path, count)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs: list[asyncio.subprocess.Process] = []
    try:
        for start, end in pairwise(cuts):
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "lifeline.audit.worker", str(store.path),
                    str(start), str(end), *(["late"] if each_page is not None else []),
                    *([f"truth={truth_mark}"] if truth_mark is not None else []),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=env,
                )
            )  # fmt: skip
        readers = [asyncio.ensure_future(_read(p, store, merged, advance)) for p in procs]
        try:
            await asyncio.gather(*readers)
        finally:
            for reader in readers:
                reader.cancel()
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    merged.sort()
    if each_page is not None:
        await _each_page(store, hi, merged, each_page)
    return merged


async def _each_page(
    store: SqlLine,
    hi: int,
    merged: Merged,
    each_page: Callable[[Sequence[Links]], Awaitable[None]],
) -> None:
    """The line in stream order to ``each_page``, a page at a time (the next page read on
    the store's thread meanwhile)."""
    read = partial(_stream_page, hi=hi, corrupt={pos for pos, _e, _d in merged.rows},
                   late=merged.late)  # fmt: skip
    pending: asyncio.Future[Page] | None = asyncio.ensure_future(
        store.run_read(partial(read, after=None))
    )
    try:
        while pending is not None:
            entries, after = await pending
            pending = None
            if after is not None:
                pending = asyncio.ensure_future(store.run_read(partial(read, after=after)))
            if entries:
                await each_page(entries)
    finally:
        if pending is not None:
            pending.cancel()


def _stream_page(
    conn: sqlite3.Connection,
    after: Position | None,
    hi: int,
    corrupt: set[Position],
    late: set[str] | None,
) -> Page:
    """The decodable entries of the next :data:`PAGE` rows (seq ≤ ``hi``) after ``after``
    in stream order, and where the page ended (None at the end). Only the entries in
    ``late`` (all when None) carry their parents."""
    sql = "SELECT height, ts, id FROM entries WHERE seq <= ?"
    params: tuple[Any, ...] = (hi,)
    if after is not None:
        sql += " AND (height, ts, id) > (?, ?, ?)"
        params += after
    sql += f" ORDER BY height, ts, id LIMIT {PAGE}"
    rows = conn.execute(sql, params).fetchall()
    end = rows[-1] if len(rows) == PAGE else None
    if corrupt:
        rows = [r for r in rows if r not in corrupt]
    ids: list[str] = [r[2] for r in rows]
    marked = range(len(ids)) if late is None else [i for i, e in enumerate(ids) if e in late]
    linked: dict[int, tuple[str, ...]] = {}
    if marked:
        found = dict(_parents_of_ids(conn, [ids[i] for i in marked]))
        linked = {i: _parents(found.get(ids[i], "[]")) for i in marked}
    return StreamPage(ids, [r[1] for r in rows], linked), end


def _parents(column: Any) -> tuple[str, ...]:
    """A decoded row's parents (a row changed since its worker read it: none)."""
    try:
        return parents_of(column)
    except (ValueError, TypeError):
        return ()


def _parents_of_ids(conn: sqlite3.Connection, ids: list[str]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        out += conn.execute(f"SELECT id, parents FROM entries WHERE id IN ({marks})", chunk)
    return out


async def frames(stdout: asyncio.StreamReader) -> AsyncIterator[Any]:
    """A worker's frames (a 4-byte big-endian length, then ``marshal``'d data) until its
    output ends; the render's workers write the same frames."""
    while True:
        try:
            head = await stdout.readexactly(4)
            yield marshal.loads(await stdout.readexactly(int.from_bytes(head, "big")))
        except asyncio.IncompleteReadError:
            return


async def _read(
    proc: asyncio.subprocess.Process,
    store: SqlLine,
    merged: Merged,
    advance: Callable[[int], None],
) -> None:
    assert proc.stdout is not None and proc.stderr is not None
    error = ""
    async for records in frames(proc.stdout):
        if records and records[0][0] == "error":
            error = records[0][1]
            break
        merged.add(records, advance)
    stderr = (await proc.stderr.read()).decode(errors="replace").strip()
    code = await proc.wait()
    if error:  # the words the store's own read would have raised
        raise StoreError(f"SQLite error on {store.path}: {error}")
    if code != 0:
        last = stderr.splitlines()[-1] if stderr else f"exit status {code}"
        raise StoreError(f"checking {store.path.name} in a worker process failed: {last}")
