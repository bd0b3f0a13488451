"""Keeping ``.lifeline/`` from the other users of this machine: its modes, checked and repaired.

The lines hold private entries and session transcripts; nobody but the project's owner
should read them, whatever the umask the commands ran under (``umask 000`` used to leave
``.lifeline/`` 0777 and every line file 0666). The rule:

- ``.lifeline/`` is 0700: no other user can list it or open anything beneath it;
- every SQLite file under it (lines, their ``-wal``/``-shm``/journal files, damaged and
  recovering copies, ``sessions-sources.sqlite``, the proposals) is 0600, in case the
  folder is opened up later. They are made so (:func:`lifeline.fsutil.create_private`);
  SQLite gives its side files the database file's mode.

Keys have their own, stricter check (they are refused when loose: ``fsutil.read_private``).
``lifeline-mesh status`` and ``lifeline lines`` report looser modes; ``lifeline-mesh serve``
repairs them, as it restores the ignore file (:mod:`lifeline.ignore`), and every command
that opens a line to write (``init`` among them) makes the folder 0700 again.
"""

from __future__ import annotations

import contextlib
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lifeline.fsutil import DATABASE_NAME, PRIVATE_FILE

__all__ = [
    "PRIVATE_DIR",
    "HomeFolder",
    "LooseMode",
    "loose_modes",
    "loose_warning",
    "make_dir_private",
    "repair_modes",
]


class HomeFolder(Protocol):
    """What this module reads of a project's home (``lifeline.home.Home`` has it): the home
    uses this module when it prepares ``.lifeline/``, so it names no type of the home's."""

    @property
    def dir(self) -> Path: ...

    def relative(self, path: Path) -> str: ...


PRIVATE_DIR = 0o700


@dataclass(frozen=True, slots=True)
class LooseMode:
    path: Path
    mode: int  # what it is (permission bits)
    wanted: int  # what it should be


def _database(path: Path) -> bool:
    return bool(DATABASE_NAME.search(path.name))


def loose_modes(home: HomeFolder) -> list[LooseMode]:
    """``.lifeline/`` and the SQLite files under it that other users may read or write."""
    if not home.dir.is_dir():
        return []
    found: list[LooseMode] = []
    mode = stat.S_IMODE(home.dir.stat().st_mode)
    if mode & 0o077:
        found.append(LooseMode(home.dir, mode, PRIVATE_DIR))
    for path in sorted(home.dir.rglob("*")):
        try:
            info = path.lstat()
        except OSError:  # gone meanwhile (a -shm closed, a temporary file renamed)
            continue
        if stat.S_ISREG(info.st_mode) and _database(path) and info.st_mode & 0o077:
            found.append(LooseMode(path, stat.S_IMODE(info.st_mode), PRIVATE_FILE))
    return found


def make_dir_private(home: HomeFolder) -> bool:
    """``.lifeline/`` back to 0700 if it is looser (one ``stat``: cheap enough for every
    line opened to write); whether it was changed."""
    try:
        mode = stat.S_IMODE(home.dir.stat().st_mode)
        if not mode & 0o077:
            return False
        home.dir.chmod(PRIVATE_DIR)
    except OSError:  # missing, or another user's: `status` reports it
        return False
    return True


def repair_modes(home: HomeFolder) -> list[LooseMode]:
    """Set what :func:`loose_modes` finds to its mode; returns what was changed (a file
    of another user, which we may not change, is left for ``status`` to report)."""
    repaired: list[LooseMode] = []
    for loose in loose_modes(home):
        with contextlib.suppress(OSError):
            loose.path.chmod(loose.wanted)
            repaired.append(loose)
    return repaired


def loose_warning(home: HomeFolder, loose: list[LooseMode]) -> str:
    """One line saying what other users can read and how to stop it."""
    shown = ", ".join(f"{home.relative(x.path)} {x.mode:04o}" for x in loose[:3])
    more = f" and {len(loose) - 3} more" if len(loose) > 3 else ""
    return (
        f"warning: other users of this machine can read this project's lines ({shown}{more}); "
        f"run `chmod 700 {home.dir}` and `chmod 600` its .db files, or `lifeline-mesh serve`, "
        "which repairs them (docs/security.md, Other users of this machine)"
    )
