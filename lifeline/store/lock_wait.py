"""A writer that waits for a line's write lock says so beside the line file (decision 0151).

A grouped pull (sqlite_group.py) holds the line's write lock for seconds at a time. A
writer of another process (a `lifeline log`) waiting for it retries every 100 ms (SQLite's
busy handler), so after each of its commits the pull left the lock free for
``GROUP_GAP_S`` before taking it again: ~2 s of a million-entry pull spent asleep on its
slowest stage, with nobody waiting most of the time.

So a writer that finds the lock taken touches ``<line file>-waiting`` before it waits, and
the pull leaves the gap only while that mark is fresh (younger than the longest a writer
waits, ``BUSY_TIMEOUT_MS``). The mark is never removed: another writer may still be
waiting when one is done, and a stale mark costs a few gaps, as before. It is made 0600
and never through a symbolic link, as the line's own files (fsutil.create_private); a
folder where it cannot be made leaves the writer waiting as before, with the gaps it may
then miss.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from lifeline.fsutil import PRIVATE_FILE
from lifeline.store.sqlite_open import BUSY_TIMEOUT_MS

__all__ = [
    "HAND_SUFFIX",
    "begin_at_once",
    "begin_immediate",
    "hand_of",
    "hand_raised",
    "raise_hand",
]

HAND_SUFFIX = "-waiting"


def hand_of(path: Path) -> Path:
    """The mark beside the line file ``path``."""
    return path.with_name(path.name + HAND_SUFFIX)


def begin_at_once(conn: sqlite3.Connection) -> sqlite3.OperationalError | None:
    """``BEGIN IMMEDIATE`` on ``conn`` without waiting (busy timeout 0, then the usual one
    back); the error when it could not begin, None when it did."""
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        return exc
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return None


def begin_immediate(conn: sqlite3.Connection, path: Path) -> None:
    """``BEGIN IMMEDIATE`` on ``conn`` (the line file at ``path``), waiting up to its busy
    timeout; when another connection holds the lock, the mark is raised first."""
    failed = begin_at_once(conn)
    if failed is None:
        return
    if "locked" not in str(failed) and "busy" not in str(failed):
        raise failed
    raise_hand(path)
    conn.execute("BEGIN IMMEDIATE")


def raise_hand(path: Path) -> None:
    """Make or touch the mark beside ``path`` (nothing when it cannot be)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(OSError):
        fd = os.open(hand_of(path), flags, PRIVATE_FILE)
        try:
            os.utime(fd)
        finally:
            os.close(fd)


def hand_raised(path: Path, now: Callable[[], float] = time.time) -> bool:
    """Whether a writer raised the mark beside ``path`` recently enough to be waiting still."""
    try:
        touched = os.stat(hand_of(path), follow_symlinks=False).st_mtime
    except OSError:
        return False
    return now() - touched < BUSY_TIMEOUT_MS / 1000
