"""Opening a line's SQLite file: its side files, read-only access where nothing can be
written, and the one-line errors of a file that cannot be opened."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from lifeline.errors import StoreError
from lifeline.store.schema import LEDGER, migrations_pending

__all__ = ["connect_read_only", "open_failure", "read_only_uri", "sidecars", "unwritable"]


def sidecars(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def open_failure(path: Path, exc: sqlite3.Error) -> str:
    text = str(exc)
    if "full" in text or "disk I/O" in text:
        return (
            f"cannot open {path} ({text}): is the disk full? Free space and run it again; "
            "nothing was half-written"
        )
    if "malformed" in text or "not a database" in text:
        return (
            f"cannot open {path} ({text}): the line file is damaged (or not a SQLite file) — "
            f"run `lifeline --line {path.stem} recover` to keep what its pages still hold "
            "(the damaged file is kept), "
            "then `lifeline-mesh sync PEER` to get the rest back from a peer "
            "(docs/user-guide.md, Recovering a damaged line)"
        )
    return f"cannot open {path} as a SQLite ledger ({text}); is it a lifeline line file?"


def unwritable(path: Path) -> bool:
    """The file exists but neither it nor its folder can be written (a read-only mount,
    or permissions): SQLite cannot make its ``-wal``/``-shm`` files there."""
    return path.exists() and not (os.access(path.parent, os.W_OK) and os.access(path, os.W_OK))


def read_only_uri(path: Path) -> str:
    """``file:`` URI to read ``path`` where no ``-shm`` can be made: immutable, unless a
    WAL with writes in it is there (then the ordinary read-only mode, using its -shm)."""
    wal = path.with_name(path.name + "-wal")
    mode = "ro" if wal.exists() and wal.stat().st_size else "ro&immutable=1"
    return f"file:{path}?mode={mode}"


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to an up-to-date line file in a folder we cannot write."""
    conn = sqlite3.connect(
        read_only_uri(path), uri=True, isolation_level=None, check_same_thread=False
    )
    if migrations_pending(conn, LEDGER):  # others' tables: reads that need them say so
        conn.close()
        raise StoreError(f"{path} needs a schema upgrade, which cannot be written here")
    return conn
