"""A project lifeline-context 0.6.1 set up (`init`, `install-hooks claude-code` and `git`),
met by lifeline-mesh as its user meets it after installing us: the hooks it installed run
our `lifeline`, and its ledger sits where our line would.

- Its ledger is refused as it is, naming the import, and not a byte of it changes (our
  open used to add its tables and WAL mode to the file before failing with "is it a
  lifeline line file?"), nor of the ``-wal`` its last write may leave: its connection is
  closed by a daemon thread that exit does not always wait for, and a writable connection
  of ours, closed, checkpointed that WAL into the file (seen once in CI).
- `lifeline import` names what of its setup still points at it (its MCP server in
  `.mcp.json`, its guard hooks), with what to do.
- Its pre-push hook (`python -m lifeline guard --git || exit 1`) and Claude Code's Stop hook
  (`guard --session`) pass with a note instead of failing: a failure blocked every push,
  and the agent's every stop. Its SessionStart hook (`context --mark-session`) prints the
  context once the ledger is imported.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.lc_venv import lc_command, run_lc

pytestmark = pytest.mark.slow


def _hook(project: Path, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` as a hook runs it: a shell in the project, our `python` first on PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["sh", "-c", command], cwd=project, env=env, capture_output=True, text=True, timeout=60
    )


def _claude_hooks(project: Path) -> dict[str, str]:
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    return {event: rows[0]["hooks"][0]["command"] for event, rows in settings["hooks"].items()}


def _log_leaving_its_wal(lc: Path, project: Path, *args: str) -> None:
    """lifeline-context's ``log``, its write left in the ``-wal``, as when exit does not wait
    for its daemon thread: a read-only connection holds the ledger open meanwhile, so the
    close of its connection is not the last one (the last checkpoints the WAL into the file
    and deletes it), and a read-only connection never checkpoints on its own close."""
    ledger = project / ".lifeline" / "ledger.db"
    reader = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        reader.execute("SELECT count(*) FROM entries").fetchone()
        assert run_lc(lc, project, *args).returncode == 0
    finally:
        reader.close()
    assert (project / ".lifeline" / "ledger.db-wal").stat().st_size > 0


def _files(ledger: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in ledger.parent.glob("ledger.db*")}


def test_a_project_lifeline_context_set_up(tmp_path: Path) -> None:
    lc = lc_command(tmp_path / "lc")
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    for args in (["init"], ["install-hooks", "claude-code", "--local"], ["install-hooks", "git"]):
        assert run_lc(lc, project, *args).returncode == 0
    assert run_lc(lc, project, "log", "--kind", "decision", "--summary", "use x").returncode == 0
    _log_leaving_its_wal(lc, project, "log", "--kind", "decision", "--summary", "use y")
    hooks = _claude_hooks(project)
    assert hooks == {
        "SessionStart": "python -m lifeline context --mark-session",
        "Stop": "python -m lifeline guard --session",
    }
    ledger = project / ".lifeline" / "ledger.db"
    before = _files(ledger)
    assert {"ledger.db", "ledger.db-wal"} <= before.keys()

    started = _hook(project, hooks["SessionStart"])
    assert started.returncode == 2
    assert "is a ledger of lifeline-context" in started.stderr, started.stderr
    assert "lifeline import .lifeline-context" in started.stderr
    assert _files(ledger).keys() == before.keys()
    assert _files(ledger)["ledger.db"] == before["ledger.db"]
    assert _files(ledger)["ledger.db-wal"] == before["ledger.db-wal"]

    for guard in (hooks["Stop"], "sh .git/hooks/pre-push"):
        passed = _hook(project, guard)
        assert passed.returncode == 0, (guard, passed.stderr)
        assert "`guard` is a lifeline-context command" in passed.stderr

    (project / ".lifeline").rename(project / ".lifeline-context")
    imported = _hook(project, "python -m lifeline import .lifeline-context")
    assert imported.returncode == 0, imported.stderr
    # ... and says what of its setup still points at it, with what to do
    told = imported.stderr
    assert "lifeline-context's setup still points at it here:" in told, told
    assert ".mcp.json starts its MCP server (`lifeline-mcp`)" in told
    assert '"command": "lifeline-mesh", "args": ["mcp", "--root", ' in told
    assert ".claude/settings.local.json: its Stop hook runs `guard`" in told
    assert ".git/hooks/pre-push runs its `guard`" in told
    started = _hook(project, hooks["SessionStart"])
    assert started.returncode == 0, started.stderr
    assert "use x" in started.stdout and "use y" in started.stdout
