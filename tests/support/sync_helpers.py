"""Nodes on temporary roots for the gRPC and end-to-end sync tests."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc

from lifeline.entry import Entry
from lifeline.store.pg_lines import PgLines
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.root import Node
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.transport.channels import METHOD, grpc_options
from lifeline_mesh.transport.server import SyncServer
from lifeline_mesh.wire.codec import decode_bytes


def make_node(
    root: Path,
    *,
    shared: tuple[str, ...] = ("ledger",),
    store_url: str | None = None,
    **kwargs: Any,
) -> Node:
    """A node on loopback without a mesh (plain text): the protocol tests' setting; its
    lines in the PostgreSQL database ``store_url`` when given (as `serve --store URL`)."""
    root.mkdir(parents=True, exist_ok=True)
    NodeConfig(shared_lines=list(shared)).save(NodeHome(root))
    kwargs.setdefault("insecure", True)
    home = NodeHome(root) if store_url is None else NodeHome(root, PgLines(store_url))
    return Node(home, **kwargs)


async def write(node: Node, entries: list[Entry], line: str = "ledger") -> None:
    async with node.open_line(line) as store:
        await store.append_many(entries)


async def write_signed(node: Node, root: Path, entries: list[Entry], line: str = "ledger") -> None:
    """``entries`` written to ``node``'s line (``root`` its folder), each with its author
    signature by the node's identity."""
    identity, _ = NodeIdentity.load_or_create(NodeHome(root))
    async with node.open_line(line) as store:
        await store.append_many(entries)
        await sign_entries(store, identity, entries)


def signature_ids(root: Path, line: str = "ledger") -> set[bytes]:
    """The ids of the signatures the line file of the node at ``root`` holds."""
    path = root / ".lifeline" / f"{line}.db"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return {bytes(r[0]) for r in conn.execute("SELECT id FROM attestations")}


async def history(node: Node, line: str = "ledger") -> list[dict[str, Any]]:
    async with node.open_line(line) as store:
        return [e.to_dict() async for e in store.stream()]


@asynccontextmanager
async def serving(node: Node) -> AsyncIterator[tuple[SyncServer, str]]:
    server = node.server()
    address = await server.start("127.0.0.1:0")
    try:
        yield server, address
    finally:
        await server.stop(0)


async def raw_session(
    address: str,
    frames: list[bytes],
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> tuple[list[object], grpc.StatusCode]:
    """Send raw frames as one session; return the decoded replies and the final status.

    The sender's send limit is generous: the honest server's own limit must refuse.
    """
    opts = [*grpc_options(64 << 20), *options]
    if credentials is None:
        channel = grpc.aio.insecure_channel(address, options=opts)
    else:
        channel = grpc.aio.secure_channel(address, credentials, opts)
    async with channel as ch:
        call = ch.stream_stream(METHOD)()
        try:
            for data in frames:
                await call.write(data)
            await call.done_writing()
        except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
            # the server ended the call while we were still writing (e.g. refused a frame
            # above its limit): its status is what the caller checks
            return [], await call.code()
        got: list[object] = []
        try:
            while (data := await call.read()) is not grpc.aio.EOF:
                got.append(decode_bytes(data))
        except grpc.aio.AioRpcError as exc:
            return got, exc.code()
        return got, await call.code()
