"""A member's hand-made ``Push`` calls (tests of what a node takes from a member's push).

A member holds a valid certificate, so its calls pass mutual TLS and authorization; what
it sends is whatever its code puts in a ``PushRequest``. :func:`push` sends one through the
project's own client (``push_items``) with the member's credentials, as a shallow node
pushes, and returns (entries added, signatures added) or raises the refusal as our error.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from lifeline.entry import Entry
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.tls import channel_credentials, channel_options
from lifeline_mesh.transport.shallow_rpc import PushedItems, push_items

__all__ = ["held_entry", "push", "pushed"]


async def pushed(
    root: Path,
    address: str,
    entries: Sequence[Entry],
    externals: Sequence[tuple[bytes, str]] = (),
    line: str = "ledger",
    attestations: Sequence[bytes] = (),
) -> tuple[int, int]:
    """``entries``, ``externals`` and ``attestations`` (items) pushed to ``address`` as the
    member at ``root``."""
    items = PushedItems(
        line, tuple(attestations), tuple(e.to_json() for e in entries), tuple(externals)
    )
    credentials = channel_credentials(NodeHome(root))
    added, signed, _sent = await push_items(
        address, items, credentials=credentials, options=channel_options()
    )
    return added, signed


def push(
    root: Path,
    address: str,
    entries: Sequence[Entry],
    externals: Sequence[tuple[bytes, str]] = (),
    line: str = "ledger",
    attestations: Sequence[bytes] = (),
) -> tuple[int, int]:
    """:func:`pushed`, from a test without an event loop."""
    return asyncio.run(pushed(root, address, entries, externals, line, attestations))


def held_entry(line_file: Path, entry_id: str) -> Entry:
    """The entry as ``line_file`` holds it (a carrier the receiver already has)."""
    with sqlite3.connect(line_file) as conn:
        row = conn.execute(
            "SELECT id, ts, kind, author, agent, provider, model, summary, body, parents,"
            " dedup_key FROM entries WHERE id = ?",
            (entry_id,),
        ).fetchone()
    return Entry(*row[:9], tuple(json.loads(row[9])), row[10])
