"""A line file's physical integrity: SQLite's own check, and the guard on local writes.

A line whose file fails ``PRAGMA quick_check`` refuses local writes (:func:`require_intact`):
writing into a damaged b-tree can spread the damage, and reads already fail. Recovering one
is ``lifeline recover`` (:mod:`lifeline.integrity`).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from lifeline.errors import StoreError
from lifeline.store.sqlite_open import read_only_uri, unwritable

__all__ = ["DamagedLine", "integrity_problems", "require_intact"]

CHECK_LIMIT = 5  # problems SQLite lists at most; the first says enough


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
    uri = read_only_uri(path) if unwritable(path) else f"file:{path}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=30)
    except sqlite3.Error as exc:
        return [str(exc)]
    try:
        return _quick_check(conn)
    finally:
        conn.close()


async def require_intact(path: Path, line: str) -> None:
    """Refuse to write to ``line`` when its file at ``path`` fails the check (one line, what
    to do). The check runs on a reader of its own, so any store of the line may ask."""
    problems = await asyncio.to_thread(integrity_problems, path)
    if problems:
        raise DamagedLine(
            f"line {line!r} is damaged ({path.name} fails SQLite's integrity check: "
            f"{problems[0][:120]}); writes are refused so the damage cannot spread — run "
            f"`lifeline --line {line} recover` (docs/user-guide.md, Recovering a damaged line)"
        )
