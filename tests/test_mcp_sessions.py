"""`sessions_list` and `session_show` through the SDK's real stdio client, on a sessions
line filled by the real CLI from the real transcripts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from tests.sessions_support import FIXTURES, run_cli

pytestmark = pytest.mark.timeout(120)


async def _call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_agents_list_and_page_through_sessions(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    done = run_cli(root, "sessions", "ingest", str(FIXTURES / "codex"), str(FIXTURES / "gemini"))
    assert done.returncode == 0, done.stderr
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "lifeline_mesh", "mcp", "--root", str(root)]
    )
    async with Client(params, cache=None) as client:
        listed = await _call(client, "sessions_list")
        assert listed["count"] == 3
        crashed = await _call(client, "sessions_list", status="crashed")
        (codex,) = crashed["sessions"]
        assert codex["tool"] == "codex" and codex["status"]["reason"]
        assert codex["scope"] == "git:github.com/acidicsoil/chatbot-ui:"
        first = await _call(client, "session_show", id=codex["id"][:10], limit=50)
        assert first["total"] > 150 and first["more"] is True and len(first["items"]) == 50
        rest = await _call(client, "session_show", id=codex["native_id"], offset=150, limit=100)
        assert rest["more"] is False and len(rest["items"]) == first["total"] - 150
        assert all(i["prov"]["sha256"] and i["prov"]["lines"] for i in rest["items"])
        missing = await client.call_tool("session_show", {"id": "ffffffffff"})
        assert missing.is_error
        block = missing.content[0]
        assert isinstance(block, TextContent) and "no session 'ffffffffff'" in block.text
