"""`lifeline-mesh serve --sessions`: a session that crashed on laptop A reaches laptop B
through the mesh (real serve, join and sync subprocesses, mutual TLS), signed, with the
same ids and the same verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.mesh_procs import cli
from tests.support.sessions_support import (
    rate_limited_session,
    run_cli,
    serve_ingest_and_sync,
    two_nodes,
)

pytestmark = pytest.mark.slow


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
