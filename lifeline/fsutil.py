"""Writing files safely: atomic replacement (a reader never sees half a file, a crash never
leaves one), private files, and a new folder's tree written without following a link."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from lifeline.errors import ConfigError

__all__ = [
    "DATABASE_NAME",
    "PRIVATE_FILE",
    "NewTree",
    "atomic_file",
    "create_private",
    "link_target",
    "make_new_folder",
    "read_private",
    "refuse_foreign",
    "refuse_link",
    "require_new_or_empty",
    "require_private",
    "write_atomic",
]

# The name of a database of ours or one of SQLite's files beside it: ledger.db, x.db-wal,
# x.db.damaged-..., sessions-sources.sqlite
DATABASE_NAME = re.compile(r"\.(db|sqlite)($|[-.])")
PRIVATE_FILE = 0o600  # a line, a database of ours: its owner only, whatever the umask


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` via a temporary file, fsync and rename.

    ``mode`` defaults to the existing file's mode, or 0644 for a new file (mkstemp would
    otherwise leave it 0600); pass 0o600 for key material.
    """
    with atomic_file(path, mode=mode) as out:
        out.write(data)


@contextmanager
def atomic_file(path: Path, *, mode: int | None = None, durable: bool = True) -> Iterator[BinaryIO]:
    """A file to write ``path``'s new content into, piece by piece: on success it is
    flushed, fsynced (unless not ``durable``: a report rewritten often, which a crash may
    lose) and renamed over ``path``; on any error — a full disk among them — it is removed
    and ``path`` is left as it was. ``mode`` as for :func:`write_atomic`."""
    if mode is None:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            yield out
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc  # a write names no file
        raise


def create_private(path: Path) -> bool:
    """Make ``path`` an empty file of mode 0600 unless it exists, before SQLite opens it;
    True when this call made it. A symbolic link there is refused (:func:`refuse_link`).

    SQLite creates a database 0644 minus the umask (0666 under ``umask 000``), readable by
    every local user; an empty file is a valid empty database, and SQLite gives the
    ``-wal``, ``-shm`` and journal files it makes later the database file's own mode."""
    refuse_link(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def refuse_link(path: Path) -> None:
    """Refuse to open a database of ours through a symbolic link, or one that another user
    owns or keeps in a folder of theirs (ConfigError; :func:`refuse_foreign`).

    ``.lifeline/`` is 0700 so that what it holds is its owner's alone, but a link in it
    (one a cloned repository carries: git keeps links) leads wherever it says: SQLite made
    the line there, 0644, outside the folder, or wrote the owner's entries into a file
    another user made and reads (decision 0132)."""
    if path.is_symlink():
        raise ConfigError(
            f"{path} is a symbolic link (to {os.readlink(path)}); lifeline writes its "
            "databases only as files of their own, where nobody else can read them: remove "
            f"the link (`rm {path}`), or move the file it leads to in its place"
        )
    refuse_foreign(path)


def refuse_foreign(path: Path) -> None:
    """Refuse ``path`` (ConfigError) when it, or the folder it is in, belongs to another
    user than this process's (root's are trusted, as ssh trusts them).

    A cloned repository can carry ``.lifeline`` as a link to a folder another user of the
    machine made: the project's lines, keys and transcripts would be written there, where
    that user can read a database they planted (0666) or swap the node's key for one they
    know (decision 0140). Git refuses a repository another user owns for the same reason."""
    if not hasattr(os, "geteuid"):  # no POSIX owners to compare
        return
    me = os.geteuid()
    for place in (path, path.parent):
        try:
            owner = place.stat().st_uid
        except OSError:  # missing (made by us next), or unreadable (the open says so)
            continue
        if owner in (me, 0):
            continue
        link = _linked_folder(path.parent)
        via = f" ({link} is a symbolic link to {link.resolve()})" if link else ""
        raise ConfigError(
            f"{place} belongs to another user ({_user(owner)}){via}; lifeline keeps a "
            "project's lines and keys only in its user's own files and folders, where "
            "nobody else can read or replace them: "
            + (f"remove the link (`rm {link}`), then run this again" if link else
               "run this as that user, or make it yours (`chown`)")
        )  # fmt: skip


def _linked_folder(folder: Path) -> Path | None:
    """``folder`` or its parent (``.lifeline`` for a key under ``.lifeline/mesh``) when it
    is a symbolic link."""
    for place in (folder, folder.parent):
        if place.is_symlink():
            return place
    return None


def _user(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
    except (ImportError, KeyError):
        return f"uid {uid}"


def require_private(path: Path) -> None:
    """Refuse a secret file that users other than its owner can read or write, or that
    another user owns (:func:`refuse_foreign`: one who knows the key they put there)."""
    refuse_foreign(path)
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


def link_target(path: Path) -> Path:
    """The file a replacement of ``path`` writes: ``path``, or the file its symbolic link
    leads to (a config file kept in a dotfiles repository stays a link; its target is
    replaced atomically in its own folder). A link that loops, or leads into a folder that
    does not exist, is refused."""
    if not path.is_symlink():
        return path
    try:
        target = path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # a loop: RuntimeError before Python 3.13
        raise ConfigError(f"{path} is a symbolic link that cannot be followed ({exc})") from exc
    if not target.parent.is_dir() or (target.exists() and not target.is_file()):
        raise ConfigError(
            f"{path} is a symbolic link to {target}, which is not a file in an existing "
            "folder; mend the link or remove it, then run this again"
        )
    return target


def require_new_or_empty(folder: Path) -> None:
    """Refuse a ``folder`` that exists and is not an empty folder: an export writes a tree
    of new files, and replaces (or follows) nothing that was there."""
    if (folder.exists() or folder.is_symlink()) and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError(f"{folder} exists and is not an empty folder; give a new one")


_ELSEWHERE = "give a new folder in a place you can write"
_CANNOT_MAKE = {
    errno.ENOTDIR: "a part of that path is a file, not a folder; " + _ELSEWHERE,
    errno.EACCES: "check the permissions of the folder above it, or " + _ELSEWHERE,
    errno.EROFS: "it is on a read-only mount; " + _ELSEWHERE,
}


def make_new_folder(folder: Path) -> None:
    """Make ``folder`` (and the folders above it) for an export, after
    :func:`require_new_or_empty`; a path that cannot hold it (a file on the way, a read-only
    or special file system) is a one-line error naming it, not a traceback."""
    require_new_or_empty(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the folder {folder}: {exc.strerror}"
            + (f" ({exc.filename})" if exc.filename and str(exc.filename) != str(folder) else "")
            + f"; {_CANNOT_MAKE.get(exc.errno or 0, _ELSEWHERE)}"
        ) from exc


_OPEN_FOLDERS = 256  # folders kept open below the root; past it they are opened again


class NewTree:
    """Files written under a new or empty folder, none through a link: each folder below
    it is made here and opened without following a link, each file is created new
    (``O_EXCL | O_NOFOLLOW``), relative to its open folder. A link planted in the tree
    while it is written (or a second write of one file) stops the write, naming the path;
    nothing outside the tree is ever written."""

    def __init__(self, root: Path) -> None:
        make_new_folder(root)
        self.root = root
        self._root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._folders: dict[tuple[str, ...], int] = {}

    def __enter__(self) -> NewTree:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._folders.values():
            os.close(fd)
        self._folders.clear()
        if self._root_fd >= 0:
            os.close(self._root_fd)
            self._root_fd = -1

    def write(self, relative: str, data: bytes, mode: int = 0o644) -> None:
        """Create the file ``relative`` (``a/b/c.html``) with ``data``."""
        parts = tuple(relative.split("/"))
        if any(p in ("", ".", "..") or "\0" in p for p in parts):
            raise ConfigError(f"{relative!r} is not a path inside {self.root}")
        if len(self._folders) >= _OPEN_FOLDERS:
            for fd in self._folders.values():
                os.close(fd)
            self._folders.clear()
        try:
            folder = self._folder(parts[:-1])
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(parts[-1], flags, mode, dir_fd=folder)
        except OSError as exc:
            raise ConfigError(
                f"cannot create {self.root / relative} ({exc.strerror}): something was put "
                f"in {self.root} while it was written; give a new folder"
            ) from exc
        with os.fdopen(fd, "wb") as out:
            out.write(data)

    def _folder(self, parts: tuple[str, ...]) -> int:
        if not parts:
            return self._root_fd
        fd = self._folders.get(parts)
        if fd is None:
            parent = self._folder(parts[:-1])
            with contextlib.suppress(FileExistsError):  # made by this tree, or refused below
                os.mkdir(parts[-1], 0o755, dir_fd=parent)
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = self._folders[parts] = os.open(parts[-1], flags, dir_fd=parent)
        return fd


MAX_CONFIG_BYTES = 1 << 20  # a tool's configuration file; a larger one is not one


def read_json_object(path: Path) -> tuple[str, dict[str, Any]]:
    """``(text, object)`` of a JSON configuration file another tool also writes (an agent's
    settings), before changing it: ``("", {})`` when absent, ``(text, {})`` when blank. One
    clear ConfigError, the file untouched, when it is not a regular file of a JSON object."""
    if not path.exists():
        return "", {}
    if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} is not a configuration file; move it aside")
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if text.strip() else {}
    except (ValueError, UnicodeDecodeError) as exc:
        reason = f"{exc.msg} at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else exc
        raise ConfigError(
            f"{path} is not valid JSON ({reason}); fix it first, nothing was changed"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a JSON object; nothing was changed")
    return text, data
