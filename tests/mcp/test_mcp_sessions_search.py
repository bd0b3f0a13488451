"""`sessions_search` through the SDK's real stdio client, on a sessions line filled by the
real CLI from real Claude Code, Codex and Gemini transcripts: the hits are the CLI's, and
each opens with `session_show` at its offset."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from tests.support.mcp_client import call_tool
from tests.support.sessions_support import FIXTURES, run_cli

pytestmark = pytest.mark.timeout(180)


async def test_agents_search_messages_and_open_them(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    paths = [str(FIXTURES / tool) for tool in ("codex", "gemini", "claude-code")]
    done = run_cli(root, "sessions", "ingest", *paths)
    assert done.returncode == 0, done.stderr
    cli = run_cli(root, "sessions", "search", "lmstudio endpoint", "--json", "--limit", "5")
    assert cli.returncode == 0, cli.stderr
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "lifeline_mesh", "mcp", "--root", str(root)]
    )
    async with Client(params, cache=None) as client:
        found = await call_tool(client, "sessions_search", query="lmstudio endpoint", limit=5)
        expected = json.loads(cli.stdout)
        assert found["count"] == len(expected) == 5
        assert [(h["session"], h["offset"]) for h in found["hits"]] == [
            (h["session"], h["offset"]) for h in expected
        ]
        best = found["hits"][0]
        assert best["score"] == 1.0 and "lmstudio" in best["excerpt"].casefold()
        page = await call_tool(
            client, "session_show", id=best["session"], offset=best["offset"], limit=1
        )
        assert "lmstudio" in json.dumps(page["items"][0]).casefold()

        result = await client.call_tool(
            "sessions_search", {"query": "the", "tool": "gemini", "limit": 3}
        )
        gemini = result.structured_content
        assert gemini is not None and not result.is_error
        assert gemini["count"] == 3 and {h["tool"] for h in gemini["hits"]} == {"gemini"}
        calls = await call_tool(
            client, "sessions_search", query="apply_patch", role="tool_call", limit=3
        )
        assert calls["count"] and all(h["role"] == "tool_call" for h in calls["hits"])
        one = await call_tool(
            client, "sessions_search", query="the", session=best["session"][:10], limit=50
        )
        assert {h["session"] for h in one["hits"]} == {best["session"]}

        bad = await client.call_tool("sessions_search", {"query": "x", "since": "someday"})
        assert bad.is_error
        block = bad.content[0]
        assert isinstance(block, TextContent) and "is not a date" in block.text
