"""Where lifeline-context 0.6.1's commands went (docs/migration.md, "Commands, side by side").

Our users come from that tool and type its commands: `lifeline propose` used to end in a
list of every command and a guess (`did you mean promote?`) that led elsewhere. A command
of its that is not ours is answered with where its work is done here, in one line; an
option of its that none of ours takes (`--db`) says what to give instead, and so does its
``LIFELINE_DB`` left in a shell's environment, which would otherwise be ignored silently.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["MOVED", "MOVED_OPTIONS", "PASSING", "environment_note", "hooks_left", "moved_message"]

_MESH_REVIEW = (
    "agents propose through MCP under the write policy (.lifeline/policy.json); "
    "review with `lifeline-mesh proposals`, then `lifeline-mesh approve ID` or `reject ID`"
)
_MESH_SYNC = (
    "lines travel over the mesh instead of git: `lifeline-mesh share`, `serve`, `sync`, "
    "`invite`, `join` (docs/user-guide.md); LIFELINE.md can still be committed"
)
_NOT_PROVIDED = "not provided here; the write policy is .lifeline/policy.json (docs/mcp.md)"

MOVED: dict[str, str] = {
    "migrate": "`lifeline ingest LIFELINE.md`, or `lifeline import ROOT` for a whole project",
    "propose": _MESH_REVIEW,
    "review": _MESH_REVIEW,
    "approve": "`lifeline-mesh approve ID` (pending ones: `lifeline-mesh proposals`)",
    "reject": "`lifeline-mesh reject ID` (pending ones: `lifeline-mesh proposals`)",
    "audit": "`lifeline-mesh proposals --all` (the append-only decision trail)",
    "capture": "`lifeline-mesh capture` (its drafts go to `lifeline-mesh proposals`)",
    "rebuild": "`lifeline render` (`--format lifeline-context` for teammates still on it)",
    "reindex": "nothing to run: `lifeline recall` brings its index up to date as it reads",
    "rehash": "nothing to run: ids are already in the form lifeline-context 0.6 wrote",
    "push": _MESH_SYNC,
    "pull": _MESH_SYNC,
    "clone": _MESH_SYNC,
    "install-hooks": "`lifeline hooks install claude-code` (or codex, gemini)",
    "install-rules": _NOT_PROVIDED,
    "guard": "not provided, so this check passes without checking: remove it from the hook "
    "that runs it (.git/hooks/pre-push, the Stop hook in .claude/settings*.json); "
    "`lifeline hooks install claude-code` sets ours",
    "policy": _NOT_PROVIDED,
    "schema": "not needed: a line is a SQLite file, or a PostgreSQL hub (docs/hub.md)",
}


# Its options that are not ours (on any command), and what to give instead.
MOVED_OPTIONS: dict[str, str] = {
    "--db": "name the project with --root DIR (the folder holding .lifeline/) and the line "
    "with --line NAME",
    "--store": "a team shares lines over the mesh or a PostgreSQL hub (docs/hub.md)",
    "--out": "write the view with `lifeline render`",
    "--mesh": "`lifeline lines` lists the lines; `lifeline where ID` finds an entry's copies",
}
# Its commands that its hooks run (`install-hooks`: a pre-push hook and Claude Code's Stop
# hook): a failure there blocks every push, or the agent's every stop. They pass, and say why.
PASSING = {"guard"}


def moved_message(prog: str, command: str) -> str | None:
    """The line telling a lifeline-context user where ``command`` went, or None when it is
    not one of that tool's commands that this one lacks."""
    where = MOVED.get(command)
    if where is None:
        return None
    said = "note" if command in PASSING else "error"
    return (
        f"{prog}: {said}: `{command}` is a lifeline-context command; here: {where} "
        "(docs/migration.md)"
    )


def environment_note(prog: str, line: str, line_file: Path | None) -> str | None:
    """The note for lifeline-context's ``LIFELINE_DB`` (the ledger its commands used) when it
    is set and names another file than ``line_file``, the one this command uses (None on a
    hub): we never read it, and a user who exported it would otherwise write elsewhere than
    they think without a word."""
    given = os.environ.get("LIFELINE_DB")
    if not given:
        return None
    if line_file is not None and Path(given).resolve() == line_file.resolve():
        return None
    where = f" ({line_file})" if line_file is not None else ""
    return (
        f"{prog}: note: LIFELINE_DB is lifeline-context's and is not read here: this uses "
        f"line {line!r}{where}; choose with --root DIR and --line NAME, and unset "
        "LIFELINE_DB (docs/migration.md)"
    )


def hooks_left(root: Path) -> list[str]:
    """What lifeline-context's `init` and `install-hooks` set in the project at ``root`` that
    still points at it, each with what to do (`lifeline import` says them)."""
    found: list[str] = []
    mcp = _read(root / ".mcp.json")
    if '"lifeline-mcp"' in mcp.replace(" ", ""):
        found.append(
            ".mcp.json starts its MCP server (`lifeline-mcp`), which lifeline-mesh does not "
            "ship: `lifeline-mesh mcp install claude-code` replaces that entry with ours "
            '(`"command": "lifeline-mesh", "args": ["mcp", "--root", '
            f'{json.dumps(str(root.resolve()))}, "--agent", "claude-code"]`; docs/mcp.md)'
        )
    for name in ("settings.json", "settings.local.json"):
        if "lifeline guard" in _read(root / ".claude" / name):
            found.append(
                f".claude/{name}: its Stop hook runs `guard` (it passes here, with a note): "
                "remove it; `lifeline hooks install claude-code` adds ours"
            )
    if "lifeline guard" in _read(root / ".git" / "hooks" / "pre-push"):
        found.append(".git/hooks/pre-push runs its `guard` (it passes here): remove that line")
    return found


def _read(path: Path) -> str:
    if not path.is_file():  # a FIFO a repository ships would block the read
        return ""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return f.read(1 << 20)  # a hook or config file; a huge one is not its
    except OSError:
        return ""
