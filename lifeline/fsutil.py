"""Atomic file replacement: a reader never sees half a file, a crash never leaves one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from lifeline.errors import ConfigError

__all__ = [
    "PRIVATE_FILE",
    "atomic_file",
    "create_private",
    "read_private",
    "require_private",
    "write_atomic",
]

PRIVATE_FILE = 0o600  # a line, a database of ours: its owner only, whatever the umask


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` via a temporary file, fsync and rename.

    ``mode`` defaults to the existing file's mode, or 0644 for a new file (mkstemp would
    otherwise leave it 0600); pass 0o600 for key material.
    """
    with atomic_file(path, mode=mode) as out:
        out.write(data)


@contextmanager
def atomic_file(path: Path, *, mode: int | None = None) -> Iterator[BinaryIO]:
    """A file to write ``path``'s new content into, piece by piece: on success it is
    flushed, fsynced and renamed over ``path``; on any error it is removed and ``path`` is
    left as it was. ``mode`` as for :func:`write_atomic`."""
    if mode is None:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def create_private(path: Path) -> bool:
    """Make ``path`` an empty file of mode 0600 unless it exists, before SQLite opens it;
    True when this call made it.

    SQLite creates a database 0644 minus the umask (0666 under ``umask 000``), readable by
    every local user; an empty file is a valid empty database, and SQLite gives the
    ``-wal``, ``-shm`` and journal files it makes later the database file's own mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def require_private(path: Path) -> None:
    """Refuse a secret file that users other than its owner can read or write."""
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise ConfigError(
            f"{path} is a secret but has mode {mode:04o} (other users can read it); "
            f"run `chmod 600 {path}`"
        )


def read_private(path: Path) -> bytes:
    """The bytes of a secret file, after :func:`require_private`."""
    require_private(path)
    return path.read_bytes()
