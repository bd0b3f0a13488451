"""A bulk pull's writes grouped on a line file (lifeline/store/sqlite_group.py, decision
0107); on any other store they write as before."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from functools import partial

from lifeline.errors import LifelineError
from lifeline.store import sqlite_group
from lifeline.store.backend import FileOrEntries, on_backend
from lifeline.store.lock_wait import hand_raised
from lifeline.store.port import Store
from lifeline.store.sqlite import WAL_AUTOCHECKPOINT_PAGES, SqliteStore
from lifeline.store.sqlite_group import WriteGroup
from lifeline.store.sqlite_open import BUSY_TIMEOUT_MS
from lifeline.store.wal_copier import WalCopier

__all__ = ["commit_group", "grouped"]

log = logging.getLogger(__name__)

_HAND_BACK_WAIT_MS = 200


def grouped(
    store: Store, on: bool = True, *, group: WriteGroup | None = None
) -> AbstractAsyncContextManager[None]:
    """With ``on``, the writes to ``store`` inside, from any task, grouped and committed at
    the end (a line file's store not grouped already; any other store writes as before)."""
    if not on:
        return contextlib.nullcontext()
    per: FileOrEntries[AbstractAsyncContextManager[None]] = FileOrEntries(
        file=lambda s: _grouped(s, group), entries=lambda _s: contextlib.nullcontext()
    )
    return on_backend(store, per)


async def commit_group(store: Store) -> None:
    """Commit ``store``'s group now, if it has one (before the node signs what it holds)."""
    await on_backend(store, FileOrEntries(file=_commit, entries=lambda _s: _nothing()))


async def _nothing() -> None:
    return None


def _commit(store: SqliteStore) -> Awaitable[None]:
    group = store.group
    if group is None:
        return _nothing()
    return store.run_read(group.commit)


@contextlib.asynccontextmanager
async def _grouped(store: SqliteStore, group: WriteGroup | None) -> AsyncIterator[None]:
    if store.group is not None or store.read_only:
        yield
        return
    group = group if group is not None else WriteGroup()
    await store.run_read(_checkpoint_every(sqlite_group.GROUP_AUTOCHECKPOINT_PAGES))
    copier = WalCopier(store.path)  # the WAL copied beside the writes (decision 0151)
    group.after_commit = copier.committed
    group.others_wait = partial(hand_raised, store.path)  # the lock left free only then
    store.group = group
    idle = asyncio.create_task(_commit_when_idle(store, group))
    try:
        yield
    except BaseException:
        with contextlib.suppress(LifelineError):  # the error raised says what went wrong
            await _end(store, group, idle, copier)
        raise
    await _end(store, group, idle, copier)


async def _end(
    store: SqliteStore, group: WriteGroup, idle: asyncio.Task[None], copier: WalCopier
) -> None:
    idle.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await idle
    group.after_commit = None
    await asyncio.to_thread(copier.stop)  # before the WAL is truncated below

    def finish(conn: sqlite3.Connection) -> None:
        try:
            group.commit(conn)
        finally:
            store.group = None  # on the worker: the writes queued before this are grouped
            _checkpoint_every(WAL_AUTOCHECKPOINT_PAGES)(conn)
        _hand_back_wal(conn)

    await store.run_read(finish)


def _checkpoint_every(pages: int) -> Callable[[sqlite3.Connection], None]:
    """Set how many WAL pages a commit lets grow before it checkpoints (decision 0145)."""

    def apply(conn: sqlite3.Connection) -> None:
        conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")

    return apply


def _hand_back_wal(conn: sqlite3.Connection) -> None:
    """The WAL the group let grow checkpointed into the file and truncated (decision
    0145); a reader still on it makes this give up at once, and the store's own interval
    and the node's trim after a session (lifeline_mesh/node/wal.py) take it from there."""
    conn.execute(f"PRAGMA busy_timeout = {_HAND_BACK_WAIT_MS}")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    except sqlite3.Error as exc:
        log.debug("the WAL of a write group was not truncated: %s", exc)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


async def _commit_when_idle(store: SqliteStore, group: WriteGroup) -> None:
    while True:
        seen = group.writes
        await asyncio.sleep(sqlite_group.GROUP_IDLE_S)
        if group.pending and group.writes == seen:
            try:
                await store.run_read(group.commit)
            except LifelineError:
                return  # group.lost says so to the next write and to the group's end
