"""The MCP server spawned by the SDK's own stdio client, on a project with real line files,
and the calls the MCP tests make through it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome

__all__ = [
    "INIT",
    "call_tool",
    "mcp_client",
    "new_project",
    "run_module",
    "tool_error",
    "tool_text",
]

# A raw client's first request, for tests that write JSON-RPC lines to `mcp` themselves.
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


def run_module(*args: str, module: str = "lifeline_mesh") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=30
    )


async def new_project(root: Path, policy: dict[str, Any] | None) -> Path:
    path = Home(root).line_path("ledger")
    path.parent.mkdir(parents=True)
    await (await SqliteStore.open(path)).close()
    if policy is not None:
        NodeHome(root).policy_path.write_text(json.dumps(policy))
    return root


@asynccontextmanager
async def mcp_client(root: Path, agent: str = "claude") -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lifeline_mesh", "mcp", "--root", str(root), "--agent", agent],
        env={"LIFELINE_AUTHOR": "dana"},
    )
    async with Client(params, cache=None) as client:
        yield client


def tool_text(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def call_tool(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, tool_text(result)
    assert result.structured_content is not None
    return result.structured_content


async def tool_error(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result
    return tool_text(result)
