"""A full render of a large SQLite line on every core (issue 21, decision 0045).

The serial render (``lifeline/projection/file.py``) decodes and renders every row on one
core. For a line of at least :func:`parallel_min` entries, the full render's stream (the
rows of its snapshot, ``seq <= top``, in the order ``height, ts, id``) is cut by position
into one contiguous range per core, and each range is rendered by a
``python -m lifeline.projection.worker`` process into a temporary file of its own (unnamed,
in the target's folder). This process writes the ranges into the target in order as they
grow, hashing as it goes, so the file, its size and sha256 are the serial render's; the
damaged rows are listed in stream order, as the serial render lists them.

Each worker first checks that its own read transaction sees the parent's rows (the totals
of ``seq <= top``); when one does not (a merge changed a stored row meanwhile), nothing
but the header has been written and the caller renders serially instead.

The rules for when and how many are verify's (:mod:`lifeline.audit.parallel`), with knobs
of their own: ``LIFELINE_RENDER_PARALLEL_MIN`` (entries from which the workers start,
default 50,000) and ``LIFELINE_RENDER_WORKERS`` (how many, default one per usable core).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from lifeline.audit import parallel as audit_parallel
from lifeline.errors import StoreError
from lifeline.store.port import RowProblem
from lifeline.store.sqlite import SqliteStore

__all__ = ["Rendered", "parallel_min", "render_in_workers", "workers"]

_MIN_ENV = "LIFELINE_RENDER_PARALLEL_MIN"
_WORKERS_ENV = "LIFELINE_RENDER_WORKERS"
_CHUNK = 1 << 20  # bytes copied from a range's file at a time

log = logging.getLogger(__name__)


def parallel_min() -> int:
    """Entries from which a full render uses workers."""
    return audit_parallel.parallel_min(_MIN_ENV)


def workers() -> int:
    """How many workers a full render uses."""
    return audit_parallel.workers(_WORKERS_ENV)


@dataclass(slots=True)
class Rendered:
    """What the workers rendered: blocks, and the stream key of the last row read."""

    blocks: int = 0
    last: tuple[int, str, str] | None = None


@dataclass(slots=True)
class _Range:
    """One worker's range as its frames tell it."""

    fd: int
    size: int = 0  # bytes written to its file so far
    blocks: int = 0
    begun: bool | None = None  # the worker's snapshot is the parent's
    ended: bool = False  # its "end" frame came
    done: bool = False  # it exited, every frame read
    last: list[Any] | None = None
    problems: list[RowProblem] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)


async def render_in_workers(
    store: SqliteStore,
    snap: tuple[int, int, int],
    count: int,
    write: Callable[[bytes], None],
    problems: list[RowProblem],
    advance: Callable[[int], None],
    scratch: Path,
) -> Rendered | None:
    """Render the rows of ``snap`` (top row number, count, total) in ``count`` workers,
    giving ``write`` the blocks in stream order; None when a worker's snapshot is not
    ``snap`` (then nothing was written). The ranges' files are made in ``scratch`` (the
    target's folder: writable, where ``.lifeline/`` may not be)."""
    cuts = [snap[1] * k // count for k in range(count)]  # stream positions
    limits = [b - a for a, b in pairwise(cuts)] + [-1]  # the last range: to the end
    log.debug("rendering %d entries of %s in %d worker processes", snap[1], store.path, count)
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(tempfile.TemporaryFile(dir=scratch)) for _ in cuts]
        done = await _run(store, snap, cuts, limits, files, problems, write, advance)
    return done


async def _run(
    store: SqliteStore,
    snap: tuple[int, int, int],
    cuts: list[int],
    limits: list[int],
    files: list[Any],
    problems: list[RowProblem],
    write: Callable[[bytes], None],
    advance: Callable[[int], None],
) -> Rendered | None:
    top, entries, total = snap
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    procs: list[asyncio.subprocess.Process] = []
    try:
        ranges = [_Range(f.fileno()) for f in files]
        for fh, offset, limit in zip(files, cuts, limits, strict=True):
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "lifeline.projection.worker", str(store.path),
                    str(fh.fileno()), str(top), str(entries), f"{total:x}", str(offset),
                    str(limit),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=env,
                    pass_fds=(fh.fileno(),),
                )
            )  # fmt: skip
        readers = [
            asyncio.ensure_future(_follow(p, r, store, advance))
            for p, r in zip(procs, ranges, strict=True)
        ]
        try:
            done = await _copy(ranges, readers, write)
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    if done is None:
        return None
    for r in ranges:
        problems.extend(r.problems)
    return done


async def _copy(
    ranges: list[_Range], readers: list[asyncio.Task[None]], write: Callable[[bytes], None]
) -> Rendered | None:
    """The ranges' bytes to ``write`` in order, as each grows; None (nothing written) when a
    worker's snapshot is not the parent's. A worker's failure is raised."""
    out = Rendered()
    for r in ranges:  # every worker's check first, so a stale one has nothing to undo
        while r.begun is None:
            await _changed(r, readers)
        if not r.begun:
            return None
    for r in ranges:
        copied = 0
        while True:
            while copied < r.size:
                data = os.pread(r.fd, min(_CHUNK, r.size - copied), copied)
                if not data:
                    raise StoreError("a render worker's file ended early")
                write(data)
                copied += len(data)
            if r.done and copied == r.size:
                break
            await _changed(r, readers)
        out.blocks += r.blocks
        if r.last is not None:
            out.last = (int(r.last[0]), str(r.last[1]), str(r.last[2]))
    for reader in readers:
        await reader  # exit statuses, errors
    return out


async def _changed(r: _Range, readers: list[asyncio.Task[None]]) -> None:
    """Wait for ``r``'s next frame; a failed worker's error is raised meanwhile."""
    waiter: asyncio.Future[Any] = asyncio.ensure_future(r.changed.wait())
    running: list[asyncio.Future[Any]] = [reader for reader in readers if not reader.done()]
    try:
        await asyncio.wait([waiter, *running], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    r.changed.clear()
    for reader in readers:
        if reader.done() and reader.exception() is not None:
            reader.result()  # raises it


async def _follow(
    proc: asyncio.subprocess.Process,
    r: _Range,
    store: SqliteStore,
    advance: Callable[[int], None],
) -> None:
    """Read one worker's frames into ``r`` until it exits; its failure is raised."""
    assert proc.stdout is not None and proc.stderr is not None
    error = ""
    async for record in audit_parallel.frames(proc.stdout):
        kind = record[0]
        if kind == "n":
            advance(record[1])
            r.blocks += record[1]
            r.size = record[2]
            r.problems.extend(RowProblem(*p) for p in record[3])
        elif kind == "begin":
            r.begun = bool(record[1])
        elif kind == "end":
            r.last, r.ended = record[1], True
        elif kind == "error":
            error = record[1]
        r.changed.set()
    stderr = (await proc.stderr.read()).decode(errors="replace").strip()
    code = await proc.wait()
    if error:  # the words the store's own read would have raised
        raise StoreError(f"SQLite error on {store.path}: {error}")
    if code != 0 or r.begun is None or (r.begun and not r.ended):
        last = stderr.splitlines()[-1] if stderr else f"exit status {code}"
        raise StoreError(f"rendering {store.path.name} in a worker process failed: {last}")
    r.done = True
    r.changed.set()
