"""A hub's change feed: lines written through any hub process of its database, announced
by this one.

A node on line files notices changes with ``peering.changes.LineWatcher`` (a poll of each
file). A hub's lines are in PostgreSQL, written by every hub process that shares the
database: each write notifies its line at commit and :class:`~lifeline.store.pg_notify.
LineListener` hears it here, whichever process wrote it. Each change goes to the Watch calls
of the peers connected to this process (the ``ChangeFeed``) and, when the hub itself keeps
peers, to its scheduler, as the line watcher's changes do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from lifeline.store.pg_notify import LineListener
from lifeline_mesh.peering.changes import ChangeFeed

__all__ = ["hub_feed"]


@asynccontextmanager
async def hub_feed(
    dsn: str, feed: ChangeFeed, local_change: Callable[[], None] | None = None
) -> AsyncIterator[LineListener]:
    """Listen for line changes in the database at ``dsn`` while the block runs."""

    def changed(lines: list[str]) -> None:
        feed.publish(lines)
        if local_change is not None and set(lines) & set(feed.shared_lines()):
            local_change()

    listener = LineListener(dsn, changed)
    task = asyncio.create_task(listener.run(), name="hub line listener")
    try:
        yield listener
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
