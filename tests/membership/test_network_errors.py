"""Network failures say what happened, not that membership failed."""

from __future__ import annotations

import http.server
import json
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from lifeline.errors import NotAuthenticated, PeerError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.transport.errors import error_from_rpc
from tests.support.mesh_procs import cli, free_port, join_mesh, serve, shared_node


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


@pytest.fixture
def silent_listener() -> Iterator[str]:
    """A port on loopback that takes connections (the kernel completes them) and never
    writes a byte: the TLS handshake gets no answer."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def _not_answering(done: subprocess.CompletedProcess[str], address: str) -> None:
    err = _one_line(done)
    assert f"peer {address} is not answering" in err and "TLS handshake did not complete" in err
    assert "trust" not in err and "is `lifeline-mesh serve` running there" in err


def test_a_port_that_never_answers_is_not_called_a_trust_failure(
    member: Path, silent_listener: str
) -> None:
    _not_answering(
        cli("lifeline_mesh", member, "sync", silent_listener, check=False), silent_listener
    )


def test_a_stopped_serve_is_not_answering_and_a_stranger_is_still_distrusted(
    tmp_path: Path,
) -> None:
    ca, member, stranger = tmp_path / "ca", tmp_path / "member", tmp_path / "stranger"
    for root in (ca, member, stranger):
        shared_node(root)
    join_mesh(ca, [member])
    cli("lifeline_mesh", stranger, "init", "--new-mesh", "another")
    address = f"127.0.0.1:{free_port()}"
    with serve(ca, "--listen", address, "--no-discovery") as proc:
        cli("lifeline_mesh", member, "sync", address)
        # a certificate of another mesh: refused by both ends, at once
        done = cli("lifeline_mesh", stranger, "sync", address, check=False)
        assert done.returncode == 2 and "do not trust each other" in done.stderr, done.stderr
        # the stranger trusting our CA: our server refuses its certificate (a closed socket)
        NodeHome(stranger).ca_cert_path.write_bytes(NodeHome(ca).ca_cert_path.read_bytes())
        done = cli("lifeline_mesh", stranger, "sync", address, check=False)
        assert done.returncode == 2 and "do not trust each other" in done.stderr, done.stderr
        proc.send_signal(signal.SIGSTOP)  # the process holds its socket and answers nothing
        try:
            _not_answering(cli("lifeline_mesh", member, "sync", address, check=False), address)
        finally:
            proc.send_signal(signal.SIGCONT)
        cli("lifeline_mesh", member, "sync", address)  # and answers again


def test_a_handshake_this_end_gave_up_on_is_told_from_one_the_peer_refused() -> None:
    def failed(detail: str) -> grpc.aio.AioRpcError:
        return grpc.aio.AioRpcError(
            grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), detail
        )

    last = "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:7420: "
    silent = error_from_rpc(failed(last + "Handshake read failed (Endpoint closing)"), "p:1")
    assert type(silent) is PeerError and "is not answering" in str(silent)
    assert "trust" not in str(silent)
    for refused in ("Socket closed", "SSL_ERROR_SSL: error:1000007d:SSL routines:OPENSSL_internal"):
        assert isinstance(error_from_rpc(failed(last + refused), "p:1"), NotAuthenticated)
