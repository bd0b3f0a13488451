"""The working tree beside a bundle: what the files the sessions edited look like *now*, in
this machine's checkout of the bundle's scope — ``git diff <start commit>`` of those files.

The bundle itself is a function of the line's entries (the same bytes on every node); this
section is not: it reads the local checkout at resume time. So it is never stored, never
part of the bundle's fitted content, and only the CLI's ``resume`` adds it, after the bundle,
under its own heading (decision 0054). git runs as a subprocess with a timeout and bounded
output; no git, no checkout, an unknown commit: one line says so, and the bundle stands.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lifeline.sessions.bundles.outcomes import EditOutcome, edit_outcomes
from lifeline.sessions.model import Session
from lifeline.sessions.scope import scope_for

__all__ = ["GIT_TIMEOUT", "Worktree", "find_checkout", "worktree_of"]

GIT_TIMEOUT = 5.0  # seconds for one git command
_MAX_FILES = 200


@dataclass(slots=True)
class Worktree:
    """What the checkout says: where, HEAD, the diff of the edited files (maybe cut)."""

    path: str = ""
    head: str = ""
    since: str = ""  # the commit the diff is taken from
    files: list[str] = field(default_factory=list)
    diff: str = ""
    cut: int = 0  # characters of diff left out to fit
    note: str = ""  # why there is no diff, when there is none

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "head": self.head,
            "since": self.since,
            "files": self.files,
            "diff": self.diff,
            "cut": self.cut,
            "note": self.note,
        }

    def markdown(self) -> str:
        lines = [
            "## Working tree",
            "(read from this machine's checkout when the bundle was made; not part of the "
            "bundle, which is the same on every node)",
            f"- checkout: {self.path or '-'}",
            f"- head: {self.head or '-'}",
        ]
        if self.note:
            lines.append(f"- {self.note}")
        if self.diff:
            lines.append(f"- git diff {self.since} -- {' '.join(self.files)}")
            lines += ["```diff", self.diff.rstrip("\n"), "```"]
        if self.cut:
            lines.append(f"- [diff cut: {self.cut} more characters; run the git diff above]")
        return "\n".join(lines) + "\n"


def _git(cwd: Path, *args: str, limit: int = 1 << 20) -> tuple[int, str]:
    """(exit status, output cut at ``limit`` bytes); (-1, why) when git cannot run or does
    not answer within :data:`GIT_TIMEOUT`. Output past the limit is never read."""
    try:
        proc = subprocess.Popen(
            ["git", "-C", str(cwd), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
    except OSError as exc:
        return -1, f"git cannot run here ({exc.strerror or exc})"
    assert proc.stdout is not None
    deadline, out = time.monotonic() + GIT_TIMEOUT, bytearray()
    with proc, proc.stdout:
        fd = proc.stdout.fileno()
        while len(out) <= limit:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                proc.kill()
                return -1, "git did not answer in time"
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            out += chunk
        if len(out) > limit:  # enough: the rest is not wanted
            proc.kill()
            proc.wait()
            return 0, out[:limit].decode("utf-8", "replace")
        try:
            code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            return -1, "git did not answer in time"
    return code, out.decode("utf-8", "replace")


def _local(path: str) -> Path:
    return Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)


def find_checkout(scope: str, sessions: Sequence[Session], root: Path) -> Path | None:
    """This machine's folder for the bundle's scope: a session's recorded folder (``~`` is
    this machine's home) or the project's root, whichever has that scope. None: absent."""
    candidates = [_local(s.facts.cwd) for s in reversed(sessions) if s.facts.cwd]
    candidates.append(root)
    for folder in candidates:
        if folder.is_absolute() and folder.is_dir() and scope_for(str(folder)) == scope:
            return folder
    return None


def _edited(sessions: Sequence[Session], folder: Path) -> list[str]:
    """The files whose edits were done or never confirmed, relative to ``folder``."""
    found: dict[str, None] = {}
    for session in sessions:
        base = _local(session.facts.cwd) if session.facts.cwd else None
        for edit in edit_outcomes(session):
            if edit.outcome not in (EditOutcome.DONE, EditOutcome.UNCONFIRMED):
                continue
            path = _local(edit.item.path)
            if path.is_absolute():
                if base is None or not path.is_relative_to(base):
                    continue
                path = path.relative_to(base)
            target = (folder / path).resolve()
            if target.is_relative_to(folder.resolve()):
                found.setdefault(str(target.relative_to(folder.resolve())))
    return sorted(found)[:_MAX_FILES]


def worktree_of(
    scope: str, sessions: Sequence[Session], root: Path, start: str | None, limit: int
) -> Worktree | None:
    """The working-tree section (its diff at most ``limit`` characters), or None when no
    checkout of the scope is on this machine."""
    folder = find_checkout(scope, sessions, root)
    if folder is None:
        return None
    found = Worktree(path=str(folder))
    code, head = _git(folder, "rev-parse", "HEAD")
    if code != 0:
        found.note = head if code < 0 else "no commit yet in this checkout"
        return found
    found.head = head.strip()
    found.files = _edited(sessions, folder)
    if not found.files:
        found.note = "the sessions edited no file of this checkout"
        return found
    since = start or "HEAD"
    if start and _git(folder, "cat-file", "-e", f"{start}^{{commit}}")[0] != 0:
        found.note = f"the start commit {start[:12]} is not in this checkout: diff since HEAD"
        since = "HEAD"
    elif not start:
        found.note = "the transcripts record no start commit: diff since HEAD"
    found.since = since
    code, diff = _git(folder, "diff", "--no-color", "--no-ext-diff", since, "--", *found.files)
    if code != 0:
        found.note = diff if code < 0 else f"git diff {since} failed"
        return found
    if not diff.strip():
        found.note = (found.note + "; " if found.note else "") + "no difference in those files"
    found.diff, found.cut = diff[:limit], max(0, len(diff) - limit)
    return found
