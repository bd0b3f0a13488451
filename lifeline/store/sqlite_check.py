"""A line file's physical integrity: SQLite's own check, and the guard on local writes.

A line whose file fails ``PRAGMA quick_check`` refuses local writes (:func:`require_intact`):
writing into a damaged b-tree can spread the damage, and reads already fail. Recovering one
is ``lifeline recover`` (:mod:`lifeline.integrity`).

The check reads the whole file: 2 ms at 1k entries, ~1.1 s at a million (1.6 GB), ~11 s
when the file is not in the page cache. A file up to ``ALWAYS_CHECKED_BYTES`` is checked
before every local write (decision 0017). A larger one is checked at most once every
``RECHECK_S``: a sound check leaves its verdict beside the file (``<line>.db-checked``:
the file's device, inode and size, and when), and a write within that time skips the
check, unless the file was replaced or shrank since (decision 0104). Damage that arrives
meanwhile is still met: SQLite refuses to read or write a page it finds malformed, and
the error says to run ``recover`` (:func:`lifeline.store.sqlite_open.store_failure`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import time
from pathlib import Path

from lifeline.errors import StoreError
from lifeline.fsutil import PRIVATE_FILE, write_atomic
from lifeline.store.deferred_ids import repeated
from lifeline.store.sqlite_open import file_uri, read_only_uri, unwritable

__all__ = [
    "ALWAYS_CHECKED_BYTES",
    "RECHECK_S",
    "DamagedLine",
    "integrity_problems",
    "repeated_ids",
    "require_intact",
]

CHECK_LIMIT = 5  # problems SQLite lists at most; the first says enough
ALWAYS_CHECKED_BYTES = 64 << 20  # ~40k entries: a check of ≤ ~0.1 s before every write
RECHECK_S = 3600.0  # a larger file: a sound check is believed this long


class DamagedLine(StoreError):
    """The line's file fails SQLite's integrity check."""


def _quick_check(conn: sqlite3.Connection) -> list[str]:
    try:
        rows = conn.execute(f"PRAGMA quick_check({CHECK_LIMIT})").fetchall()
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    problems = [str(row[0]) for row in rows]
    return [] if problems == ["ok"] else problems


def integrity_problems(path: Path) -> list[str]:
    """What SQLite's quick check finds wrong with the file at ``path`` ([] when sound)."""
    uri = read_only_uri(path) if unwritable(path) else file_uri(path, "ro")
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=30)
    except sqlite3.Error as exc:
        return [str(exc)]
    try:
        return _quick_check(conn)
    finally:
        conn.close()


def repeated_ids(path: Path) -> list[str]:
    """Entry ids the file holds in more than one row: only possible while a pull's id
    index waited, and only through a bug (decision 0147); [] when the file cannot open."""
    uri = read_only_uri(path) if unwritable(path) else file_uri(path, "ro")
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
            return repeated(conn)
    except sqlite3.Error:
        return []


def _verdict_path(path: Path) -> Path:
    return path.with_name(path.name + "-checked")


def _believed(path: Path, stat: os.stat_result, now: float) -> bool:
    """A sound check of this very file (same device and inode, not smaller) was made less
    than ``RECHECK_S`` ago."""
    if stat.st_size <= ALWAYS_CHECKED_BYTES:
        return False
    try:
        kept = json.loads(_verdict_path(path).read_text(encoding="utf-8"))
        same = kept["dev"] == stat.st_dev and kept["ino"] == stat.st_ino
        return bool(same and kept["size"] <= stat.st_size and 0 <= now - kept["at"] < RECHECK_S)
    except (OSError, ValueError, KeyError, TypeError):
        return False  # none, unreadable or damaged: check


def _keep_verdict(path: Path, stat: os.stat_result, at: float) -> None:
    if stat.st_size <= ALWAYS_CHECKED_BYTES:
        return
    kept = {"dev": stat.st_dev, "ino": stat.st_ino, "size": stat.st_size, "at": at}
    with contextlib.suppress(OSError):  # not kept (a read-only folder): checked next time
        write_atomic(_verdict_path(path), json.dumps(kept).encode() + b"\n", mode=PRIVATE_FILE)


def _check_unless_believed(path: Path) -> list[str]:
    now = time.time()
    stat = path.stat()  # before the check: a write meanwhile only makes the file larger
    if _believed(path, stat, now):
        return []
    problems = integrity_problems(path)
    if not problems:
        _keep_verdict(path, stat, now)
    return problems


async def require_intact(path: Path, line: str) -> None:
    """Refuse to write to ``line`` when its file at ``path`` fails the check (one line, what
    to do). The check runs on a reader of its own, so any store of the line may ask; on a
    large file, a sound check made within ``RECHECK_S`` is believed (module docstring)."""
    problems = await asyncio.to_thread(_check_unless_believed, path)
    if problems:
        raise DamagedLine(
            f"line {line!r} is damaged ({path.name} fails SQLite's integrity check: "
            f"{problems[0][:120]}); writes are refused so the damage cannot spread — run "
            f"`lifeline --line {line} recover` (docs/user-guide.md, Recovering a damaged line)"
        )
