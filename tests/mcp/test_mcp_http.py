"""Remote MCP: `lifeline-mesh mcp --http` as a real process on 127.0.0.1 (TLS with the node's
mesh certificate), reached by the SDK's own streamable-HTTP client with tokens issued by the
real CLI: what each role may do, and every refusal with its reason."""

from __future__ import annotations

import datetime as dt
import json
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.mcp.tokens import TokenBook, TokenSpec
from tests.support.mcp_client import INIT, call_tool, tool_text
from tests.support.mesh_procs import cli

pytestmark = pytest.mark.timeout(120)

MESH_NAME = "lifeline-mesh"  # the DNS name every mesh certificate carries


def _node(root: Path, *, mesh: bool = True) -> Path:
    root.mkdir()
    cli("lifeline_mesh", root, "init", *(("--new-mesh", "team") if mesh else ()))
    cli("lifeline", root, "init")
    NodeHome(root).policy_path.write_text(
        json.dumps({"default": "direct", "kinds": {"note": "propose"}})
    )
    return root


def _issue(root: Path, name: str, *args: str) -> str:
    return cli("lifeline_mesh", root, "mcp", "token", "issue", name, *args).stdout.strip()


@contextmanager
def _serving(root: Path, *args: str) -> Iterator[str]:
    """A running `mcp --http` on a free port; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "mcp", "--root", str(root), "--http", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving MCP on "), (line, proc.stderr and proc.stderr.read())
        yield line.split()[3]
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def _http(root: Path, token: str | None) -> httpx2.AsyncClient:
    """A client that trusts only the mesh CA and checks the mesh certificate's name."""
    trust = ssl.create_default_context(cafile=str(root / ".lifeline" / "mesh" / "ca.pem"))

    async def name_the_node(request: httpx2.Request) -> None:
        request.extensions["sni_hostname"] = MESH_NAME

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.AsyncClient(
        verify=trust, headers=headers, event_hooks={"request": [name_the_node]}
    )


@asynccontextmanager
async def _client(root: Path, url: str, token: str) -> AsyncIterator[Client]:
    async with (
        _http(root, token) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        yield client


async def _refusal(root: Path, url: str, token: str | None) -> tuple[int, str]:
    """What the server answers an MCP initialize sent with ``token``."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    async with _http(root, token) as http:
        answer = await http.post(
            url, json=init, headers={"Accept": "application/json, text/event-stream"}
        )
    assert answer.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    return answer.status_code, str(answer.json()["error_description"])


async def test_reader_reads_member_writes_under_the_policy(tmp_path: Path) -> None:
    root = _node(tmp_path / "hub")
    reader = _issue(root, "ci-read")
    member = _issue(root, "ci-write", "--role", "member", "--agent", "ci")
    with _serving(root, "127.0.0.1:0") as url:
        assert url.startswith("https://127.0.0.1:")
        async with _client(root, url, member) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"context", "append", "checkpoint", "mesh_status"} <= names
            written = await call_tool(client, "append", kind="decision", summary="Queue: SQS")
            assert written["status"] == "recorded" and written["policy_rule"] == "default"
            entry = written["entry"]
            assert (entry["agent"], entry["author"]) == ("ci", "token:ci-write")
            shown = await call_tool(client, "entry", id=entry["id"])
            assert shown["signatures"]["signed"] is True  # signed by the node, as on stdio
            proposed = await call_tool(client, "append", kind="note", summary="maybe Kafka")
            assert proposed["status"] == "proposed"  # the write policy applies over HTTP too
            assert proposed["proposal"]["draft"]["agent"] == "ci"
        async with _client(root, url, reader) as client:
            history = await call_tool(client, "history", limit=5)
            assert [e["summary"] for e in history["entries"]] == ["Queue: SQS"]
            assert (await call_tool(client, "mesh_status"))["agent"] == "ci-read"
            context = await client.call_tool("context", {})
            assert "Queue: SQS" in tool_text(context)
            refused = await client.call_tool("append", {"kind": "decision", "summary": "x"})
            assert refused.is_error
            assert "token 'ci-read' has role 'reader', which may not write" in tool_text(refused)
            refused = await client.call_tool("checkpoint", {"next": ["y"]})
            assert refused.is_error and "may not write" in tool_text(refused)
            # an error names the project's folder for a user at its terminal; a client
            # over HTTP is told "." instead
            missing = await client.call_tool("sessions_search", {"query": "x"})
            assert missing.is_error and "does not exist under ." in tool_text(missing)
            assert str(root) not in tool_text(missing)
    listed = json.loads(cli("lifeline_mesh", root, "mcp", "token", "list", "--json").stdout)
    assert {t["name"]: t["role"] for t in listed["tokens"]} == {
        "ci-write": "member",
        "ci-read": "reader",
    }
    assert member not in (root / ".lifeline" / "mesh" / "mcp-tokens.json").read_text()


async def test_wrong_expired_and_revoked_tokens_get_401_with_the_reason(tmp_path: Path) -> None:
    root = _node(tmp_path / "hub")
    other = _node(tmp_path / "other")
    member = _issue(root, "ci", "--role", "member")
    foreign = _issue(other, "elsewhere")
    node_id = NodeIdentity.load(NodeHome(root).key_path).node_id
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    expired, _ = TokenBook(NodeHome(root), node_id).issue(
        TokenSpec("old", ttl=dt.timedelta(hours=1)), now=long_ago
    )
    with _serving(root, "127.0.0.1:0") as url:
        async with _client(root, url, member) as client:
            await call_tool(client, "mesh_status")
        cases = {
            None: "no bearer token",
            "hunter2": "is not an MCP token of lifeline-mesh",
            member[:-4] + "AAAA": "does not match (altered or mistyped)",
            foreign: "was issued by node",
            expired: "token 'old' expired at",
        }
        for token, reason in cases.items():
            status, message = await _refusal(root, url, token)
            assert status == 401 and reason in message, (token, message)
        with pytest.raises(ExceptionGroup) as refused:  # the SDK's client cannot initialize
            async with _client(root, url, expired) as client:
                pass
        assert refused.group_contains(MCPError, depth=None)

        done = cli("lifeline_mesh", root, "mcp", "token", "revoke", "ci")
        assert "revoked 1 token named 'ci'" in done.stdout
        status, message = await _refusal(root, url, member)  # no restart needed
        assert status == 401 and "token 'ci' was revoked at" in message
        assert "ask the node's owner for a new one" in message


def test_plain_http_off_loopback_and_tls_without_a_certificate_refused(tmp_path: Path) -> None:
    root = _node(tmp_path / "hub")
    start = [sys.executable, "-m", "lifeline_mesh", "mcp", "--root", str(root), "--http"]
    off = subprocess.run([*start, "0.0.0.0:0", "--insecure"], capture_output=True, text=True)
    assert off.returncode == 2 and off.stdout == ""
    assert off.stderr.strip().splitlines() == [
        "lifeline-mesh: error: --insecure refused for 0.0.0.0:0: plain HTTP is only allowed on "
        "loopback (127.0.0.1, ::1); drop --insecure to serve TLS (bearer tokens would cross "
        "the network in the clear)"
    ]
    lone = _node(tmp_path / "lone", mesh=False)  # an identity, but no mesh certificate
    bare = subprocess.run(
        [*start[:5], str(lone), "--http", "127.0.0.1:0"], capture_output=True, text=True
    )
    assert bare.returncode == 2 and "TLS needs a certificate" in bare.stderr
    assert len(bare.stderr.strip().splitlines()) == 1


async def test_plain_http_on_loopback_still_needs_a_token(tmp_path: Path) -> None:
    root = _node(tmp_path / "hub", mesh=False)
    reader = _issue(root, "local")
    with _serving(root, "127.0.0.1:0", "--insecure") as url:
        assert url.startswith("http://127.0.0.1:")
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {reader}"}) as http,
            Client(streamable_http_client(url, http_client=http), cache=None) as client,
        ):
            assert (await call_tool(client, "mesh_status"))["agent"] == "local"
        async with httpx2.AsyncClient() as http:
            answer = await http.post(url, json={})
        assert answer.status_code == 401 and "no bearer token" in answer.text


def test_token_commands_refuse_what_they_cannot_do(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    no_id = cli("lifeline_mesh", root, "mcp", "token", "issue", "x", check=False)
    assert no_id.returncode == 2 and "has no node identity" in no_id.stderr
    root = _node(tmp_path / "hub")
    _issue(root, "ci")
    again = cli("lifeline_mesh", root, "mcp", "token", "issue", "ci", check=False)
    assert again.returncode == 2 and "an active MCP token named 'ci' exists" in again.stderr
    for bad, why in (
        (("bad name!",), "must be 1-64 letters"),
        (("y", "--ttl", "900d"), "at most 365d"),
        (("y", "--ttl", "soon"), "is not like 10m"),
    ):
        done = cli("lifeline_mesh", root, "mcp", "token", "issue", *bad, check=False)
        assert done.returncode == 2 and why in done.stderr, done.stderr
    gone = cli("lifeline_mesh", root, "mcp", "token", "revoke", "nope", check=False)
    assert gone.returncode == 2 and "no unrevoked MCP token named 'nope'" in gone.stderr
    assert (root / ".lifeline" / "mesh" / "mcp-tokens.json").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("stateless", [True, False])
async def test_stateless_serving_lets_any_process_answer_a_session(
    tmp_path: Path, stateless: bool
) -> None:
    """Behind a load balancer a client's requests may reach different hub processes: with
    --stateless a process answers a request whose session began at another; without it
    that process refuses (it holds no such session)."""
    root = _node(tmp_path / "hub")
    token = _issue(root, "ci-read")
    extra = ("--stateless",) if stateless else ()
    accept = {"Accept": "application/json, text/event-stream"}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "mesh_status", "arguments": {}},
    }
    with (
        _serving(root, "127.0.0.1:0", *extra) as first,
        _serving(root, "127.0.0.1:0", *extra) as second,
    ):
        async with _http(root, token) as http:
            opened = await http.post(first, json=INIT, headers=accept)
            assert opened.status_code == 200, opened.text
            headers = dict(accept)
            if "mcp-session-id" in opened.headers:
                headers["mcp-session-id"] = opened.headers["mcp-session-id"]
            assert ("mcp-session-id" in headers) is not stateless
            answer = await http.post(second, json=call, headers=headers)
    if stateless:
        assert answer.status_code == 200, answer.text
        data = [ln[len("data: ") :] for ln in answer.text.splitlines() if ln.startswith("data: ")]
        result = json.loads(data[0] if data else answer.text)["result"]
        assert not result.get("isError"), result
        assert result["structuredContent"]["agent"] == "ci-read", result
    else:
        assert answer.status_code in (400, 404), answer.text
