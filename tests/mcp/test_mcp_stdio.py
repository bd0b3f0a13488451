"""The MCP server end to end: `python -m lifeline_mesh mcp` spawned by the SDK's own stdio
client, against real line files; the human side through the real CLI."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tty
from pathlib import Path

import pytest
from mcp.types import TextResourceContents

from lifeline.home import Home
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.mcp.stdin_lines import StdinLines
from tests.support.interrupt import assert_one_sigint_stops, spawn
from tests.support.mcp_client import (
    INIT,
    call_tool,
    mcp_client,
    new_project,
    run_module,
    tool_error,
)

pytestmark = pytest.mark.timeout(60)


async def test_append_and_read_back(tmp_path: Path) -> None:
    root = await new_project(tmp_path, {"default": "direct"})
    async with mcp_client(root) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"entry", "history", "append", "correct", "checkpoint", "mesh_status"} <= names
        assert client.instructions is not None and "`checkpoint`" in client.instructions
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["lifeline://entry/{id}"]

        out = await call_tool(
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

        shown = await call_tool(client, "entry", id=stored["id"][:10])
        assert shown["id"] == stored["id"] and shown["body"] == "FIFO is enough"
        assert shown["intact"] is True and shown["children"] == []
        assert shown["signatures"] == {"signed": False, "items": []}

        history = await call_tool(client, "history", limit=5)
        assert [e["id"] for e in history["entries"]] == [stored["id"]]

        read = await client.read_resource(f"lifeline://entry/{stored['id']}")
        content = read.contents[0]
        assert isinstance(content, TextResourceContents)
        assert json.loads(content.text)["summary"] == "Queue: SQS"
        context = (await client.read_resource("lifeline://context")).contents[0]
        assert isinstance(context, TextResourceContents) and "Queue: SQS" in context.text

        status = await call_tool(client, "mesh_status")
        assert status["lines"] == [{"name": "ledger", "entries": 1, "tips": 1, "shared": False}]
        assert status["agent"] == "claude" and status["policy"].endswith("policy.json")
        assert status["pending_proposals"] == 0
        assert not (root / ".lifeline" / "mesh" / "proposals.db").exists()  # reads create nothing


async def test_policy_deny_holds_and_propose_waits_for_approval(tmp_path: Path) -> None:
    policy = {"default": "propose", "agents": {"claude": {"kinds": {"release": "deny"}}}}
    root = await new_project(tmp_path, policy)
    async with mcp_client(root) as client:
        denied = await tool_error(client, "append", kind="release", summary="v2.0")
        assert "denies agent 'claude' writing a 'release'" in denied
        assert "agents.claude.kinds.release" in denied

        out = await call_tool(
            client, "append", kind="decision", summary="Cache: none", idempotency_key="cache-1"
        )
        assert out["status"] == "proposed"
        pid = out["proposal"]["id"]
        assert (await call_tool(client, "history"))["entries"] == []
        pending = (await call_tool(client, "proposals"))["proposals"]
        assert [(p["id"], p["status"]) for p in pending] == [(pid, "pending")]

        listed = run_module("proposals", "--root", str(root), "--json")
        assert listed.returncode == 0, listed.stderr
        assert [p["id"] for p in json.loads(listed.stdout)["proposals"]] == [pid]
        approved = run_module("approve", pid[:8], "--root", str(root), "--by", "lead")
        assert approved.returncode == 0, approved.stderr

        entries = (await call_tool(client, "history"))["entries"]
        assert [(e["summary"], e["agent"], e["dedup_key"]) for e in entries] == [
            ("Cache: none", "claude", "cache-1")
        ]
        decided = (await call_tool(client, "proposals", status="approved"))["proposals"]
        assert decided[0]["decision"]["entry_id"] == entries[0]["id"]
        retried = await call_tool(
            client, "append", kind="decision", summary="Cache: none", idempotency_key="cache-1"
        )
        assert retried["status"] == "duplicate"

    again = run_module("approve", pid, "--root", str(root))
    assert again.returncode == 2 and "already approved" in again.stderr
    trail = json.loads(run_module("proposals", "--all", "--json", "--root", str(root)).stdout)
    assert trail["trail_problems"] == []
    assert trail["proposals"][0]["decision"]["decided_by"] == "lead"


async def test_retries_corrections_checkpoints_and_clear_errors(tmp_path: Path) -> None:
    root = await new_project(tmp_path, {"default": "direct"})
    async with mcp_client(root) as client:
        first = await call_tool(client, "append", kind="note", summary="n", idempotency_key="r1")
        second = await call_tool(client, "append", kind="note", summary="n", idempotency_key="r1")
        assert (first["status"], second["status"]) == ("recorded", "duplicate")
        assert second["entry"]["id"] == first["entry"]["id"]

        opened = await call_tool(client, "append", kind="open", summary="Queue: SQS vs Rabbit")
        open_id = opened["entry"]["id"]
        fix = await call_tool(client, "correct", ids=[first["entry"]["id"][:8]], summary="n2")
        assert fix["entry"]["kind"] == "correction"
        assert fix["entry"]["parents"] == [first["entry"]["id"]]
        cp = await call_tool(
            client, "checkpoint", thread=open_id[:10], next=["compare costs"], blocked=["quota"]
        )
        assert cp["entry"]["parents"] == [open_id]
        assert cp["entry"]["summary"] == "checkpoint Queue: SQS vs Rabbit: next — compare costs"
        assert cp["entry"]["body"] == (
            f"thread: {open_id}\nnext:\n  - compare costs\nblocked:\n  - quota"
        )
        assert len((await call_tool(client, "history", kind="note"))["entries"]) == 1

        bad_line = await tool_error(client, "append", kind="note", summary="x", line="nope")
        assert "line 'nope' does not exist" in bad_line and "lifeline --line nope init" in bad_line
        assert not Home(root).line_path("nope").exists()
        bad_name = await tool_error(client, "history", line="../etc")
        assert "line name '../etc' is not valid" in bad_name
        big = await tool_error(client, "append", kind="note", summary="x", body="y" * 70_000)
        assert "body is 70000 bytes, over the cap of 64000" in big
        assert "unknown kind 'memo'" in await tool_error(client, "append", kind="memo", summary="x")
        assert "no entry id starts with" in await tool_error(client, "entry", id="abcdef")
        assert "neither an entry id" in await tool_error(client, "history", since="yesterday")
        assert "at least one item" in await tool_error(client, "checkpoint", thread="main")
        assert (await call_tool(client, "mesh_status"))["lines"][0]["entries"] == 4


async def test_sees_writes_of_other_processes(tmp_path: Path) -> None:
    root = await new_project(tmp_path, {"default": "direct"})
    async with mcp_client(root) as client:
        assert (await call_tool(client, "history"))["entries"] == []
        logged = run_module(
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
        made = run_module("--root", str(root), "--line", "research", "init", module="lifeline")
        assert made.returncode == 0, made.stderr
        entries = (await call_tool(client, "history"))["entries"]
        assert [e["summary"] for e in entries] == ["from the CLI"]
        lines = [line["name"] for line in (await call_tool(client, "mesh_status"))["lines"]]
        assert lines == ["ledger", "research"]
        out = await call_tool(client, "append", kind="note", summary="r", line="research")
        assert out["entry"]["parents"] == []


async def test_broken_policy_stops_start_up_and_refuses_writes(tmp_path: Path) -> None:
    root = await new_project(tmp_path, {"default": "allow"})
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
    async with mcp_client(root) as client:
        await call_tool(client, "append", kind="note", summary="ok")
        NodeHome(root).policy_path.write_text("{ not json")
        broken = await tool_error(client, "append", kind="note", summary="after the edit")
        assert "is not valid JSON" in broken
        assert len((await call_tool(client, "history"))["entries"]) == 1


async def test_writes_are_signed_by_the_node_and_verify_summarises(tmp_path: Path) -> None:
    root = await new_project(tmp_path, {"default": "direct", "kinds": {"decision": "propose"}})
    async with mcp_client(root) as client:
        # The identity is created while the server runs: the next write is signed with it.
        made = run_module("init", "--root", str(root), "--json")
        assert made.returncode == 0, made.stderr
        node_id = json.loads(made.stdout)["node_id"]
        note = (await call_tool(client, "append", kind="note", summary="signed here"))["entry"]
        shown = await call_tool(client, "entry", id=note["id"])
        sigs = shown["signatures"]
        assert sigs["signed"] is True
        assert [(s["role"], s["node_id"], s["valid"], s["signer"]) for s in sigs["items"]] == [
            ("author", node_id, True, "known")
        ]
        assert sigs["items"][0]["ts"] == note["ts"]

        pid = (await call_tool(client, "append", kind="decision", summary="D"))["proposal"]["id"]
        approved = run_module("approve", pid, "--root", str(root), "--json")
        assert approved.returncode == 0, approved.stderr
        entry_id = json.loads(approved.stdout)["entry"]["id"]
        assert (await call_tool(client, "entry", id=entry_id))["signatures"]["signed"] is True

        report = await call_tool(client, "mesh_verify", require_signed=True)
        assert report["ok"] is True and report["node_id"] == node_id
        assert [(s["line"], s["entries"], s["signed"]) for s in report["lines"]] == [
            ("ledger", 2, 2)
        ]
        conn = sqlite3.connect(Home(root).line_path("ledger"))
        with conn:
            conn.execute("UPDATE entries SET summary = 'forged' WHERE id = ?", (note["id"],))
        conn.close()
        tampered = await call_tool(client, "mesh_verify")
        assert tampered["ok"] is False
        line_report = tampered["lines"][0]
        assert line_report["failures"] >= 1
        assert note["id"] in {f["subject"] for f in line_report["failures_shown"]}
        assert (await call_tool(client, "entry", id=note["id"]))["intact"] is False


async def test_one_ctrl_c_stops_the_server_while_the_client_keeps_stdin_open(
    tmp_path: Path,
) -> None:
    # The SDK read stdin in a worker thread that a cancelled server waited for: until the
    # client's next line, so ^C never stopped it (only SIGKILL did).
    root = await new_project(tmp_path, {"default": "direct"})
    proc = spawn("lifeline_mesh", root, "mcp")
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(INIT).encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1  # serving, waiting for the next line
    assert_one_sigint_stops(proc, "lifeline-mesh")


async def test_stdin_from_a_regular_file_is_served(tmp_path: Path) -> None:
    # The event loop cannot watch a regular file; the SDK's own reader serves it.
    root = await new_project(tmp_path, {"default": "direct"})
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps(INIT))  # no line end: the end of the file ends it
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "lifeline_mesh", "mcp", "--root", str(root)],
            stdin=stdin,
            capture_output=True,
            timeout=30,
        )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == [1]


async def test_stdin_lines_split_reads_into_lines_and_cancel_at_once() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        lines = StdinLines(read_end)
        os.write(write_end, b'{"a": 1}\n{"b": "\xc3')  # a character split across reads
        assert await anext(lines) == '{"a": 1}\n'
        reading = asyncio.ensure_future(anext(lines))
        await asyncio.sleep(0)  # let it reach the wait for more input
        assert not reading.done()
        long = b'\xa9", "c": "' + b"x" * 200_000 + b'"}\n\xff last'  # more than a pipe holds
        await asyncio.to_thread(os.write, write_end, long)
        assert await reading == '{"b": "\u00e9", "c": "' + "x" * 200_000 + '"}\n'

        waiting = asyncio.ensure_future(anext(lines))  # "\xff last" has no line end yet
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not asyncio.get_running_loop().remove_reader(read_end)  # nothing left watching

        os.close(write_end)
        write_end = -1
        assert [line async for line in lines] == ["\ufffd last"]  # the end ends the last line
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


async def test_a_terminal_on_stdin_is_left_blocking(tmp_path: Path) -> None:
    # Non-blocking mode belongs to the open terminal, which the shell shares with the server.
    root = await new_project(tmp_path, {"default": "direct"})
    controller, terminal = os.openpty()
    try:
        tty.setraw(terminal)  # no echo, so the controller side reads nothing back
        proc = subprocess.Popen(
            [sys.executable, "-m", "lifeline_mesh", "mcp", "--root", str(root)],
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None
        os.write(controller, json.dumps(INIT).encode() + b"\n")
        assert json.loads(proc.stdout.readline())["id"] == 1
        assert not os.get_blocking(terminal)  # read on the event loop while serving
        assert_one_sigint_stops(proc, "lifeline-mesh")
        assert os.get_blocking(terminal)
    finally:
        os.close(controller)
        os.close(terminal)
