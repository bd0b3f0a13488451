"""One MCP token book for every process of a hub node (decision 0032): a token issued
through hub process A opens a real `mcp --http` session on process B (TLS with B's own
mesh certificate, the SDK's streamable-HTTP client), and once revoked through B it is
refused by A, with the reason, within the state's 2 s cache."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.hub_roots import mcp_http
from tests.support.mcp_client import call_tool
from tests.support.mesh_procs import cli
from tests.support.pg_server import fresh_database

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

MESH_NAME = "lifeline-mesh"  # the DNS name every mesh certificate carries


def _hub(root: Path, url: str, *extra: str) -> str:
    root.mkdir()
    made = cli("lifeline_mesh", root, "hub", "init", "--store", url, "--json", *extra)
    cli("lifeline", root, "init")
    return str(json.loads(made.stdout)["node_id"])


def _http(root: Path, token: str) -> httpx2.AsyncClient:
    trust = ssl.create_default_context(cafile=str(root / ".lifeline" / "mesh" / "ca.pem"))

    async def name_the_node(request: httpx2.Request) -> None:
        request.extensions["sni_hostname"] = MESH_NAME

    return httpx2.AsyncClient(
        verify=trust,
        headers={"Authorization": f"Bearer {token}"},
        event_hooks={"request": [name_the_node]},
    )


async def _status(root: Path, url: str, token: str) -> dict[str, object]:
    async with (
        _http(root, token) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        return await call_tool(client, "mesh_status")


async def _refusal(root: Path, url: str, token: str) -> tuple[int, str]:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    async with _http(root, token) as http:
        answer = await http.post(
            url, json=init, headers={"Accept": "application/json, text/event-stream"}
        )
    if answer.status_code != 401:
        return answer.status_code, ""
    return answer.status_code, str(answer.json()["error_description"])


async def test_a_token_issued_through_one_process_works_on_the_other(
    pg_server: str, tmp_path: Path
) -> None:
    url = await fresh_database(pg_server)
    hub_a, hub_b = tmp_path / "hub-a", tmp_path / "hub-b"
    node_id = _hub(hub_a, url, "--new-mesh", "team")
    assert _hub(hub_b, url) == node_id
    issued = cli("lifeline_mesh", hub_a, "mcp", "token", "issue", "ci-docs", "--json").stdout
    token = str(json.loads(issued)["token"])
    with mcp_http(hub_b) as on_b, mcp_http(hub_a) as on_a:
        status = await _status(hub_b, on_b, token)  # issued through A, served by B
        assert status["agent"] == "ci-docs" and status["node_id"] == node_id
        cli("lifeline_mesh", hub_b, "mcp", "token", "revoke", "ci-docs")
        deadline = time.monotonic() + 20
        while True:
            code, reason = await _refusal(hub_a, on_a, token)
            if code == 401:
                break
            assert time.monotonic() < deadline, "the revocation through B never reached A"
            await asyncio.sleep(0.5)
        assert "revoked at" in reason, reason
