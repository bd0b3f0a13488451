"""Keeping ``.lifeline/`` out of git: the ignore file every init writes, the tracked check.

Nothing under ``.lifeline/`` belongs in a repository: the ``.db`` files are the ledger itself
(it travels by ``lifeline-mesh sync``; the readable projection ``LIFELINE.md`` lives beside
``.lifeline/`` and is safe to commit), and ``mesh/`` holds private keys — a pushed ``ca.key``
lets anyone mint members of the mesh. ``.lifeline/.gitignore`` says so to git; every init and
every ``serve`` restores it, and :func:`tracked_private_files` finds files git already tracks.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from lifeline.fsutil import write_atomic
from lifeline.lines import LEDGER_DIR

__all__ = ["IGNORE_FILE", "IGNORE_TEXT", "ensure_ignore_file", "tracked_private_files"]

IGNORE_FILE = ".gitignore"
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


def ensure_ignore_file(root: Path) -> bool:
    """Write ``<root>/.lifeline/.gitignore`` unless it already says :data:`IGNORE_TEXT`.

    Returns whether it was (re)written. A read-only ``.lifeline/`` is left as it is: the
    caller's own write reports that directory.
    """
    folder = root / LEDGER_DIR
    path = folder / IGNORE_FILE
    try:
        if path.read_text(encoding="utf-8") == IGNORE_TEXT:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(path, IGNORE_TEXT.encode("utf-8"), mode=0o644)
    except OSError:  # a read-only folder or mount: the caller's own write says so
        return False
    return True


def tracked_private_files(root: Path) -> list[str] | None:
    """Files under ``.lifeline/`` that git tracks and should not (paths relative to ``root``).

    None when git is not installed or ``root`` is not in a work tree.
    """
    git = shutil.which("git")
    if git is None or not (root / LEDGER_DIR).is_dir():
        return None
    try:
        done = subprocess.run(
            [git, "-C", str(root), "ls-files", "-z", "--", LEDGER_DIR],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    allowed = {f"{LEDGER_DIR}/{IGNORE_FILE}", f"{LEDGER_DIR}/config.json"}
    names = [n for n in done.stdout.decode("utf-8", "replace").split("\0") if n]
    return sorted(n for n in names if n not in allowed)
