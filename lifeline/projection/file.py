"""A line's projection file (``LIFELINE.md``): streamed whole, or extended in place.

A full render writes the header, then one block per entry as pages of rows come from the
store in stream order, into a temporary file renamed over the old one (a reader never sees
half a file): memory does not grow with the line. Beside the line,
``.lifeline/<line>.projection.json`` records what was written: the file's size and sha256,
the highest row number rendered, the line's whole-set totals (count and sum of entry
tokens, which cover every id and ts: :mod:`lifeline.store.summary`), the stream key of the
last block and a digest of the cross-line parents.

The next render only appends the blocks of the rows added since, when all of these hold:

- the file is byte for byte what was written (size, then sha256 of its bytes), and is a
  file, not a link (a committed link would lead the append to the file it names, which a
  forged record can describe; a whole render replaces the link);
- the rendered rows are unchanged: the totals now, minus the tokens of the new rows, equal
  the recorded ones (a merge that lowered a stored ts, or a rebuilt line, fails this);
- every new row sorts after the last rendered one in stream order ``(height, ts, id)``,
  so the full render would put their blocks at the end too;
- the cross-line parents (written in the header) are the same.

Otherwise it renders the whole file again; a line of at least
:func:`lifeline.projection.parallel.parallel_min` entries on more than one core is rendered
whole by worker processes, one range of the stream each (``lifeline/projection/parallel.py``),
into the same bytes. Appending writes the new blocks, fsyncs, then
replaces the record; a crash in between leaves a record that no longer matches the file, so
the next render is a full one. Either way the file equals
:func:`lifeline.projection.markdown.render` of the whole line (tested).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

from lifeline.errors import StoreError
from lifeline.fsutil import atomic_file, write_atomic
from lifeline.home import Home
from lifeline.projection import parallel as render_parallel
from lifeline.projection.markdown import block_of, header
from lifeline.store.port import RowProblem
from lifeline.store.rows import Fields, decode_fields, last_key
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_reads import COLUMNS
from lifeline.store.summary import ENTRIES_SET, entry_token, read_totals

__all__ = ["RenderResult", "write_projection"]

STATE_VERSION = 1
PAGE_ROWS = 2_000
# Beyond this many new rows, a full render costs about as much as checking them first.
APPEND_MAX_NEW = 200_000
_MOD = 1 << 256

Key = tuple[int, str, str]  # (height, ts, id): the stream order


@dataclass(slots=True)
class RenderResult:
    """What a render did: ``appended`` blocks onto the previous file, or a ``full`` one."""

    path: Path
    mode: str  # "full" | "appended" | "unchanged"
    entries: int  # blocks written by this render
    reason: str = ""  # why a full render was needed ("" for the first render)


@dataclass(slots=True)
class _State:
    version: int
    line: str
    size: int
    sha256: str
    seq: int
    count: int
    total: str  # hex
    last: list[Any] | None  # [height, ts, id] of the last block, None when empty
    externals: str

    def to_json(self) -> bytes:
        return (json.dumps(asdict(self), sort_keys=True) + "\n").encode("utf-8")


def _externals_digest(externals: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(externals.items())).encode("utf-8")).hexdigest()


class _ReadTx:
    """One read transaction on the store's worker thread: the totals, the highest row number
    and the rows rendered all come from the same state of the line, whatever writes land
    meanwhile (WAL readers see a snapshot)."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self._cursor: sqlite3.Cursor | None = None

    async def begin(self) -> tuple[tuple[int, int, int] | None, dict[str, str]]:
        """(highest row number, count, total) or None when the totals row is stale, and
        the declared cross-line parents."""

        def begin(conn: sqlite3.Connection) -> tuple[tuple[int, int, int] | None, dict[str, str]]:
            conn.execute("BEGIN")
            totals = read_totals(conn, ENTRIES_SET, "entries")
            top = conn.execute("SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0]
            externals = dict(conn.execute("SELECT id, line FROM externals").fetchall())
            snap = None if totals is None else (int(top), totals.count, totals.total)
            return snap, externals

        return await self.store.run_read(begin)

    async def end(self) -> None:
        def end(conn: sqlite3.Connection) -> None:
            if self._cursor is not None:
                self._cursor.close()
                self._cursor = None
            if conn.in_transaction:
                conn.execute("COMMIT")

        await self.store.run_read(end)

    async def pages(
        self,
        seq_from: int,
        seq_to: int,
        after: Key | None,
        problems: list[RowProblem],
        last: list[Key],
    ) -> AsyncIterator[list[Fields]]:
        """Pages of checked rows with ``seq_from < seq <= seq_to`` in stream order after
        ``after``, the next page fetched while this one is rendered; ``last[0]`` follows
        the key of the last row read. Damaged rows go to ``problems``."""
        sql = f"SELECT height, {COLUMNS} FROM entries WHERE +seq > ? AND +seq <= ?"
        params: tuple[Any, ...] = (seq_from, seq_to)
        if after is not None:
            sql += " AND (height, ts, id) > (?, ?, ?)"
            params += after
        sql += " ORDER BY height, ts, id"

        def start(conn: sqlite3.Connection) -> None:
            self._cursor = conn.execute(sql, params)

        def fetch(_conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            assert self._cursor is not None
            return self._cursor.fetchmany(PAGE_ROWS)

        await self.store.run_read(start)
        pending = asyncio.ensure_future(self.store.run_read(fetch))
        try:
            while rows := await pending:
                pending = asyncio.ensure_future(self.store.run_read(fetch))
                page: list[Fields] = []
                for row in rows:
                    try:
                        page.append(decode_fields(row[1:]))
                    except (ValueError, TypeError) as exc:
                        problems.append(RowProblem(int(row[1]), str(row[2])[:64], str(exc)))
                yield page
                key = last_key(rows)
                if key is not None:
                    last[:] = [key]
        finally:
            if not pending.done():
                await asyncio.wait([pending])


def _read_state(path: Path, line: str) -> _State | None:
    try:
        data = json.loads(path.read_bytes())
        state = _State(**data)
    except (OSError, ValueError, TypeError):
        return None
    if state.version != STATE_VERSION or state.line != line:
        return None
    ints = (state.size, state.seq, state.count)
    texts = (state.sha256, state.total, state.externals)
    last_ok = state.last is None or (
        isinstance(state.last, list)
        and len(state.last) == 3
        and isinstance(state.last[0], int)
        and all(isinstance(v, str) for v in state.last[1:])
    )
    if not (all(type(v) is int for v in ints) and all(type(v) is str for v in texts) and last_ok):
        return None  # edited by hand or damaged: render whole
    try:
        int(state.total, 16)
    except ValueError:
        return None
    return state


def _file_digest(path: Path, size: int) -> Any | None:
    """A sha256 object over the file's bytes when it is ``size`` bytes long, else None."""
    try:
        with path.open("rb") as fh:
            if os.fstat(fh.fileno()).st_size != size:
                return None
            return hashlib.file_digest(fh, "sha256")
    except OSError:
        return None


def _new_rows(conn: sqlite3.Connection, seq: int, top: int) -> list[tuple[int, str, str]]:
    return conn.execute(
        "SELECT height, ts, id FROM entries WHERE seq > ? AND seq <= ?", (seq, top)
    ).fetchall()


def _why_not_append(
    state: _State, snap: tuple[int, int, int], new: list[tuple[int, str, str]], ext: str
) -> str:
    _top, count, total = snap
    if ext != state.externals:
        return "the cross-line parents changed"
    added = 0
    for height, ts, eid in new:
        if state.last is not None and (height, ts, eid) <= tuple(state.last):
            return f"entry {str(eid)[:12]} sorts before the end of the file"
        try:
            added += entry_token(eid, ts)
        except (ValueError, TypeError, UnicodeEncodeError):
            return f"row of {str(eid)[:12]} is damaged"
    if count - len(new) != state.count or (total - added) % _MOD != int(state.total, 16):
        return "rendered entries changed (a merged earlier ts, or a rebuilt line)"
    return ""


class _Sink:
    """Writes text to a binary file, hashing it; ``advance`` counts blocks."""

    def __init__(self, fh: BinaryIO, digest: Any, advance: Callable[[int], None]) -> None:
        self.fh, self.digest, self.advance = fh, digest, advance
        self.size = 0
        self.blocks = 0

    def write(self, text: str, blocks: int = 0) -> None:
        self.write_bytes(text.encode("utf-8"), blocks)

    def write_bytes(self, data: bytes, blocks: int = 0) -> None:
        self.fh.write(data)
        self.digest.update(data)
        self.size += len(data)
        if blocks:
            self.blocks += blocks
            self.advance(blocks)

    async def pages(self, pages: AsyncIterator[list[Fields]]) -> None:
        async for page in pages:
            self.write("".join([block_of(*fields) for fields in page]), len(page))


def _record(store_path: Path, state: _State | None) -> None:
    """Keep (or, with None, drop) the record of the last render. Where ``.lifeline/``
    cannot be written, the render still stands: an old record only matches a file that is
    still the render it describes, and the next render is whole otherwise."""
    path = Home.render_record_path(store_path)
    try:
        if state is None:
            path.unlink(missing_ok=True)
        else:
            write_atomic(path, state.to_json())
    except OSError:  # e.g. a read-only .lifeline/
        return


async def write_projection(
    store: SqliteStore,
    line: str,
    path: Path,
    problems: list[RowProblem],
    advance: Callable[[int], None] = lambda _n: None,
    *,
    full: bool = False,
) -> RenderResult:
    """Bring ``path`` up to date with the line: append the new blocks when the file is the
    last render's (see the module's docstring), else write it whole. ``advance(n)`` is told
    of each ``n`` blocks written; undecodable rows are left out and put in ``problems``."""
    with contextlib.suppress(StoreError):  # a read-only line: rendered whole, no record
        await store.entry_totals()  # computes and keeps the totals row if it is absent
    tx = _ReadTx(store)
    try:
        snap, externals = await tx.begin()
        ext = _externals_digest(externals)
        state = None if full else _read_state(Home.render_record_path(store.path), line)
        reason = "" if state is None else "the file is not the last render's"
        if path.is_symlink():  # a link (a clone carries them) is replaced, never extended
            reason = "the file is a symbolic link"
        elif state is not None and snap is not None:
            digest = _file_digest(path, state.size)
            if digest is not None and digest.hexdigest() == state.sha256:
                new = await store.run_read(partial(_new_rows, seq=state.seq, top=snap[0]))
                reason = (
                    "too many new entries"
                    if len(new) > APPEND_MAX_NEW
                    else _why_not_append(state, snap, new, ext)
                )
                if not reason:
                    return await _append(tx, line, path, state, snap, digest, problems, advance)
        return await _full(tx, line, path, snap, externals, ext, problems, advance, reason)
    finally:
        await tx.end()


async def _append(
    tx: _ReadTx,
    line: str,
    path: Path,
    state: _State,
    snap: tuple[int, int, int],
    digest: Any,
    problems: list[RowProblem],
    advance: Callable[[int], None],
) -> RenderResult:
    top, count, total = snap
    last: list[Key] = []
    if state.last:
        last.append((int(state.last[0]), str(state.last[1]), str(state.last[2])))
    after = last[0] if last else None
    blocks = 0
    if top != state.seq:
        with path.open("ab") as fh:
            sink = _Sink(fh, digest, advance)
            sink.size = state.size
            await sink.pages(tx.pages(state.seq, top, after, problems, last))
            fh.flush()
            os.fsync(fh.fileno())
        blocks = sink.blocks
        new_state = _State(
            STATE_VERSION,
            line,
            sink.size,
            digest.hexdigest(),
            top,
            count,
            f"{total:x}",
            list(last[0]) if last else None,
            state.externals,
        )
        _record(tx.store.path, new_state)
    return RenderResult(path, "appended" if top != state.seq else "unchanged", blocks)


async def _full(
    tx: _ReadTx,
    line: str,
    path: Path,
    snap: tuple[int, int, int] | None,
    externals: dict[str, str],
    ext: str,
    problems: list[RowProblem],
    advance: Callable[[int], None],
    reason: str,
) -> RenderResult:
    top = snap[0] if snap is not None else 1 << 62
    last: list[Key] = []
    with atomic_file(path) as fh:
        sink = _Sink(fh, hashlib.sha256(), advance)
        sink.write(header(line, externals))
        rendered = None
        count = render_parallel.workers()
        if snap is not None and count > 1 and snap[1] >= render_parallel.parallel_min():
            rendered = await render_parallel.render_in_workers(
                tx.store, snap, count, sink.write_bytes, problems, advance, path.parent
            )
        if rendered is None:
            await sink.pages(tx.pages(-1, top, None, problems, last))
        else:
            sink.blocks = rendered.blocks
            last[:] = [rendered.last] if rendered.last is not None else []
    if snap is None:  # no up-to-date totals to record: the next render is a full one
        _record(tx.store.path, None)
    else:
        state = _State(
            STATE_VERSION,
            line,
            sink.size,
            sink.digest.hexdigest(),
            top,
            snap[1],
            f"{snap[2]:x}",
            list(last[0]) if last else None,
            ext,
        )
        _record(tx.store.path, state)
    return RenderResult(path, "full", sink.blocks, reason)
