"""`sessions_list` and `session_show` through the SDK's real stdio client, on a sessions
line filled by the real CLI from the real transcripts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from tests.support.mcp_client import call_tool
from tests.support.sessions_support import FIXTURES, run_cli

pytestmark = pytest.mark.timeout(120)


async def test_agents_list_and_page_through_sessions(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    done = run_cli(root, "sessions", "ingest", str(FIXTURES / "codex"), str(FIXTURES / "gemini"))
    assert done.returncode == 0, done.stderr
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "lifeline_mesh", "mcp", "--root", str(root)]
    )
    async with Client(params, cache=None) as client:
        listed = await call_tool(client, "sessions_list")
        assert listed["count"] == 3
        crashed = await call_tool(client, "sessions_list", status="crashed")
        (codex,) = crashed["sessions"]
        assert codex["tool"] == "codex" and codex["status"]["reason"]
        assert codex["scope"] == "git:github.com/acidicsoil/chatbot-ui:"
        first = await call_tool(client, "session_show", id=codex["id"][:10], limit=50)
        assert first["total"] > 150 and first["more"] is True and len(first["items"]) == 50
        rest = await call_tool(client, "session_show", id=codex["native_id"], offset=150, limit=100)
        assert rest["more"] is False and len(rest["items"]) == first["total"] - 150
        assert all(i["prov"]["sha256"] and i["prov"]["lines"] for i in rest["items"])
        missing = await client.call_tool("session_show", {"id": "ffffffffff"})
        assert missing.is_error
        block = missing.content[0]
        assert isinstance(block, TextContent) and "no session 'ffffffffff'" in block.text


async def test_agents_find_lost_work_and_get_its_bundle(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    paths = [str(FIXTURES / "codex"), str(FIXTURES / "claude-code")]
    done = run_cli(root, "sessions", "ingest", *paths)
    assert done.returncode == 0, done.stderr
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "lifeline_mesh", "mcp", "--root", str(root)]
    )
    async with Client(params, cache=None) as client:
        lost = await call_tool(client, "sessions_unfinished")
        assert lost["count"] >= 1 and all(s["state"] for s in lost["sessions"])
        codex = next(s for s in lost["sessions"] if s["tool"] == "codex")
        assert codex["state"] == "crashed" and len(codex["outstanding"]["outstanding"]) == 2
        assert codex["unconfirmed_edits"] == [
            "components/chat/chat-helpers/index.ts (no test, build or commit passed after it)"
        ]
        assert codex["last_failure"].endswith("→ (failed with no output)")
        # the smallest that fits: every section named, each fact clipped or omitted (the
        # start and end commits and the last failure of decision 0054 take ~120 B of it)
        small = await call_tool(client, "session_bundle", id=codex["id"], budget_tokens=500)
        assert small["ready"] is True and small["bundle"].startswith("<!-- lifeline")
        assert (len(small["bundle"].encode()) + 3) // 4 <= 500 and "…" in small["bundle"]
        data = await call_tool(client, "session_bundle", id=codex["id"], format="json")
        assert data["bundle"]["ready"] and data["bundle"]["slices"][0]["kind"] == "acceptance"
        by_scope = await call_tool(client, "session_bundle", scope=codex["scope"], format="json")
        assert by_scope["bundle"]["key"] == data["bundle"]["key"]
        listed = await call_tool(client, "sessions_list")
        never = next(s for s in listed["sessions"] if s["turns"] == 0 and s["item_count"])
        refused = await call_tool(client, "session_bundle", id=never["id"])
        assert refused["ready"] is False and "no real user turn" in refused["why"]
        assert "## Acceptance" in refused["acceptance"] and "bundle" not in refused
        empty = await call_tool(client, "session_bundle", scope="path:/nowhere")
        assert empty["ready"] is False and "no sessions in scope" in empty["why"]
