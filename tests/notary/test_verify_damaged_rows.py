"""`lifeline-mesh verify` on a line whose notary rows were edited with sqlite3 (issue 32):
a column holding another SQLite type than the notary writes (SQLite keeps what a writer
puts in a column) is reported as a damaged row, named by its table, row number and the
entry it is about, and the audit goes on: exit 1, never a crash. Real CLI subprocesses on
a real line file, in one process and in worker processes."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

SERIAL = {"LIFELINE_VERIFY_PARALLEL_MIN": str(10**9)}
PARALLEL = {"LIFELINE_VERIFY_PARALLEL_MIN": "0", "LIFELINE_VERIFY_WORKERS": "2"}

EDITS = {
    "item as text": "item = CAST(item AS TEXT)",
    "item as readable text": "item = 'not a statement'",
    "signature row id as text": "id = hex(id)",
    "sort key as text": "sort_key = 'soon'",
    "ts as a blob": "ts = x'00ff'",
    "role not UTF-8": "role = CAST(x'ff61' AS TEXT)",
}


def _run(
    module: str, root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "LIFELINE_AUTHOR": "alice", **(env or {})}
    cmd = [sys.executable, "-m", module, "--root", str(root), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=120)


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A node's line of signed entries (each written with its author statement), one
    more than there are edits."""
    root = tmp_path_factory.mktemp("signed")
    assert _run("lifeline_mesh", root, "init").returncode == 0
    assert _run("lifeline", root, "init").returncode == 0
    ids = []
    for n in range(len(EDITS) + 1):
        done = _run("lifeline", root, "log", "--kind", "decision", "--summary", f"choice {n}")
        assert done.returncode == 0, done.stderr
        ids.append(done.stdout.strip())
    return root, ids


@pytest.mark.parametrize("env", [SERIAL, PARALLEL], ids=["serial", "workers"])
def test_mistyped_attestations_are_reported_not_fatal(
    signed: tuple[Path, list[str]], tmp_path: Path, env: dict[str, str]
) -> None:
    template, ids = signed
    root = tmp_path / "copy"
    shutil.copytree(template, root)
    db = root / ".lifeline" / "ledger.db"
    conn = sqlite3.connect(db)
    edited: dict[int, str] = {}  # row -> the entry its statement is about
    for entry_id, edit in zip(ids, EDITS.values(), strict=False):
        (seq,) = conn.execute(
            "SELECT seq FROM attestations WHERE subject = ?", (entry_id,)
        ).fetchone()
        conn.execute(f"UPDATE attestations SET {edit} WHERE seq = ?", (seq,))
        edited[seq] = entry_id
    conn.commit()
    conn.close()

    done = _run("lifeline_mesh", root, "verify", "--json", env=env)
    assert done.returncode == 1, done.stderr
    line = json.loads(done.stdout)["lines"][0]
    damaged = [f for f in line["findings"] if f["check"] == "damaged-attestation"]
    assert len(damaged) == len(EDITS), line["findings"]
    assert all(f["severity"] == "fail" for f in damaged)
    for seq, entry_id in edited.items():
        (found,) = [f for f in damaged if f["detail"].startswith(f"attestations row {seq}: ")]
        assert found["subject"] == entry_id
    # the audit went on: every entry was read; the one statement left still counts
    assert line["entries"] == len(ids) and line["signed"] == 1 and line["attestations"] == 1

    text = _run("lifeline_mesh", root, "verify", env=env)
    assert text.returncode == 1 and "damaged-attestation" in text.stdout, text.stderr
    assert all(f"attestations row {seq}:" in text.stdout for seq in edited)
    # the ledger's own audit does not read the notary's rows: the entries verify
    assert _run("lifeline", root, "verify", env=env).returncode == 0
