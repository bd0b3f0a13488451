"""One write transaction fed chunk by chunk: the caller builds chunk k+1 while the store's
worker thread writes chunk k.

The transaction is a single ``run_write`` call, so no other operation on the store can run
inside it and atomicity holds: either every chunk is committed or none is. The caller's
thread hands chunks over a queue; if building a chunk fails, the transaction is told to
abort and rolls back, and the caller's error is raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["pipelined"]

C = TypeVar("C")
R = TypeVar("R")

_DONE = object()
_ABORT = object()


class _Aborted(Exception):
    """The producer failed; the transaction must roll back."""


async def pipelined(
    submit_write: Callable[[Callable[[sqlite3.Connection], list[R]]], asyncio.Future[list[R]]],
    write_chunk: Callable[[sqlite3.Connection, C], R],
    chunks: Iterable[C],
) -> list[R]:
    """``write_chunk`` every chunk of ``chunks`` in one write transaction, in order.

    ``submit_write(fn)`` must hand ``fn`` to the worker at once (not when first awaited)
    and run it in one transaction that rolls back if ``fn`` raises.
    """
    handoff: queue.SimpleQueue[object] = queue.SimpleQueue()

    def consume(conn: sqlite3.Connection) -> list[R]:
        results: list[R] = []
        while (item := handoff.get()) is not _DONE:
            if item is _ABORT:
                raise _Aborted
            results.append(write_chunk(conn, item))  # type: ignore[arg-type]
        return results

    writing = submit_write(consume)
    try:
        for chunk in chunks:
            if writing.done():  # the worker failed on an earlier chunk: stop building
                break
            handoff.put(chunk)
            await asyncio.sleep(0)  # let other tasks run between chunks
    except BaseException:
        handoff.put(_ABORT)
        # rolled back; the producer's error is the one to report, not _Aborted (or the
        # worker's own earlier failure, which stopped nothing the producer did)
        with contextlib.suppress(Exception):
            await writing
        raise
    handoff.put(_DONE)
    return await writing
