"""Read views for MCP: one entry in full, history since a point, the node's status.

Each returns plain JSON-able data; the tool layer only adds the MCP framing. History pages
with SQL on the store's ``(height, ts, id)`` index (the stream order of
:mod:`lifeline.store.port`), so a call costs the same on a line of 100 or 100k entries.
"""

from __future__ import annotations

import asyncio
import sqlite3
from functools import partial
from typing import Any

from lifeline.entry import normalize_ts
from lifeline.errors import ConfigError, InvalidEntry
from lifeline.store.backend import FileOrEntries, on_backend
from lifeline.store.port import Store
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.mcp.policy import load_policy
from lifeline_mesh.mcp.proposals import ProposalBook
from lifeline_mesh.mcp.shapes import (
    EntryFields,
    EntryView,
    History,
    LineStatus,
    MemoStats,
    NodeStatus,
    Signatures,
)
from lifeline_mesh.mcp.signatures import entry_signatures
from lifeline_mesh.mcp.workspace import Workspace

__all__ = ["MAX_HISTORY", "entry_view", "history_view", "status_view"]

MAX_HISTORY = 500


async def entry_view(ws: Workspace, ref: str, line: str | None) -> EntryView:
    """One entry by id or unique prefix: content, children and signatures."""
    async with ws.store(line) as store:
        entry = await store.resolve(ref)
        children = await store.children(entry.id)
        signatures = await entry_signatures(ws.home, store, entry.id, entry.ts, ws.node_id())
    return EntryView(
        **entry.to_dict(),
        line=ws.line_name(line),
        children=children,
        intact=entry.is_intact(),
        signatures=Signatures.model_validate(signatures),
    )


def _since_filter(since: str | None) -> tuple[str | None, str | None]:
    """Split ``since`` into (id prefix, ts): hex is an id, anything else must be a time."""
    if since is None or not since.strip():
        return None, None
    text = since.strip()
    if all(c in "0123456789abcdef" for c in text.lower()) and len(text) >= 4:
        return text.lower(), None
    try:
        return None, normalize_ts(text)
    except InvalidEntry as exc:
        raise ConfigError(
            f"since={since!r} is neither an entry id (prefix) nor an ISO-8601 time; "
            "pass e.g. 'a1b2c3' or '2026-01-31T12:00:00Z'"
        ) from exc


def _select_ids(
    conn: sqlite3.Connection,
    anchor: str | None,
    ts: str | None,
    kind: str | None,
    limit: int,
) -> list[str]:
    """Up to ``limit + 1`` ids in stream order (height, ts, id), on the store's own index.

    Oldest first after a point; without one, the newest ``limit + 1``, oldest first.
    """
    where: list[str] = []
    params: list[Any] = []
    if anchor is not None:
        row = conn.execute("SELECT height, ts, id FROM entries WHERE id = ?", (anchor,)).fetchone()
        where.append("(height, ts, id) > (?, ?, ?)")
        params.extend(row)
    if ts is not None:
        where.append("ts > ?")
        params.append(ts)
    if kind:
        where.append("kind = ?")
        params.append(kind)
    sql = "SELECT id FROM entries" + (" WHERE " + " AND ".join(where) if where else "")
    if anchor is None and ts is None:
        sql += " ORDER BY height DESC, ts DESC, id DESC LIMIT ?"
        return [r[0] for r in conn.execute(sql, (*params, limit + 1))][::-1]
    sql += " ORDER BY height, ts, id LIMIT ?"
    return [r[0] for r in conn.execute(sql, (*params, limit + 1))]


async def _streamed_ids(store: Store, chosen: dict[str, Any]) -> list[str]:
    """:func:`_select_ids` on a line without tables (a hub's): its stream is in the same
    (height, ts, id) order."""
    anchor, ts, kind, limit = chosen["anchor"], chosen["ts"], chosen["kind"], chosen["limit"]
    out: list[str] = []
    passed = anchor is None
    async for entry in store.stream():
        if not passed:
            passed = entry.id == anchor
            continue
        if (ts is None or entry.ts > ts) and (not kind or entry.kind == kind):
            out.append(entry.id)
            if (anchor is not None or ts is not None) and len(out) > limit:
                break
    return out if (anchor is not None or ts is not None) else out[-(limit + 1) :]


async def history_view(
    ws: Workspace, line: str | None, since: str | None, limit: int, kind: str | None
) -> History:
    """Entries after ``since`` (an id: after it in the ledger's order; a time: later ts),
    oldest first, at most ``limit``; without ``since``, the last ``limit`` entries."""
    if not 1 <= limit <= MAX_HISTORY:
        raise ConfigError(f"limit={limit} is out of range; use 1 to {MAX_HISTORY}")
    ref, ts = _since_filter(since)
    async with ws.store(line) as store:
        anchor = (await store.resolve(ref)).id if ref else None
        select = partial(_select_ids, anchor=anchor, ts=ts, kind=kind, limit=limit)
        ids = await on_backend(  # a line file: on its own index
            store,
            FileOrEntries(
                file=lambda sql: sql.run_read(select),
                entries=lambda other: _streamed_ids(other, select.keywords),
            ),
        )
        more = len(ids) > limit
        ids = ids[:limit] if (ref or ts) else ids[-limit:]
        chosen = await store.get_many(ids)
    return History(
        line=ws.line_name(line),
        since=since,
        count=len(chosen),
        more=more,
        entries=[EntryFields.of(e) for e in chosen],
    )


async def status_view(ws: Workspace) -> NodeStatus:
    """Node id, lines (entries, tips, shared or private), pending proposals, policy."""
    config = NodeConfig.load(ws.home)
    lines: list[LineStatus] = []
    for name in ws.home.line_names():
        async with ws.store(name) as store:
            lines.append(
                LineStatus(
                    name=name,
                    entries=await store.count(),
                    tips=len(await store.tips()),
                    shared=name in config.shared_lines,
                )
            )
    pending = await asyncio.to_thread(ProposalBook(ws.home).find, status="pending")
    return NodeStatus(
        node_id=ws.node_id(),
        root=str(ws.home.root),
        agent=ws.agent,
        default_line=ws.line,
        lines=lines,
        pending_proposals=len(pending),
        policy=load_policy(ws.home).source,
        peers=list(config.peers),
        context_memo=MemoStats(
            hits=sum(m.hits for m in ws.memos.values()),
            misses=sum(m.misses for m in ws.memos.values()),
        ),
    )
