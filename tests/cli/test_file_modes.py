"""Another user of this machine against a project written under ``umask 000``.

The real CLIs (`lifeline`, `lifeline-mesh`) run under ``umask 000`` in a project whose
folder other users may enter (as in a home folder of mode 0755); then a process running as
``nobody`` tries to list ``.lifeline/`` and read a private line. Loosened modes are reported
by `lifeline-mesh status` and `lifeline lines`, and repaired by `serve`.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mesh_procs import serve
from tests.support.paths import REPO

pytestmark = pytest.mark.timeout(240)

SECRET = "Private: the acquisition of Initech closes on Friday"
TRANSCRIPT = (
    REPO
    / "tests/fixtures/transcripts/claude-code"
    / "daaain__claude-code-log__claude-code-log-sample__4e27c414-a885-46a0-b5c8-d58e1417377d.jsonl"
)
NOBODY = 65534


# Set by a shell, not a ``preexec_fn``: that runs Python in a child forked from a test
# process whose other threads (gRPC's, from earlier tests) may be inside gRPC, and such a
# child once aborted in gRPC's poller before it ran the command.
NO_UMASK = ["sh", "-c", 'umask 000 && exec "$@"', "sh"]


def _run(module: str, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*NO_UMASK, sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (args, done.stderr)
    return done


@pytest.fixture
def project() -> Iterator[Path]:
    """A project in a folder every user may enter (pytest's own are 0700)."""
    parent = Path(tempfile.mkdtemp(prefix="lifeline-modes-"))
    parent.chmod(0o755)
    root = parent / "project"
    root.mkdir()
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(parent)


def _modes(root: Path) -> dict[str, int]:
    """The permission bits of ``.lifeline/`` and of every SQLite file under it."""
    found = {".lifeline": stat.S_IMODE((root / ".lifeline").stat().st_mode)}
    for path in (root / ".lifeline").rglob("*"):
        if ".db" in path.name or ".sqlite" in path.name:
            found[path.relative_to(root).as_posix()] = stat.S_IMODE(path.lstat().st_mode)
    return found


def _as_nobody(*command: str) -> subprocess.CompletedProcess[str]:
    """``command`` as the user nobody (util-linux's ``setpriv``, for the reason above)."""
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    return subprocess.run(
        [*drop, *command], capture_output=True, text=True, timeout=60, check=False
    )


def _write_everything(root: Path) -> None:
    _run("lifeline", root, "init")
    _run("lifeline", root, "--line", "private", "init")
    _run("lifeline", root, "--line", "private", "log", "--kind", "note", "--summary", SECRET)
    _run("lifeline", root, "sessions", "ingest", "--tool", "claude", str(TRANSCRIPT))
    _run("lifeline_mesh", root, "init", "--new-mesh", "team")


def test_lines_and_transcripts_are_private_whatever_the_umask(project: Path) -> None:
    _write_everything(project)
    modes = _modes(project)
    assert {"project/.lifeline/private.db", "project/.lifeline/sessions.db"} <= {
        f"project/{k}" for k in modes
    }
    assert ".lifeline/sessions-sources.sqlite" in modes
    assert modes == {k: 0o700 if k == ".lifeline" else 0o600 for k in modes}
    mesh = project / ".lifeline" / "mesh"
    keys = {p.name: stat.S_IMODE(p.stat().st_mode) for p in mesh.glob("*.key")}
    assert keys == {"node.key": 0o600, "ca.key": 0o600, "tls.key": 0o600}
    assert stat.S_IMODE(mesh.stat().st_mode) == 0o700
    # While a node serves a line and a write lands, SQLite's WAL and shared-memory files
    # exist (the node holds the line open): 0600 too.
    _run("lifeline_mesh", project, "share", "ledger")
    with serve(project, "--insecure", "--listen", "127.0.0.1:0"):
        _run("lifeline", project, "log", "--kind", "note", "--summary", "b")
        during = _modes(project)
    assert {".lifeline/ledger.db-wal", ".lifeline/ledger.db-shm"} <= set(during)
    assert during == {k: 0o700 if k == ".lifeline" else 0o600 for k in during}
    if os.geteuid() != 0:
        pytest.skip("reading as another user needs root (to become nobody)")
    line = str(project / ".lifeline" / "private.db")
    for command in (("cat", line), ("ls", str(project / ".lifeline"))):
        done = _as_nobody(*command)
        assert done.returncode != 0 and "Permission denied" in done.stderr, command
        assert SECRET not in done.stdout
    assert _as_nobody("ls", str(project)).returncode == 0  # the folder itself is open


def test_status_warns_about_loose_modes_and_serve_repairs_them(project: Path) -> None:
    _write_everything(project)
    (project / ".lifeline").chmod(0o755)  # e.g. copied with `cp -r` under another umask
    (project / ".lifeline" / "private.db").chmod(0o644)
    status = _run("lifeline_mesh", project, "status", "--json")
    assert "other users of this machine can read this project's lines" in status.stderr
    assert "chmod 700" in status.stderr
    assert json.loads(status.stdout)["readable_by_others"] == [
        {"path": ".lifeline", "mode": "0755"},
        {"path": ".lifeline/private.db", "mode": "0644"},
    ]
    assert "other users" in _run("lifeline", project, "lines").stderr
    with serve(project, "--insecure", "--listen", "127.0.0.1:0") as proc:
        modes = _modes(project)
    assert proc.stderr is not None
    assert "made 2 paths private" in proc.stderr.read()
    assert modes == {k: 0o700 if k == ".lifeline" else 0o600 for k in modes}
    status = _run("lifeline_mesh", project, "status", "--json")
    assert json.loads(status.stdout)["readable_by_others"] == []
    assert "other users" not in status.stderr
