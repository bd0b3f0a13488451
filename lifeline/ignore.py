"""Keeping ``.lifeline/`` out of git: the ignore file every init writes, the tracked check.

Nothing under ``.lifeline/`` belongs in a repository: the ``.db`` files are the ledger itself
(it travels by ``lifeline-mesh sync``; the readable projection ``LIFELINE.md`` lives beside
``.lifeline/`` and is safe to commit), and ``mesh/`` holds private keys — a pushed ``ca.key``
lets anyone mint members of the mesh. ``.lifeline/.gitignore`` says so to git; every init and
every ``serve`` restores it, and :func:`tracked_private_files` finds files git already tracks
(``status`` and every ``serve`` warn of them: :func:`tracked_warning`).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from lifeline.errors import ConfigError
from lifeline.fsutil import DATABASE_NAME, refuse_foreign, write_atomic
from lifeline.wording import count

__all__ = [
    "IGNORE_TEXT",
    "IgnoredHome",
    "ensure_ignore_file",
    "refuse_tracked",
    "refuse_tracked_databases",
    "tracked_private_files",
    "tracked_under",
    "tracked_warning",
]


class IgnoredHome(Protocol):
    """What this module reads of a project's home (``lifeline.home.Home`` has it): the home
    writes its ignore file through this module, so it names no type of the home's."""

    @property
    def root(self) -> Path: ...

    @property
    def dir(self) -> Path: ...

    @property
    def ignore_path(self) -> Path: ...

    def exists(self) -> bool: ...

    def relative(self, path: Path) -> str: ...

    def committable(self) -> set[str]: ...


IGNORE_TEXT = """\
# Written by lifeline; `lifeline init`, `lifeline-mesh init` and `lifeline-mesh serve`
# restore it. Nothing in .lifeline/ belongs in git: the .db files are the ledger (share it
# with `lifeline-mesh sync`; commit LIFELINE.md, its readable projection, instead) and mesh/
# holds private keys (ca.key, node.key, tls.key), one-time invites and runtime state.
# A pushed ca.key lets anyone make members of your mesh. See docs/security.md.
*
!.gitignore
# The project's size caps (.lifeline/config.json) are not secret: keep them equal on
# every clone by committing them.
!/config.json
"""
GIT_TIMEOUT_S = 10.0


def ensure_ignore_file(home: IgnoredHome) -> bool:
    """Write ``home.ignore_path`` unless it already says :data:`IGNORE_TEXT`.

    Returns whether it was (re)written. A read-only ``.lifeline/`` is left as it is: the
    caller's own write reports that directory.
    """
    path = home.ignore_path
    refuse_foreign(path)  # a `.lifeline` a clone linked to another user's folder
    try:
        if path.read_text(encoding="utf-8") == IGNORE_TEXT:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    try:
        home.dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # lifeline/file_modes.py
        write_atomic(path, IGNORE_TEXT.encode("utf-8"), mode=0o644)
    except OSError:  # a read-only folder or mount: the caller's own write says so
        return False
    return True


def tracked_private_files(home: IgnoredHome) -> list[str] | None:
    """Files under ``.lifeline/`` that git tracks and should not (paths relative to the root).

    None when git is not installed or the root is not in a work tree.
    """
    git = shutil.which("git")
    if git is None or not home.exists():
        return None
    try:
        done = subprocess.run(
            [git, "-C", str(home.root), "ls-files", "-z", "--", home.relative(home.dir)],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    allowed = home.committable()
    names = [n for n in done.stdout.decode("utf-8", "replace").split("\0") if n]
    return sorted(n for n in names if n not in allowed)


def tracked_under(
    home: IgnoredHome, folder: Path, tracked: Sequence[str] | None = None
) -> list[str]:
    """The files under ``folder`` (in ``.lifeline/``) that git tracks: among ``tracked``
    (:func:`tracked_private_files`, read once by a caller that checks more), else one
    `git ls-files`; none without git or outside a work tree."""
    prefix = home.relative(folder) + "/"
    names = tracked_private_files(home) if tracked is None else tracked
    return [name for name in names or () if name.startswith(prefix)]


def refuse_tracked(home: IgnoredHome, path: Path, why: str, then: str) -> None:
    """ConfigError when git tracks ``path``: a file that came with a repository is its
    author's choice, not this user's (decision 0141). ``why`` says what it would do,
    ``then`` what to run once it is untracked."""
    name = home.relative(path)
    if name in (tracked_private_files(home) or ()):
        raise ConfigError(
            f"git tracks {name}: {why} (a clone carries its author's); run "
            f"`git rm --cached {name}` and move it away, then {then}"
        )


_DATABASES_UNTRACKED: set[Path] = set()  # the .lifeline/ folders found clean (this process)


def refuse_tracked_databases(home: IgnoredHome, tracked: Sequence[str] | None = None) -> None:
    """ConfigError when git tracks a database of ``.lifeline/`` (a line, a sessions file):
    a line that came with a repository is its author's file, and what is written into it
    (the user's entries, their agent sessions, the mesh's entries a node takes in) goes
    wherever the repository is pushed next, with a `git commit -a` (decision 0141). Asked
    once per folder and process: a node opens its lines for every session. ``tracked``:
    the list a caller read already (:func:`tracked_private_files`)."""
    if home.dir in _DATABASES_UNTRACKED:
        return
    names = tracked_private_files(home) if tracked is None else tracked
    lines = [n for n in names or () if DATABASE_NAME.search(n)]
    if not lines:
        _DATABASES_UNTRACKED.add(home.dir)
    else:
        raise ConfigError(
            f"git tracks {', '.join(lines[:3])}{', …' if len(lines) > 3 else ''}: what "
            "is written into a line the repository carries goes wherever the repository is "
            "pushed; run `git rm -r --cached .lifeline` (the files stay here), then run "
            "this again"
        )


def tracked_warning(tracked: list[str]) -> str:
    """The warning for files of ``.lifeline/`` that git tracks (:func:`tracked_private_files`):
    an ignore file written later does not untrack them, and a pushed key is leaked."""
    shown = ", ".join(tracked[:4]) + (", …" if len(tracked) > 4 else "")
    return (
        f"warning: git tracks {count(len(tracked), 'file')} that must never be committed "
        f"({shown}); run `git rm -r --cached .lifeline` and, if any was pushed, treat its "
        "keys as leaked (docs/security.md, What to commit)"
    )
