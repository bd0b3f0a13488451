"""A read-only `.lifeline/` (a read-only mount): reads work, writes say read-only in one line.
A full disk: one line, and nothing half-made left behind.

Runs the real CLIs inside a private mount namespace (`unshare -m`) where `.lifeline/` is
bind-mounted read-only, or the project is on a tiny tmpfs; skipped where that is not allowed.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.support.clirun import lifeline
from tests.support.mount_ns import in_namespace, in_read_only, namespaces_work

pytestmark = pytest.mark.skipif(not namespaces_work(), reason="needs unshare -m (root)")


def test_reads_work_and_writes_say_read_only(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    logged = lifeline(tmp_path, "log", "--kind", "decision", "--summary", "Use SQLite")
    assert logged.returncode == 0
    ll = [sys.executable, "-m", "lifeline", "--root", str(tmp_path)]
    lm = [sys.executable, "-m", "lifeline_mesh", "--root", str(tmp_path)]
    history, context, verify, log, status, init = in_read_only(
        tmp_path,
        [*ll, "history"],
        [*ll, "context"],
        [*ll, "verify"],
        [*ll, "log", "--kind", "note", "--summary", "refused"],
        [*lm, "status"],
        [*lm, "init"],
    )
    assert history[0] == 0 and "Use SQLite" in history[1], history
    assert context[0] == 0 and "Use SQLite" in context[1] and context[2] == "", context
    assert verify[0] == 0 and "all ids and parents verify" in verify[1], verify
    assert status[0] == 0 and "1 entry" in status[1], status
    for code, _, err in (log, init):
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert "read-only" in err, err
    assert "is a lifeline line file" not in history[2] + log[2]


def test_a_full_disk_is_one_line_and_leaves_nothing_half_made(tmp_path: Path) -> None:
    project, outputs = tmp_path / "project", tmp_path / "outputs"
    project.mkdir()
    outputs.mkdir()
    ll = [sys.executable, "-m", "lifeline", "--root", str(project)]
    lm = [sys.executable, "-m", "lifeline_mesh", "--root", str(project)]
    listing = ["sh", "-c", f"ls -A {project / '.lifeline'} {project / '.lifeline' / 'mesh'}"]
    setup = [
        f"mount -t tmpfs -o size=400k tmpfs {project}",
        " ".join(shlex.quote(a) for a in [*ll, "init"]) + " >/dev/null",
        " ".join(shlex.quote(a) for a in [*lm, "init", "--new-mesh", "team"]) + " >/dev/null",
        f"dd if=/dev/zero of={project}/filler bs=1k count=100000 2>/dev/null || true",
    ]
    second, invite, listed = in_namespace(
        setup, outputs, [*ll, "--line", "second", "init"], [*lm, "invite"], listing
    )
    for code, _, err in (second, invite):
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert "full" in err or "No space left" in err, err
    names = listed[1].split()
    assert "second.db" not in names and "invites.json" not in names, names
    temp = [n for n in names if n.startswith(".") and n not in (".gitignore", ".membership.lock")]
    assert not temp, names  # no temp file of an atomic write is left
