"""`lifeline-mesh serve --sessions`: a session that crashed on laptop A reaches laptop B
through the mesh (real serve, join and sync subprocesses, mutual TLS), signed, with the
same ids and the same verdict."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.mesh_procs import cli
from tests.support.sessions_support import rate_limited_session, run_cli

pytestmark = pytest.mark.slow


def _statuses(line_file: Path) -> int:
    if not line_file.exists():
        return 0
    conn = sqlite3.connect(f"file:{line_file}?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute("SELECT count(*) FROM entries WHERE kind = 'session-status'")
        return int(row.fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def two_nodes(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Laptops A and B sharing the sessions line (A starts the mesh), and A's HOME."""
    a, b, home = tmp_path / "a", tmp_path / "b", tmp_path / "home"
    for root in (a, b):
        root.mkdir()
        cli("lifeline_mesh", root, "share", "sessions")
    cli("lifeline_mesh", a, "init", "--new-mesh", "team")
    return a, b, home


def serve_ingest_and_sync(a: Path, b: Path, home: Path) -> None:
    """`serve --sessions` on A until its watcher has ingested; B joins and syncs from A."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(a), "serve", "--sessions"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(home)},
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().split()[-1]
        join_address = proc.stdout.readline().split()[-1]
        invite = cli("lifeline_mesh", a, "invite", "--address", join_address).stdout.strip()
        cli("lifeline_mesh", b, "join", invite)
        deadline = time.monotonic() + 60
        while _statuses(a / ".lifeline" / "sessions.db") == 0:  # the watcher's first pass
            assert time.monotonic() < deadline, "serve --sessions ingested nothing in 60 s"
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        cli("lifeline_mesh", b, "sync", address, "--line", "sessions")
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def test_serve_sessions_ingests_and_a_peer_receives(tmp_path: Path) -> None:
    a, b, home = two_nodes(tmp_path)
    rate_limited_session(
        home / ".claude" / "projects" / "-a" / "7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f.jsonl", a
    )
    serve_ingest_and_sync(a, b, home)
    on_a = json.loads(run_cli(a, "sessions", "list", "--json").stdout)
    on_b = json.loads(run_cli(b, "sessions", "list", "--json").stdout)
    assert [s["id"] for s in on_b] == [s["id"] for s in on_a] and len(on_b) == 1
    assert on_b[0]["status"]["status"] in ("crashed", "live")
    assert "rate_limit 429" in on_b[0]["status"]["reason"]
    verified = cli("lifeline_mesh", b, "verify", "--line", "sessions", check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr
