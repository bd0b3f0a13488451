"""The ledger's audit of a large SQLite line on every core (issue 21).

The serial audit (``lifeline/audit.py``) decodes and hashes every row on one core. For a
line of at least :func:`parallel_min` entries, the rows are cut by ``seq`` into one range
per core, and each range is checked by a ``python -m lifeline.audit_worker`` process that
opens the file read-only (``lifeline/audit_worker.py``). This process merges what they
find, sorted by each row's stream position, so the report is the serial one, finding for
finding; cross-line parents and anchors are then resolved here as the serial audit does.

A caller's own page checks (``each_page``: the notary's forward pass) read a light stream
here meanwhile: id, ts and parents of each row in stream order, the rows that do not
decode left out as the serial stream leaves them (``lifeline/store/rows.py``, ``links_of``).

Knobs, for tests and measurement: ``LIFELINE_VERIFY_PARALLEL_MIN`` (entries from which
the workers start, default :data:`PARALLEL_MIN`) and ``LIFELINE_VERIFY_WORKERS`` (how many,
default one per usable core, at most :data:`MAX_WORKERS`).
"""

from __future__ import annotations

import asyncio
import logging
import marshal
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from itertools import pairwise
from typing import Any

from lifeline.errors import StoreError
from lifeline.store.rows import Links, links_of
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_reads import link_pages

__all__ = ["MAX_WORKERS", "PARALLEL_MIN", "Merged", "check_in_workers", "parallel_min", "workers"]

PARALLEL_MIN = 50_000  # below this, starting processes costs more than a second core saves
MAX_WORKERS = 8
_MIN_ENV = "LIFELINE_VERIFY_PARALLEL_MIN"
_WORKERS_ENV = "LIFELINE_VERIFY_WORKERS"

log = logging.getLogger(__name__)

Position = tuple[Any, Any, Any]  # (height, ts, id) as stored


def parallel_min() -> int:
    text = os.environ.get(_MIN_ENV, "").strip()
    return int(text) if text.isdigit() else PARALLEL_MIN


def workers() -> int:
    text = os.environ.get(_WORKERS_ENV, "").strip()
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
    store: SqliteStore,
    count: int,
    *,
    advance: Callable[[int], None],
    each_page: Callable[[Sequence[Links]], Awaitable[None]] | None,
) -> Merged:
    """Check every row of ``store`` in ``count`` worker processes; ``each_page`` is given
    the light stream meanwhile."""
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
                    sys.executable, "-m", "lifeline.audit_worker", str(store.path),
                    str(start), str(end),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=env,
                )
            )  # fmt: skip
        readers = [asyncio.ensure_future(_read(p, store, merged, advance)) for p in procs]
        try:
            if each_page is not None:
                async for rows in link_pages(store.run_read):
                    await each_page(links_of(rows))
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
    return merged


async def _read(
    proc: asyncio.subprocess.Process,
    store: SqliteStore,
    merged: Merged,
    advance: Callable[[int], None],
) -> None:
    assert proc.stdout is not None and proc.stderr is not None
    error = ""
    while True:
        try:
            head = await proc.stdout.readexactly(4)
            records = marshal.loads(await proc.stdout.readexactly(int.from_bytes(head, "big")))
        except asyncio.IncompleteReadError:
            break
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
