"""Keep a serving node's write-ahead logs small (issue 14: the WAL bounded, ≤ 8 MB).

SQLite checkpoints the WAL into the database every ``WAL_AUTOCHECKPOINT_PAGES`` (~40 MB,
lifeline/store/sqlite.py, chosen for bulk writes) but never shrinks the file, and removes
it only when the last connection to the line closes. Beside a process that keeps a line
open (an agent's session, a long-lived writer) a serving node's line then keeps a ~40 MB
WAL for good. After each session the node checkpoints and truncates the WAL once it is
over ``WAL_TRIM_BYTES``; a reader that still needs the log makes it give up at once (a
short busy timeout), and the next session tries again.
"""

from __future__ import annotations

import logging
import sqlite3

from lifeline.errors import LifelineError
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_open import BUSY_TIMEOUT_MS

__all__ = ["WAL_TRIM_BYTES", "trim_wal", "wal_bytes"]

log = logging.getLogger(__name__)

WAL_TRIM_BYTES = 4 << 20
_TRIM_WAIT_MS = 200


def wal_bytes(store: SqliteStore) -> int:
    try:
        return store.path.with_name(store.path.name + "-wal").stat().st_size
    except FileNotFoundError:
        return 0


async def trim_wal(store: SqliteStore, limit: int | None = None) -> bool:
    """Checkpoint and truncate the line's WAL if it is over ``limit`` bytes (default
    ``WAL_TRIM_BYTES``); True if done."""
    if store.read_only or wal_bytes(store) <= (WAL_TRIM_BYTES if limit is None else limit):
        return False

    def checkpoint(conn: sqlite3.Connection) -> bool:
        conn.execute(f"PRAGMA busy_timeout = {_TRIM_WAIT_MS}")
        try:
            busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return bool(busy == 0)

    try:
        return await store.run_read(checkpoint)
    except LifelineError as exc:  # the line works as before; the next session tries again
        log.debug("could not truncate the WAL of %s: %s", store.path, exc)
        return False
