"""`context` answered from the line's memo while no process changed the line, and never
stale: real MCP server and client, the line written by other processes (the `lifeline` CLI,
a process lowering an entry's ts as a peer's earlier copy does, a peer's sync through a
running `serve`) between warm calls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from lifeline.home import Home
from tests.support.mcp_client import call_tool, mcp_client, new_project, tool_text
from tests.support.mesh_procs import SYNC_JSON, cli, serve_insecure, shared_node, wait_for_entry

pytestmark = pytest.mark.timeout(300)

EARLIER = "2020-01-02T03:04:05.000000Z"

# Another process stores an entry the line already holds, with an earlier ts (as a peer's
# copy of the same content does): no new row, the stored ts is lowered in place.
LOWER_TS = """
import asyncio, sys
from lifeline.store.sqlite import SqliteStore

async def main(path, entry_id, ts):
    async with await SqliteStore.open(path, create=False) as store:
        entry = await store.get(entry_id)
        result = await store.append_many([entry.with_ts(ts)])
        assert result.ts_lowered == (entry_id,), result

asyncio.run(main(*sys.argv[1:]))
"""


async def _context(client: Client, **args: Any) -> str:
    result = await client.call_tool("context", args)
    assert not result.is_error, tool_text(result)
    return tool_text(result)


async def _memo(client: Client) -> tuple[int, int]:
    stats = (await call_tool(client, "mesh_status"))["context_memo"]
    return int(stats["hits"]), int(stats["misses"])


def _log(root: Path, summary: str) -> str:
    out = cli("lifeline", root, "log", "--kind", "decision", "--summary", summary, "--json")
    return str(json.loads(out.stdout)["id"])


async def test_warm_context_is_from_memory_and_moves_with_every_write(tmp_path: Path) -> None:
    root = await new_project(tmp_path, None)
    first = _log(root, "Database: PostgreSQL")
    async with mcp_client(root) as client:
        before = await _context(client)
        assert "Database: PostgreSQL" in before
        assert await _memo(client) == (0, 1)
        assert await _context(client) == before
        assert await _context(client) == before
        assert await _memo(client) == (2, 1)  # the unchanged line was not read again

        # other arguments, other answers: each kept under its own
        shaped = await _context(client, format="anthropic")
        assert shaped != before and "Database: PostgreSQL" in shaped
        assert await _context(client, format="anthropic") == shaped
        assert await _memo(client) == (3, 2)

        # a new row written by another process
        _log(root, "Cache: Redis")
        after = await _context(client)
        assert "Cache: Redis" in after and "Database: PostgreSQL" in after
        assert await _memo(client) == (3, 3)
        assert "Cache: Redis" in await _context(client, format="anthropic")  # all dropped

        # no new row: the stored ts of an entry lowered in place by another process
        assert EARLIER[:16] not in after
        subprocess.run(
            [sys.executable, "-c", LOWER_TS, str(Home(root).line_path("ledger")), first, EARLIER],
            check=True,
            timeout=60,
        )
        lowered = await _context(client)
        assert EARLIER[:16] in lowered, lowered
        assert await _context(client) == lowered
        assert await _memo(client) == (4, 5)


async def test_warm_context_sees_what_a_peer_synced_into_the_running_serve(
    tmp_path: Path,
) -> None:
    ours, peer = tmp_path / "ours", tmp_path / "peer"
    line_file = shared_node(ours)
    shared_node(peer)
    _log(ours, "Database: PostgreSQL")
    synced = _log(peer, "Queue: SQS, from the peer")
    with serve_insecure(ours) as (_proc, address):
        async with mcp_client(ours) as client:
            warm = await _context(client)
            assert await _context(client) == warm and "Queue: SQS" not in warm
            # the peer's sync is written into our line by our `serve`, another process
            out = json.loads(cli("lifeline_mesh", peer, *SYNC_JSON, address).stdout)
            assert out[0]["entries_sent"] == 1, out
            wait_for_entry(line_file, synced)
            after = await _context(client)
            assert "Queue: SQS, from the peer" in after
            assert await _memo(client) == (1, 2)
