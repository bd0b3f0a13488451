"""Opening a line's SQLite file: its side files, read-only access where nothing can be
written, and the one-line errors of a file that cannot be opened or used."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

from lifeline.errors import StoreError
from lifeline.fsutil import create_private
from lifeline.store.schema import LEDGER, Schema, apply_migrations, migrations_pending

__all__ = [
    "BUSY_TIMEOUT_MS",
    "connect_read_only",
    "connect_writable",
    "damage_advice",
    "enter_wal",
    "file_uri",
    "is_damage",
    "open_connection",
    "open_failure",
    "read_only_uri",
    "sidecars",
    "store_failure",
    "unwritable",
]


def sidecars(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


# How long a connection waits for another process's write lock before SQLITE_BUSY.
BUSY_TIMEOUT_MS = 30_000


def open_failure(path: Path, exc: sqlite3.Error) -> str:
    text = str(exc)
    if "full" in text or "disk I/O" in text:
        return (
            f"cannot open {path} ({text}): is the disk full? Free space and run it again; "
            "nothing was half-written"
        )
    if is_damage(exc):
        return f"cannot open {path} ({text}): {damage_advice(path)}"
    if (cause := _machine_refusal(path, exc)) is not None:
        return f"cannot open {path} ({text}): {cause}"
    if not path.exists() and not os.access(path.parent, os.W_OK):
        return (
            f"cannot create {path} ({text}): {path.parent} is read-only; "
            "reads of the other lines work, write where .lifeline/ is writable"
        )
    return f"cannot open {path} as a SQLite ledger ({text}); is it a lifeline line file?"


def store_failure(path: Path, exc: sqlite3.Error, *, read_only: bool) -> str:
    """What an operation on the open line file at ``path`` met, and what to do."""
    if is_damage(exc):  # met by a read or a write: the transaction wrote nothing
        return f"SQLite error on {path}: {exc}; {damage_advice(path)}"
    if read_only and "readonly" in str(exc):
        return (
            f"{path.parent} is read-only, and this command writes to "
            f"{path.name}; reads work, write where .lifeline/ is writable"
        )
    if (cause := _machine_refusal(path, exc)) is not None:
        return f"cannot write {path} ({exc}): {cause}"
    return f"SQLite error on {path}: {exc}"


def _machine_refusal(path: Path, exc: sqlite3.Error) -> str | None:
    """What to do when the machine, not the file, refused a write: the disk is full,
    another process kept the write lock past our wait, or the file cannot be written.
    SQLite rolls the transaction back in each case, so nothing was half-written."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary code of an extended one
    if code == sqlite3.SQLITE_FULL:
        return "the disk is full; free space and run it again (nothing was half-written)"
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return (
            f"another process held its write lock for over {BUSY_TIMEOUT_MS // 1000} s; "
            f"let it finish or stop it (`fuser {path}` names it), then run it again "
            "(nothing was written)"
        )
    if code == sqlite3.SQLITE_READONLY:
        return (
            "the file, or the mount it is on, is read-only; reads work, make it writable "
            "to write (nothing was written)"
        )
    return None


def is_damage(exc: sqlite3.Error) -> bool:
    """SQLite found the file damaged (SQLITE_CORRUPT, SQLITE_NOTADB)."""
    text = str(exc)
    return "malformed" in text or "not a database" in text


def damage_advice(path: Path) -> str:
    """What to do about a damaged line file, in one sentence."""
    return (
        f"the line file is damaged (or not a SQLite file) — "
        f"run `lifeline --line {path.stem} recover` to keep what its pages still hold "
        "(the damaged file is kept), "
        "then `lifeline-mesh sync PEER` to get the rest back from a peer "
        "(docs/user-guide.md, Recovering a damaged line)"
    )


def unwritable(path: Path) -> bool:
    """The file exists but neither it nor its folder can be written (a read-only mount,
    or permissions): SQLite cannot make its ``-wal``/``-shm`` files there."""
    return path.exists() and not (os.access(path.parent, os.W_OK) and os.access(path, os.W_OK))


def file_uri(path: Path, mode: str) -> str:
    """SQLite's ``file:`` URI of ``path`` opened in ``mode`` (``ro``, ``rw``...). The path is
    percent-encoded: in a URI a ``#`` or ``?`` of a folder's name (``~/C#/project``) ends
    the path, and the open failed, or opened another file."""
    return f"file:{quote(str(path))}?mode={mode}"


def read_only_uri(path: Path) -> str:
    """``file:`` URI to read ``path`` where no ``-shm`` can be made: immutable, unless a
    WAL with writes in it is there (then the ordinary read-only mode, using its -shm)."""
    wal = path.with_name(path.name + "-wal")
    return file_uri(path, "ro" if wal.exists() and wal.stat().st_size else "ro&immutable=1")


def connect_writable(
    path: Path, busy_timeout_ms: int, cache_kib: int, autocheckpoint_pages: int
) -> sqlite3.Connection:
    """A connection to the line file at ``path`` in WAL mode, with our settings."""
    refuse_predecessor(path)  # before anything is written to it (WAL mode included)
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        enter_wal(conn, busy_timeout_ms / 1000)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA cache_size = -{cache_kib}")
        conn.execute(f"PRAGMA wal_autocheckpoint = {autocheckpoint_pages}")
        conn.execute("PRAGMA temp_store = MEMORY")  # sorts for keys() etc. stay off disk
        conn.execute("PRAGMA foreign_keys = OFF")
    except BaseException:
        conn.close()
        raise
    return conn


def refuse_predecessor(path: Path) -> None:
    """Refuse lifeline-context's own ledger (its ``entries`` hold a ``payload`` column, and
    it has no ``schema_migrations``): both tools keep ``.lifeline/<line>.db``, and opening
    one of its files as a line used to add our tables and WAL mode to it before failing.
    It is read by `lifeline import`, never written (docs/migration.md).

    Looked at through a read-only connection: closing a writable one checkpoints a ``-wal``
    the other tool left (its last connection is closed by a daemon thread, which exit does
    not always wait for) into the file. A file that cannot be read so is left to the
    ordinary open, which says what is wrong with it."""
    try:
        if path.stat().st_size == 0:
            return
    except OSError:
        return
    try:
        conn = sqlite3.connect(read_only_uri(path), uri=True, isolation_level=None)
    except sqlite3.Error:
        return
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "entries" not in tables or "schema_migrations" in tables:
            return
        columns = {r[1] for r in conn.execute("PRAGMA table_info(entries)")}
    except sqlite3.Error:
        return
    finally:
        conn.close()
    if "payload" in columns:
        raise StoreError(
            f"{path} is a ledger of lifeline-context, which lifeline-mesh imports but never "
            "writes: move its folder aside and import it (`mv .lifeline .lifeline-context && "
            "lifeline import .lifeline-context`; docs/migration.md); nothing was changed in it"
        )


def enter_wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """Switch to WAL mode. Opens of a new file at once race to switch it: the losers get
    SQLITE_BUSY at once, without the busy handler, and try again (up to ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to an up-to-date line file in a folder we cannot write."""
    conn = sqlite3.connect(
        read_only_uri(path), uri=True, isolation_level=None, check_same_thread=False
    )
    if migrations_pending(conn, LEDGER):  # others' tables: reads that need them say so
        conn.close()
        raise StoreError(
            f"{path} needs a schema upgrade, which cannot be written here; run any `lifeline` "
            "command on it once where its folder is writable (the upgrade is kept), then read "
            "it here"
        )
    return conn


async def open_connection(
    target: Path,
    wanted: Schema,
    pool: ThreadPoolExecutor,
    *,
    create: bool,
    cache_kib: int,
    autocheckpoint_pages: int,
) -> tuple[sqlite3.Connection, bool]:
    """The store's connection to the line file at ``target``, opened on ``pool``'s thread
    (made when ``create``) and migrated to ``wanted``; read-only (True) where the folder
    cannot be written. On failure ``pool`` is shut down, and a file this open made is
    removed with its side files."""
    loop = asyncio.get_running_loop()

    made = False

    def connect() -> sqlite3.Connection:
        nonlocal made
        if create:
            with contextlib.suppress(OSError):  # SQLite's own open says what is wrong
                made = create_private(target)
        conn = connect_writable(target, BUSY_TIMEOUT_MS, cache_kib, autocheckpoint_pages)
        try:
            apply_migrations(conn, wanted)
        except BaseException:
            conn.close()
            raise
        return conn

    read_only = False
    try:
        conn = await loop.run_in_executor(pool, connect)
    except StoreError:  # refused as it is (lifeline-context's ledger): nothing to undo
        pool.shutdown(wait=False)
        raise
    except sqlite3.DatabaseError as exc:
        if not unwritable(target):
            pool.shutdown(wait=False)
            # Nothing half-made is left behind (e.g. the disk is full), by the open that
            # made the file only: opens of an existing file never remove it.
            if made:
                for leftover in (target, *sidecars(target)):
                    leftover.unlink(missing_ok=True)
            raise StoreError(open_failure(target, exc)) from exc
        try:
            conn = await loop.run_in_executor(pool, connect_read_only, target)
        except (sqlite3.DatabaseError, StoreError) as again:
            pool.shutdown(wait=False)
            raise StoreError(
                f"cannot read {target}: its folder is read-only and opening it read-only "
                f"failed too ({again})"
            ) from again
        read_only = True
    return conn, read_only
