"""Network failures say what happened, not that membership failed."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from lifeline.errors import PeerError
from lifeline_mesh.transport.errors import error_from_rpc
from tests.support.mesh_procs import cli, serve


@pytest.fixture
def http_port() -> Iterator[int]:
    """A plain HTTP/1 server on loopback: a port that answers, but not as a node."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def member(tmp_path: Path) -> Path:
    cli("lifeline", tmp_path, "init")
    cli("lifeline_mesh", tmp_path, "init", "--new-mesh", "team")
    cli("lifeline_mesh", tmp_path, "share", "ledger")
    return tmp_path


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    err = done.stderr
    assert done.returncode == 2 and err.count("\n") == 1, err
    assert "not a member" not in err and "revoked" not in err, err
    return err


def test_an_http_server_on_the_port_is_named_as_such(member: Path, http_port: int) -> None:
    done = cli("lifeline_mesh", member, "sync", f"127.0.0.1:{http_port}", check=False)
    assert "answers, but not as a lifeline-mesh node" in _one_line(done)


def test_insecure_against_an_http_server(tmp_path: Path, http_port: int) -> None:
    cli("lifeline", tmp_path, "init")
    cli("lifeline_mesh", tmp_path, "share", "ledger")
    done = cli(
        "lifeline_mesh", tmp_path, "sync", "--insecure", f"127.0.0.1:{http_port}", check=False
    )
    assert "answers, but not as a lifeline-mesh node" in _one_line(done)


def test_insecure_against_a_tls_node_says_drop_insecure(member: Path, tmp_path: Path) -> None:
    with serve(member, "--no-discovery") as proc:
        assert proc.stdout is not None
        address = _listening(member)
        done = cli("lifeline_mesh", member, "sync", "--insecure", address, check=False)
    err = _one_line(done)
    assert "serves mutual TLS" in err and "drop --insecure" in err


def _listening(root: Path) -> str:
    return str(json.loads(cli("lifeline_mesh", root, "status", "--json").stdout)["listen"])


def test_a_connection_lost_mid_session_says_run_again() -> None:
    cut = grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "Socket closed"
    )
    mid = error_from_rpc(cut, "127.0.0.1:7420", started=True)
    assert isinstance(mid, PeerError) and "lost mid-session" in str(mid)
    assert "run the sync again" in str(mid) and "member" not in str(mid)
    before = error_from_rpc(cut, "127.0.0.1:7420")  # at the handshake: a refusal, still
    assert "handshake" in str(before)
