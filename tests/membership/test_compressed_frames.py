"""A compressed message is measured after it is inflated (docs/security.md,
"Unauthenticated network peer").

gRPC accepts gzip- and deflate-compressed messages from any caller. A message of zeros
inflates about a thousand times, so a cap on the bytes that cross the wire would let a
12 KB frame at the join port become 12 MiB in the node, and a 200 KB one at the sync port
200 MiB. grpcio checks the inflated size against ``max_receive_message_length`` while it
inflates; these tests keep that true of the grpcio we ship (they passed when written: no
change of ours was needed), against a real ``serve``.
"""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path
from typing import Any

import grpc
import pytest

from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.certs import TARGET_NAME
from tests.support.mesh_procs import cli, serve_insecure, shared_node, start_ca_serve

pytestmark = pytest.mark.slow

MiB = 1 << 20
CALL_S = 30.0


def _rss_mb(pid: int) -> float:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _zeros_message(size: int) -> bytes:
    """A protobuf message whose field 1 holds ``size`` zero bytes (raw: any method's
    request type reads it as its first field)."""
    length, n = bytearray(), size
    while True:
        byte, n = n & 0x7F, n >> 7
        length.append(byte | (0x80 if n else 0))
        if not n:
            break
    return b"\x0a" + bytes(length) + bytes(size)


async def _send_gzipped(
    address: str, method: str, message: bytes, credentials: grpc.ChannelCredentials | None
) -> grpc.aio.AioRpcError:
    options: list[tuple[str, Any]] = [("grpc.max_send_message_length", -1)]
    if credentials is None:
        channel = grpc.aio.insecure_channel(address, options, compression=grpc.Compression.Gzip)
    else:
        options.append(("grpc.ssl_target_name_override", TARGET_NAME))
        channel = grpc.aio.secure_channel(
            address, credentials, options, compression=grpc.Compression.Gzip
        )
    async with channel:
        call = channel.unary_unary(method)
        try:
            async with asyncio.timeout(CALL_S):
                await call(message)
        except grpc.aio.AioRpcError as exc:
            return exc
    raise AssertionError(f"{method} accepted a message of {len(message)} bytes")


def test_a_compressed_join_request_is_measured_inflated(tmp_path: Path) -> None:
    root = tmp_path / "ca"
    shared_node(root)
    cli("lifeline_mesh", root, "init", "--new-mesh", "team")
    anonymous = grpc.ssl_channel_credentials(NodeHome(root).ca_cert_path.read_bytes())
    message = _zeros_message(12 * MiB)
    assert len(gzip.compress(message)) < 16 * 1024  # under the join port's cap as sent
    with (tmp_path / "serve.log").open("w") as log:
        proc, _sync, join = start_ca_serve(root, log.fileno())
    try:
        before = _rss_mb(proc.pid)
        refusals = [
            asyncio.run(
                _send_gzipped(join, "/lifeline_mesh.v1.Membership/Join", message, anonymous)
            )
            for _ in range(8)
        ]
        grown = _rss_mb(proc.pid) - before
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert {r.code() for r in refusals} == {grpc.StatusCode.RESOURCE_EXHAUSTED}, refusals[0]
    assert "larger than max" in (refusals[0].details() or ""), refusals[0].details()
    assert grown < 30, f"RSS grew {grown:.0f} MB"


def test_a_compressed_push_is_measured_inflated(tmp_path: Path) -> None:
    """On a plain-text loopback node every caller is let in: the stand-in for a reader."""
    root = tmp_path / "node"
    shared_node(root)
    message = _zeros_message(200 * MiB)  # about 200 KB gzipped
    with serve_insecure(root) as (proc, address):
        before = _rss_mb(proc.pid)
        refused = asyncio.run(_send_gzipped(address, "/lifeline_mesh.v1.Mesh/Push", message, None))
        grown = _rss_mb(proc.pid) - before
    assert refused.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, refused
    assert "larger than max" in (refused.details() or ""), refused.details()
    assert grown < 30, f"RSS grew {grown:.0f} MB"
