"""A member cannot squat this node's idempotency keys (decision 0115).

A dedup key travels with its entry, so a member can push an entry holding any key it
guesses: an agent's MCP idempotency key, a proposal's (``proposal:<id>``). A local write
with that key used to return the member's entry and drop what the user wrote. Real
processes over mutual TLS: A (the CA holder) serves; B pushes by hand
(``tests/support/hostile_push.py``); then A writes with the same keys through `lifeline
log`, through the MCP server (the SDK's own stdio client), and by approving a proposal.
Each write records A's own entry, and a retry of it still records once.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.ledger import utc_now
from lifeline_mesh.home.node_home import NodeHome
from tests.support.hostile_push import pushed
from tests.support.mcp_client import call_tool, mcp_client
from tests.support.mesh_procs import cli, free_port, join_mesh, serve, shared_node

pytestmark = pytest.mark.slow

POLICY = {"default": "direct", "kinds": {"open": "propose"}}


def _summaries(root: Path) -> dict[str, str]:
    with sqlite3.connect(root / ".lifeline" / "ledger.db") as conn:
        return dict(conn.execute("SELECT id, summary FROM entries").fetchall())


def _log(root: Path, summary: str, key: str) -> dict[str, str]:
    out = cli("lifeline", root, "log", "--kind", "decision", "--summary", summary,
              "--dedup-key", key, "--json").stdout  # fmt: skip
    return dict(json.loads(out))


def _squat(summary: str, key: str, kind: str = "decision") -> Entry:
    """What B plants: an entry of its choosing under A's key, any author it likes."""
    return Entry.create(ts=utc_now(), kind=kind, summary=summary, author="alice", dedup_key=key)


@pytest.mark.timeout(600)
async def test_a_members_entry_never_answers_a_local_write_with_its_key(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        shared_node(root)
    join_mesh(a, [b])
    NodeHome(a).policy_path.write_text(json.dumps(POLICY))
    address = f"127.0.0.1:{free_port()}"
    with serve(a, "--listen", address, "--no-discovery"):
        async with mcp_client(a) as client:
            proposed = await call_tool(client, "append", kind="open", summary="Queue: SQS?")
            pid = proposed["proposal"]["id"]
            squats = [
                _squat("Database: MongoDB (squatted)", "mcp:retry-42"),
                _squat("Cache: none (squatted)", "agent:cache-1"),
                _squat("Queue: none (squatted)", f"proposal:{pid}", kind="open"),
            ]
            assert await pushed(b, address, squats) == (3, 0)
            held = _summaries(a)
            assert {e.id for e in squats} <= held.keys()  # stored, keys and all
            # the CLI: A's decision is recorded, and a retry returns it
            logged = _log(a, "Database: PostgreSQL 16", "mcp:retry-42")
            assert logged["summary"] == "Database: PostgreSQL 16"
            assert _log(a, "Database: PostgreSQL 16", "mcp:retry-42")["id"] == logged["id"]
            # MCP: recorded, not `duplicate` of B's entry; the retry is the duplicate
            first = await call_tool(
                client, "append", kind="decision", summary="Cache: Redis",
                idempotency_key="agent:cache-1",
            )  # fmt: skip
            again = await call_tool(
                client, "append", kind="decision", summary="Cache: Redis",
                idempotency_key="agent:cache-1",
            )  # fmt: skip
            assert first["status"] == "recorded" and first["entry"]["summary"] == "Cache: Redis"
            assert again["status"] == "duplicate" and again["entry"]["id"] == first["entry"]["id"]
        # approval: the proposal's own draft is appended, not B's entry
        approved = cli("lifeline_mesh", a, "approve", pid, "--by", "lead", "--json")
        entry_id = json.loads(approved.stdout)["entry"]["id"]
    summaries = _summaries(a)
    assert summaries[logged["id"]] == "Database: PostgreSQL 16"
    assert summaries[entry_id] == "Queue: SQS?"
    assert len(summaries) == len(held) + 3  # A's three writes, each once
