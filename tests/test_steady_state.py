"""Evidence grows with knowledge, not with activity (issue 14, decision 0015), through the
real CLIs: two signed nodes, one serving, synced with `lifeline-mesh sync`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lifeline.home import Home
from lifeline_mesh.home.node_home import NodeHome
from tests.test_sync_e2e import SYNC_JSON, cli, serve


def _signed_node(root: Path, *summaries: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    cli("lifeline", root, "init")
    cli("lifeline_mesh", root, "init")  # a node identity: every local write is signed
    cli("lifeline_mesh", root, "share", "ledger")
    for s in summaries:
        cli("lifeline", root, "log", "--kind", "decision", "--summary", s, "--author", "t")


def _evidence(root: Path) -> dict[str, int]:
    """Rows per kind of signed statement in the line's file."""
    conn = sqlite3.connect(f"file:{Home(root).line_path('ledger')}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT role, count(*) FROM attestations GROUP BY role"
            " UNION ALL SELECT role, count(*) FROM statements GROUP BY role"
        ).fetchall()
    finally:
        conn.close()
    return {str(role): int(n) for role, n in rows}


def _sync(root: Path, address: str) -> dict[str, object]:
    out: dict[str, object] = json.loads(cli("lifeline_mesh", root, *SYNC_JSON, address).stdout)[0]
    return out


@pytest.mark.slow
def test_no_op_syncs_sign_nothing(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _signed_node(a, "Database: PostgreSQL", "Queue: none")
    _signed_node(b, "Cache: redis")
    with serve(b) as (_proc, address):
        first = _sync(a, address)
        assert first["entries_received"] == 1 and first["entries_sent"] == 2
        _sync(a, address)  # each side's state statement of the first sync crosses over
        settled = (_evidence(a), _evidence(b))
        # each node authored its entries and signed one state: after admitting the other's
        assert settled[0] == settled[1] == {"author": 3, "state": 2}
        reports = [_sync(a, address) for _ in range(20)]
        assert (_evidence(a), _evidence(b)) == settled  # 20 no-op syncs: 0 new statements
        assert {r["round_trips"] for r in reports} == {1}
        assert {(r["signatures_sent"], r["signatures_received"]) for r in reports} == {(0, 0)}
        cli("lifeline", b, "log", "--kind", "fix", "--summary", "new on b", "--author", "t")
        assert _sync(a, address)["entries_received"] == 1
        # one new state, by the node that learned something (a); b learned nothing new
        assert _evidence(a)["state"] == 3 and _evidence(a)["author"] == 4
    b_id = json.loads(cli("lifeline_mesh", b, "id", "--json").stdout)["node_id"]
    NodeHome(a).members_path.write_text(json.dumps({"members": [{"node_id": b_id}]}))
    verify = json.loads(cli("lifeline_mesh", a, "verify", "--json").stdout)
    assert verify["ok"] and verify["lines"][0]["signed"] == 4, verify
