"""Boundaries of the sync layers: the status table both ways, a pure core, CLI help."""

from __future__ import annotations

import ast
import subprocess
import sys

import grpc
import pytest

from lifeline.errors import (
    BadSignature,
    ConfigError,
    IdMismatch,
    LifelineError,
    LocalProtocolError,
    NotAuthenticated,
    NotFound,
    PeerError,
    PermissionDenied,
    RemoteProtocolError,
)
from lifeline_mesh.transport.channels import open_channel
from lifeline_mesh.transport.errors import Refused, error_from_rpc, status_for
from tests.support.paths import REPO


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (NotAuthenticated("x"), grpc.StatusCode.UNAUTHENTICATED),
        (PermissionDenied("x"), grpc.StatusCode.PERMISSION_DENIED),
        (Refused("x"), grpc.StatusCode.PERMISSION_DENIED),
        (PeerError("x"), grpc.StatusCode.UNAVAILABLE),
        (RemoteProtocolError("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (IdMismatch("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (BadSignature("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (LocalProtocolError("x"), grpc.StatusCode.INTERNAL),
        (NotFound("x"), grpc.StatusCode.NOT_FOUND),
        (ConfigError("x"), grpc.StatusCode.FAILED_PRECONDITION),
    ],
)
def test_status_for_our_errors(error: LifelineError, code: grpc.StatusCode) -> None:
    assert status_for(error) is code


def _rpc(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


@pytest.mark.parametrize(
    ("code", "details", "cls", "words"),
    [
        (grpc.StatusCode.PERMISSION_DENIED, "nope", PermissionDenied, "refused us: nope"),
        (grpc.StatusCode.UNAUTHENTICATED, "nope", NotAuthenticated, "not authenticated: nope"),
        (grpc.StatusCode.UNAVAILABLE, "nope", PeerError, "is `lifeline-mesh serve` running there?"),
        (grpc.StatusCode.UNAVAILABLE, "Connection refused", PeerError, "unreachable (unavailable"),
        (grpc.StatusCode.UNAVAILABLE, "Ssl handshake failed", NotAuthenticated, "not a member"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline", PeerError, "timed out (Deadline)"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "nope", RemoteProtocolError, "over a size limit"),
        (grpc.StatusCode.INTERNAL, "nope", RemoteProtocolError, "failed the call (INTERNAL)"),
        (grpc.StatusCode.INVALID_ARGUMENT, "nope", PeerError, "invalid_argument: nope"),
        (grpc.StatusCode.FAILED_PRECONDITION, "no CA key", PeerError, "failed_precondition"),
    ],
)
def test_grpc_errors_come_back_as_ours(
    code: grpc.StatusCode, details: str, cls: type[LifelineError], words: str
) -> None:
    """One mapper for every call a node makes: sessions, watches, whoami, pulls, joins."""
    error = error_from_rpc(_rpc(code, details), "127.0.0.1:9")
    assert type(error) is cls and words in str(error) and "127.0.0.1:9" in str(error)


def test_the_reconciliation_core_does_no_io() -> None:
    forbidden = {"asyncio", "grpc", "sqlite3", "socket", "time", "lifeline.store"}
    for path in (REPO / "lifeline_mesh" / "recon").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert not any(name == f or name.startswith(f + ".") for f in forbidden), (
                    f"{path.name} imports {name}"
                )


@pytest.mark.parametrize("command", ["serve", "sync", "share", "unshare", "lines"])
def test_every_sync_command_has_help(command: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", command, "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"lifeline-mesh {command}" in out


def test_every_dial_checks_its_address_before_opening_a_channel() -> None:
    """One channel set-up for sessions, watches and membership calls: plain text only to
    loopback, and a malformed address is one clear error, before any connection."""
    with pytest.raises(ConfigError, match="not a loopback address, and without TLS"):
        open_channel("192.0.2.1:7420", None)
    with pytest.raises(ConfigError, match="is not HOST:PORT"):
        open_channel("nonsense", grpc.ssl_channel_credentials())
