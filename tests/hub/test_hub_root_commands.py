"""Every command run on a hub process root reads and writes the hub's lines in PostgreSQL
(decision 0060), never a placeholder ``.lifeline/ledger.db``: two real hub processes on one
real database over mutual TLS, a laptop that joined through one of them, and the commands
run as a user runs them — `lifeline context|recall|history|log|checkpoint|render`,
`lifeline sessions ingest|list`, `lifeline-mesh verify|status|ui`, MCP over stdio and over
`--http --stateless`, a proposal approved through process A that reaches the laptop
through process B."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.hub_roots import MESH_NAME, TRANSCRIPT, mcp_http, page, viewer
from tests.support.hub_roots import hub_mesh as _hub_mesh
from tests.support.hub_roots import life as _life
from tests.support.hub_roots import line_ids as _ids
from tests.support.hub_roots import mesh as _mesh
from tests.support.mcp_client import call_tool, tool_text
from tests.support.mesh_procs import log_note
from tests.support.pg_server import fresh_database

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


async def _line_rows(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM entries"))
    finally:
        await conn.close()


async def _tamper(url: str, entry_id: str) -> None:
    """Edit an entry's stored summary in the database, as someone with SQL access would."""
    conn = await asyncpg.connect(url)
    try:
        doc = await conn.fetchval("SELECT doc FROM entries WHERE id = $1", bytes.fromhex(entry_id))
        data = json.loads(doc)
        data["summary"] = "rewritten behind the notary's back"
        await conn.execute(
            "UPDATE entries SET doc = $1 WHERE id = $2", json.dumps(data), bytes.fromhex(entry_id)
        )
    finally:
        await conn.close()


def test_cli_commands_on_a_hub_root_read_and_write_the_database(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    with _hub_mesh(tmp_path, url) as (hub_a, hub_b, laptop, _sync_a, sync_b):
        from_laptop = log_note(laptop, "laptop note about the zebra migration")
        _mesh(laptop, "sync", sync_b, "--json")

        # The laptop's entry, read on process A's root: from the database, not a local file
        assert from_laptop in _ids(hub_a)
        assert not (hub_a / ".lifeline" / "ledger.db").exists()
        assert "zebra migration" in _life(hub_a, "context").stdout
        recalled = _life(hub_a, "recall", "zebra", "--json").stdout
        assert from_laptop in recalled
        assert "zebra migration" in _life(hub_a, "render", "--stdout").stdout
        # `history --limit` reads the database line's end: the same as the end of the whole
        whole = json.loads(_life(hub_a, "history", "--json").stdout)
        tail = json.loads(_life(hub_a, "history", "--json", "--limit", "2").stdout)
        assert tail == whole[-2:] and from_laptop in {e["id"] for e in whole}

        # Written on process A's root (signed by the hub node), reaching the laptop via B
        made = _life(hub_a, "log", "--kind", "decision", "--summary", "hub decides: okapi")
        from_hub = made.stdout.strip()
        checkpoint = _life(hub_a, "checkpoint", "--thread", "rollout", "--next", "ship okapi")
        assert checkpoint.returncode == 0
        # `log --thread` finds the thread's newest entry in the database, from either process
        on_thread = _life(
            hub_a, "log", "--kind", "note", "--summary", "canary", "--thread", "rollout", "--json"
        )
        first = json.loads(on_thread.stdout)
        assert first["body"] == "thread: rollout"
        follow = _life(
            hub_b,
            "log",
            "--kind",
            "fix",
            "--summary",
            "canary fixed",
            "--thread",
            "rollout",
            "--body",
            "retry",
            "--json",
        )
        second = json.loads(follow.stdout)
        assert second["parents"] == [first["id"]] and second["body"] == "thread: rollout\n\nretry"
        assert "okapi" in _life(hub_b, "context").stdout  # the other process's root sees it
        # pin and unpin read what is in force from the database's truth tables
        _life(hub_a, "pin", from_hub[:12])
        assert "## Pinned" in _life(hub_b, "context").stdout
        _life(hub_b, "unpin", from_hub[:12])
        assert "## Pinned" not in _life(hub_a, "context").stdout
        assert _life(hub_a, "unpin", from_hub[:12], check=False).returncode == 2
        # again, after the unpin: a new pin note, its body kept after the pin's own line
        pinned = json.loads(_life(hub_b, "pin", from_hub[:12], "--body", "why", "--json").stdout)
        assert pinned["body"] == f"pin: {from_hub}\n\nwhy"
        assert "## Pinned" in _life(hub_a, "context").stdout
        _mesh(laptop, "sync", sync_b, "--json")
        assert from_hub in _ids(laptop)
        assert "ship okapi" in _life(laptop, "context").stdout

        # the viewer on a hub root: its pages show the database's line, kept up to date
        with viewer(hub_a) as base:
            assert "zebra migration" in page(base + "lines/ledger/history")
            later = log_note(hub_b, "written on B while the viewer runs: ibex")
            assert "ibex" in page(base + "lines/ledger/history")
            assert "ibex" in page(base + f"lines/ledger/entries/{later}")

        # verify on a hub root audits the database's entries, signatures included
        rows = asyncio.run(_line_rows(url))
        report = json.loads(_mesh(hub_a, "verify", "--json").stdout)
        (line,) = report["lines"]
        assert line["entries"] == rows >= 3 and line["signed"] >= 2 and report["ok"], report
        asyncio.run(_tamper(url, from_laptop))
        tampered = _mesh(hub_b, "verify", "--json", check=False)
        assert tampered.returncode == 1, tampered.stderr
        failed = json.loads(tampered.stdout)
        checks = {(f["check"], f["subject"]) for f in failed["lines"][0]["findings"]}
        assert ("id-mismatch", from_laptop) in checks, checks

        # lifeline-context's LIFELINE_DB left exported: named once, the database line used
        told = subprocess.run(
            [sys.executable, "-m", "lifeline", "--root", str(hub_a), "context"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "LIFELINE_DB": str(tmp_path / "old" / "ledger.db")},
        )
        assert told.returncode == 0 and "okapi" in told.stdout, told.stderr
        assert told.stderr.count("LIFELINE_DB is lifeline-context's") == 1, told.stderr
        assert "this uses line 'ledger'" in told.stderr
        # `init --agent` on a hub root: the policy file, the database line untouched
        before = asyncio.run(_line_rows(url))
        _life(hub_a, "init", "--agent", "claude-code")
        policy = json.loads((hub_a / ".lifeline" / "policy.json").read_text())
        assert policy["agents"]["claude-code"]["kinds"]["checkpoint"] == "direct", policy
        assert asyncio.run(_line_rows(url)) == before
        assert not (hub_a / ".lifeline" / "ledger.db").exists()

        status = json.loads(_mesh(hub_a, "status", "--json").stdout)
        assert "ledger" in json.dumps(status)

        # a transcript ingested on A's root is a session B's root lists: one sessions line
        _life(hub_a, "sessions", "ingest", "--tool", "claude", str(TRANSCRIPT))
        assert not (hub_a / ".lifeline" / "sessions.db").exists()
        listed = json.loads(_life(hub_b, "sessions", "list", "--json").stdout)
        assert len(listed) == 1, listed


async def _http_context(root: Path, url: str, token: str) -> str:
    trust = ssl.create_default_context(cafile=str(root / ".lifeline" / "mesh" / "ca.pem"))

    async def name_the_node(request: httpx2.Request) -> None:
        request.extensions["sni_hostname"] = MESH_NAME

    async with (
        httpx2.AsyncClient(
            verify=trust,
            headers={"Authorization": f"Bearer {token}"},
            event_hooks={"request": [name_the_node]},
        ) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        return await _context(client)


async def _context(client: Client) -> str:
    result = await client.call_tool("context", {})
    assert not result.is_error, tool_text(result)
    return tool_text(result)


async def _stdio_session(root: Path) -> tuple[str, dict[str, Any]]:
    """Over stdio on ``root``: the context, then an append the policy turns into a proposal."""
    from mcp import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lifeline_mesh", "mcp", "--root", str(root), "--agent", "claude"],
        env={"LIFELINE_AUTHOR": "dana"},
    )
    async with Client(params, cache=None) as client:
        context = await _context(client)
        wrote = await call_tool(
            client, "append", kind="decision", summary="agent proposes: quokka cache"
        )
    return context, wrote


def test_mcp_on_a_hub_root_reads_the_database_and_an_approved_write_syncs(
    pg_server: str, tmp_path: Path
) -> None:
    url = asyncio.run(fresh_database(pg_server))
    with _hub_mesh(tmp_path, url) as (hub_a, hub_b, laptop, _sync_a, sync_b):
        note = log_note(laptop, "laptop note about the walrus index")
        _mesh(laptop, "sync", sync_b, "--json")
        (hub_a / ".lifeline" / "policy.json").write_text(json.dumps({"default": "propose"}))

        context, wrote = asyncio.run(_stdio_session(hub_a))
        assert "walrus index" in context, context
        assert wrote["status"] == "proposed", wrote
        proposal = wrote["proposal"]["id"]
        approved = json.loads(_mesh(hub_a, "approve", proposal, "--json").stdout)
        entry_id = approved["entry"]["id"]

        # the approved entry is in the database: a laptop syncing with B receives it
        _mesh(laptop, "sync", sync_b, "--json")
        assert entry_id in _ids(laptop) and note in _ids(hub_b)

        # remote MCP (--http --stateless) behind either process: the same line
        issued = _mesh(hub_a, "mcp", "token", "issue", "ci-docs", "--json").stdout
        token = str(json.loads(issued)["token"])
        for root in (hub_a, hub_b):
            with mcp_http(root, "--stateless") as served:
                over_http = asyncio.run(_http_context(root, served, token))
            assert "walrus index" in over_http and "quokka cache" in over_http, root.name
