"""The MCP server end to end: `python -m lifeline_mesh mcp` spawned by the SDK's own stdio
client, against real line files; the human side through the real CLI."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent, TextResourceContents

from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome

pytestmark = pytest.mark.timeout(60)


def _run(*args: str, module: str = "lifeline_mesh") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=30
    )


async def _project(root: Path, policy: dict[str, Any] | None) -> Path:
    path = Home(root).line_path("ledger")
    path.parent.mkdir(parents=True)
    await (await SqliteStore.open(path)).close()
    if policy is not None:
        NodeHome(root).policy_path.write_text(json.dumps(policy))
    return root


@asynccontextmanager
async def _client(root: Path, agent: str = "claude") -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lifeline_mesh", "mcp", "--root", str(root), "--agent", agent],
        env={"LIFELINE_AUTHOR": "dana"},
    )
    async with Client(params, cache=None) as client:
        yield client


def _text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def _call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    return result.structured_content


async def _error(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result
    return _text(result)


async def test_append_and_read_back(tmp_path: Path) -> None:
    root = await _project(tmp_path, {"default": "direct"})
    async with _client(root) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"entry", "history", "append", "correct", "checkpoint", "mesh_status"} <= names
        assert client.instructions is not None and "`checkpoint`" in client.instructions
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["lifeline://entry/{id}"]

        out = await _call(
            client,
            "append",
            kind="decision",
            summary="Queue: SQS",
            body="FIFO is enough",
            provider="anthropic",
            model="m1",
        )
        assert out["status"] == "recorded" and out["policy_rule"] == "default"
        stored = out["entry"]
        assert (stored["agent"], stored["author"], stored["model"]) == ("claude", "dana", "m1")

        shown = await _call(client, "entry", id=stored["id"][:10])
        assert shown["id"] == stored["id"] and shown["body"] == "FIFO is enough"
        assert shown["intact"] is True and shown["children"] == []
        assert shown["signatures"] == {"signed": False, "items": []}

        history = await _call(client, "history", limit=5)
        assert [e["id"] for e in history["entries"]] == [stored["id"]]

        read = await client.read_resource(f"lifeline://entry/{stored['id']}")
        content = read.contents[0]
        assert isinstance(content, TextResourceContents)
        assert json.loads(content.text)["summary"] == "Queue: SQS"
        context = (await client.read_resource("lifeline://context")).contents[0]
        assert isinstance(context, TextResourceContents) and "Queue: SQS" in context.text

        status = await _call(client, "mesh_status")
        assert status["lines"] == [{"name": "ledger", "entries": 1, "tips": 1, "shared": False}]
        assert status["agent"] == "claude" and status["policy"].endswith("policy.json")
        assert status["pending_proposals"] == 0
        assert not (root / ".lifeline" / "mesh" / "proposals.db").exists()  # reads create nothing


async def test_policy_deny_holds_and_propose_waits_for_approval(tmp_path: Path) -> None:
    policy = {"default": "propose", "agents": {"claude": {"kinds": {"release": "deny"}}}}
    root = await _project(tmp_path, policy)
    async with _client(root) as client:
        denied = await _error(client, "append", kind="release", summary="v2.0")
        assert "denies agent 'claude' writing a 'release'" in denied
        assert "agents.claude.kinds.release" in denied

        out = await _call(
            client, "append", kind="decision", summary="Cache: none", idempotency_key="cache-1"
        )
        assert out["status"] == "proposed"
        pid = out["proposal"]["id"]
        assert (await _call(client, "history"))["entries"] == []
        pending = (await _call(client, "proposals"))["proposals"]
        assert [(p["id"], p["status"]) for p in pending] == [(pid, "pending")]

        listed = _run("proposals", "--root", str(root), "--json")
        assert listed.returncode == 0, listed.stderr
        assert [p["id"] for p in json.loads(listed.stdout)["proposals"]] == [pid]
        approved = _run("approve", pid[:8], "--root", str(root), "--by", "lead")
        assert approved.returncode == 0, approved.stderr

        entries = (await _call(client, "history"))["entries"]
        assert [(e["summary"], e["agent"], e["dedup_key"]) for e in entries] == [
            ("Cache: none", "claude", "cache-1")
        ]
        decided = (await _call(client, "proposals", status="approved"))["proposals"]
        assert decided[0]["decision"]["entry_id"] == entries[0]["id"]
        retried = await _call(
            client, "append", kind="decision", summary="Cache: none", idempotency_key="cache-1"
        )
        assert retried["status"] == "duplicate"

    again = _run("approve", pid, "--root", str(root))
    assert again.returncode == 2 and "already approved" in again.stderr
    trail = json.loads(_run("proposals", "--all", "--json", "--root", str(root)).stdout)
    assert trail["trail_problems"] == []
    assert trail["proposals"][0]["decision"]["decided_by"] == "lead"


async def test_retries_corrections_checkpoints_and_clear_errors(tmp_path: Path) -> None:
    root = await _project(tmp_path, {"default": "direct"})
    async with _client(root) as client:
        first = await _call(client, "append", kind="note", summary="n", idempotency_key="r1")
        second = await _call(client, "append", kind="note", summary="n", idempotency_key="r1")
        assert (first["status"], second["status"]) == ("recorded", "duplicate")
        assert second["entry"]["id"] == first["entry"]["id"]

        opened = await _call(client, "append", kind="open", summary="Queue: SQS vs Rabbit")
        open_id = opened["entry"]["id"]
        fix = await _call(client, "correct", ids=[first["entry"]["id"][:8]], summary="n2")
        assert fix["entry"]["kind"] == "correction"
        assert fix["entry"]["parents"] == [first["entry"]["id"]]
        cp = await _call(
            client, "checkpoint", thread=open_id[:10], next=["compare costs"], blocked=["quota"]
        )
        assert cp["entry"]["parents"] == [open_id]
        assert cp["entry"]["summary"] == "checkpoint Queue: SQS vs Rabbit: next — compare costs"
        assert cp["entry"]["body"] == (
            f"thread: {open_id}\nnext:\n  - compare costs\nblocked:\n  - quota"
        )
        assert len((await _call(client, "history", kind="note"))["entries"]) == 1

        bad_line = await _error(client, "append", kind="note", summary="x", line="nope")
        assert "line 'nope' does not exist" in bad_line and "lifeline --line nope init" in bad_line
        assert not Home(root).line_path("nope").exists()
        bad_name = await _error(client, "history", line="../etc")
        assert "line name '../etc' is not valid" in bad_name
        big = await _error(client, "append", kind="note", summary="x", body="y" * 70_000)
        assert "body is 70000 bytes, over the cap of 64000" in big
        assert "unknown kind 'memo'" in await _error(client, "append", kind="memo", summary="x")
        assert "no entry id starts with" in await _error(client, "entry", id="abcdef")
        assert "neither an entry id" in await _error(client, "history", since="yesterday")
        assert "at least one item" in await _error(client, "checkpoint", thread="main")
        assert (await _call(client, "mesh_status"))["lines"][0]["entries"] == 4


async def test_sees_writes_of_other_processes(tmp_path: Path) -> None:
    root = await _project(tmp_path, {"default": "direct"})
    async with _client(root) as client:
        assert (await _call(client, "history"))["entries"] == []
        logged = _run(
            "--root",
            str(root),
            "log",
            "--kind",
            "fix",
            "--summary",
            "from the CLI",
            module="lifeline",
        )
        assert logged.returncode == 0, logged.stderr
        made = _run("--root", str(root), "--line", "research", "init", module="lifeline")
        assert made.returncode == 0, made.stderr
        entries = (await _call(client, "history"))["entries"]
        assert [e["summary"] for e in entries] == ["from the CLI"]
        lines = [line["name"] for line in (await _call(client, "mesh_status"))["lines"]]
        assert lines == ["ledger", "research"]
        out = await _call(client, "append", kind="note", summary="r", line="research")
        assert out["entry"]["parents"] == []


async def test_broken_policy_stops_start_up_and_refuses_writes(tmp_path: Path) -> None:
    root = await _project(tmp_path, {"default": "allow"})
    started = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "mcp", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert started.returncode == 2
    assert "'allow'; use one of: direct, propose, deny" in started.stderr

    NodeHome(root).policy_path.write_text(json.dumps({"default": "direct"}))
    async with _client(root) as client:
        await _call(client, "append", kind="note", summary="ok")
        NodeHome(root).policy_path.write_text("{ not json")
        broken = await _error(client, "append", kind="note", summary="after the edit")
        assert "is not valid JSON" in broken
        assert len((await _call(client, "history"))["entries"]) == 1


async def test_writes_are_signed_by_the_node_and_verify_summarises(tmp_path: Path) -> None:
    root = await _project(tmp_path, {"default": "direct", "kinds": {"decision": "propose"}})
    async with _client(root) as client:
        # The identity is created while the server runs: the next write is signed with it.
        made = _run("init", "--root", str(root), "--json")
        assert made.returncode == 0, made.stderr
        node_id = json.loads(made.stdout)["node_id"]
        note = (await _call(client, "append", kind="note", summary="signed here"))["entry"]
        shown = await _call(client, "entry", id=note["id"])
        sigs = shown["signatures"]
        assert sigs["signed"] is True
        assert [(s["role"], s["node_id"], s["valid"], s["signer"]) for s in sigs["items"]] == [
            ("author", node_id, True, "known")
        ]
        assert sigs["items"][0]["ts"] == note["ts"]

        pid = (await _call(client, "append", kind="decision", summary="D"))["proposal"]["id"]
        approved = _run("approve", pid, "--root", str(root), "--json")
        assert approved.returncode == 0, approved.stderr
        entry_id = json.loads(approved.stdout)["entry"]["id"]
        assert (await _call(client, "entry", id=entry_id))["signatures"]["signed"] is True

        report = await _call(client, "mesh_verify", require_signed=True)
        assert report["ok"] is True and report["node_id"] == node_id
        assert [(s["line"], s["entries"], s["signed"]) for s in report["lines"]] == [
            ("ledger", 2, 2)
        ]
        conn = sqlite3.connect(Home(root).line_path("ledger"))
        with conn:
            conn.execute("UPDATE entries SET summary = 'forged' WHERE id = ?", (note["id"],))
        conn.close()
        tampered = await _call(client, "mesh_verify")
        assert tampered["ok"] is False
        line_report = tampered["lines"][0]
        assert line_report["failures"] >= 1
        assert note["id"] in {f["subject"] for f in line_report["failures_shown"]}
        assert (await _call(client, "entry", id=note["id"]))["intact"] is False
