"""The truth over MCP (context, brief, recall, resume) through the SDK's stdio client, and
an entry written over MCP on one node reaching a second node through `lifeline-mesh sync`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.types import TextContent, TextResourceContents

from tests.support.mcp_client import call_tool, mcp_client, new_project, run_module, tool_error

pytestmark = pytest.mark.timeout(120)


async def _text(client: Any, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert not result.is_error, block.text
    return block.text


async def test_context_brief_recall_resume(tmp_path: Path) -> None:
    root = await new_project(tmp_path, {"default": "direct"})
    async with mcp_client(root) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"context", "brief", "recall", "resume", "mesh_verify"} <= names
        await call_tool(
            client,
            "append",
            kind="decision",
            summary="Database: PostgreSQL",
            body="Audit trail needs cross-row ACID transactions.",
        )
        opened = await call_tool(client, "append", kind="open", summary="Queue: SQS or Rabbit")
        open_id = opened["entry"]["id"]
        await call_tool(
            client,
            "checkpoint",
            thread="main",
            done=["wrote the harness"],
            next=["run the load test"],
            tried=["SQS FIFO: 300 msg/s cap"],
        )
        await call_tool(client, "checkpoint", thread=open_id, next=["compare costs"])

        text = await _text(client, "context")
        cli = run_module("--root", str(root), "context", module="lifeline")
        assert cli.returncode == 0, cli.stderr
        assert text == cli.stdout  # one assembly, same bytes through either front end
        assert "Database: PostgreSQL" in text and "run the load test" in text
        resource = (await client.read_resource("lifeline://context")).contents[0]
        assert isinstance(resource, TextResourceContents) and resource.text == text

        shaped = json.loads(await _text(client, "context", format="anthropic", budget=2000))
        assert shaped["system"][0]["cache_control"] == {"type": "ephemeral"}

        brief = await _text(client, "brief", thread=open_id[:10])
        assert brief.startswith(f"# Brief — thread {open_id}")
        assert "compare costs" in brief and "run the load test" not in brief

        hits = await call_tool(client, "recall", query="ACID audit trail")
        assert [h["summary"] for h in hits["hits"]][:1] == ["Database: PostgreSQL"]
        none = await call_tool(client, "recall", query="kubernetes helm chart")
        assert none["hits"] == [] and none["abstained"] is True

        resume = await call_tool(client, "resume")
        by_thread = {t["thread"]: t["blocks"] for t in resume["threads"]}
        assert by_thread["main"]["next"] == ["run the load test"]
        assert by_thread[open_id]["next"] == ["compare costs"]

        both = await tool_error(client, "context", budget=5000, budget_tokens=900)
        assert "pass only one of them" in both
        assert "too small" in await tool_error(client, "context", budget=10)
        assert "no thread 'nowhere'" in await tool_error(client, "brief", thread="nowhere")
        assert "query is empty" in await tool_error(client, "recall", query="  ")


@pytest.mark.slow
async def test_mcp_write_reaches_a_second_node_through_sync(tmp_path: Path) -> None:
    """A joins B's mesh; an agent on A appends over MCP; after `sync` over mutual TLS the
    entry is on B, signed by A (author) and witnessed by B (its state), as B's own MCP
    server shows."""
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        await new_project(root, {"default": "direct"})
        assert run_module("share", "ledger", "--root", str(root)).returncode == 0
    made = run_module("init", "--new-mesh", "team", "--root", str(b))
    assert made.returncode == 0, made.stderr
    server = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "serve", "--root", str(b)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        # The server prints its sync address, then its join address, once each is bound.
        address = server.stdout.readline().split()[-1]
        join_address = server.stdout.readline().split()[-1]
        token = run_module("invite", "--address", join_address, "--root", str(b)).stdout.strip()
        joined = run_module("join", token, "--root", str(a))
        assert joined.returncode == 0, joined.stderr
        a_id = run_module("id", "--root", str(a)).stdout.strip()
        b_id = run_module("id", "--root", str(b)).stdout.strip()
        async with mcp_client(a, agent="laptop-a") as client_a, mcp_client(b) as client_b:
            written = await call_tool(client_a, "append", kind="decision", summary="Made on A")
            entry_id = written["entry"]["id"]
            assert (await call_tool(client_b, "history"))["entries"] == []
            synced = run_module("sync", address, "--root", str(a), "--json")
            assert synced.returncode == 0, synced.stderr
            seen = (await call_tool(client_b, "history"))["entries"]
            assert [(e["id"], e["agent"]) for e in seen] == [(entry_id, "laptop-a")]
            assert "Made on A" in await _text(client_b, "context")
            sigs = (await call_tool(client_b, "entry", id=entry_id))["signatures"]
            assert sigs["signed"] is True
            by_role = {(s["role"], s["node_id"], s["valid"]) for s in sigs["items"]}
            # B witnessed it with the one state it signed after admitting it (decision 0015)
            assert ("author", a_id, True) in by_role and ("state", b_id, True) in by_role
            assert (await call_tool(client_b, "mesh_verify"))["ok"] is True
    finally:
        server.terminate()
        server.wait(timeout=30)
