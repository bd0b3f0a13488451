"""Nodes on temporary roots for the gRPC and end-to-end sync tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from lifeline.entry import Entry
from lifeline_mesh.config import NodeConfig
from lifeline_mesh.node import Node
from lifeline_mesh.transport.server import SyncServer


def make_node(root: Path, *, shared: tuple[str, ...] = ("ledger",), **kwargs: Any) -> Node:
    """A node on loopback without a mesh (plain text): the protocol tests' setting."""
    root.mkdir(parents=True, exist_ok=True)
    NodeConfig(shared_lines=list(shared)).save(root)
    kwargs.setdefault("insecure", True)
    return Node(root, **kwargs)


async def write(node: Node, entries: list[Entry], line: str = "ledger") -> None:
    async with node.open_line(line) as store:
        await store.append_many(entries)


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
