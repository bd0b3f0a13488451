"""A hostile web page and a flood of idle sockets against a real `lifeline-mesh mcp --http
--insecure` process (plain HTTP on loopback, e.g. behind a TLS proxy on the same host).

Even holding a valid token (a page could be served one by mistake, or a proxy could add
it), a request a browser sends for a rebound name (foreign ``Host``) or from another page
(foreign ``Origin``) is refused before MCP sees it; 2,000 idle sockets do not stop it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.http_flood import (
    at_most_fds,
    browser_request,
    idle_flood,
    wait_until_open_at_most,
)
from tests.support.mcp_client import INIT
from tests.support.mesh_procs import cli

pytestmark = pytest.mark.timeout(180)

INIT_BODY = json.dumps(INIT).encode()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("hostile-mcp") / "node"
    root.mkdir()
    cli("lifeline_mesh", root, "init")
    cli("lifeline", root, "init")
    token = cli("lifeline_mesh", root, "mcp", "token", "issue", "ci", "--role", "member")
    return root, token.stdout.strip()


@contextmanager
def _serving(root: Path, *args: str, fds: int | None = None) -> Iterator[int]:
    """A running plain-HTTP `mcp --http` on a free loopback port; yields the port."""
    command = [sys.executable, "-m", "lifeline_mesh", "mcp", "--root", str(root)]
    proc = subprocess.Popen(
        at_most_fds([*command, "--http", "127.0.0.1:0", "--insecure", *args], fds),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("serving MCP on http://127.0.0.1:"):
            proc.kill()
            raise AssertionError(f"it printed {line!r}; stderr: {proc.stderr.read()[-2000:]}")
        yield int(line.split()[3].split(":")[2].split("/")[0])
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def _initialize(port: int, token: str, **headers: str) -> tuple[int, str]:
    sent = {
        "Host": f"127.0.0.1:{port}",
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **{k.replace("_", "-"): v for k, v in headers.items()},
    }
    return browser_request(port, "POST", "/mcp", sent, INIT_BODY)


def test_a_rebound_name_or_another_origin_is_refused_even_with_a_token(
    node: tuple[Path, str],
) -> None:
    root, token = node
    with _serving(root, "--allow-host", "mcp.lan") as port:
        status, body = _initialize(port, token, Host=f"attacker.example:{port}")
        assert status == 421 and "--allow-host" in body
        status, body = _initialize(port, token, Origin="http://attacker.example")
        assert status == 403 and "other origins" in body
        assert "serverInfo" not in body
        # a page on another port of the listen host is another program's: refused too
        status, body = _initialize(port, token, Origin=f"http://127.0.0.1:{port + 1}")
        assert status == 403 and "serverInfo" not in body
        # Real clients: by address, by an allowed name, from our own origin, without Origin.
        assert _initialize(port, token)[0] == 200
        assert _initialize(port, token, Host=f"mcp.lan:{port}")[0] == 200
        assert _initialize(port, token, Host=f"localhost:{port}")[0] == 200
        assert _initialize(port, token, Origin=f"http://127.0.0.1:{port}")[0] == 200


def test_mcp_answers_through_a_flood_of_idle_sockets(node: tuple[Path, str]) -> None:
    root, token = node
    with _serving(root, fds=1024) as port, idle_flood(port, 2000) as flood:
        assert len(flood) == 2000
        status, body = _initialize(port, token)
        assert status == 200 and "serverInfo" in body
        assert wait_until_open_at_most(flood, 256, within=10) <= 256
        assert wait_until_open_at_most(flood, 0, within=20) == 0
