"""Serving a shallow join (decision 0063): the snapshot a runner takes, and its push.

:func:`build_snapshot` reads, in one line's store: the entries in force and the tips
(:func:`lifeline.truth.in_force.ids_in_force`), parents first; their author signatures (and
the enrollments of runners among the signers, as a session sends them); the newest state
statement of each node (each witnesses every entry its tips descend from); the boundary
(absent parents of the entries sent, with their heights); and signs the head over all of it.
A line that is itself shallow serves no snapshot: its truth may lack what it never held.

:func:`admit_push` takes what a shallow caller wrote, through the same sets and checks as
a session's items (author signatures first, then entries: closure, ids, signatures), so the
node admits it as any other write — and signs its state statement as a session does.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from lifeline.errors import RemoteProtocolError
from lifeline.store.shallow import boundary_size
from lifeline.store.tiers import SqlLine
from lifeline.truth.in_force import ids_in_force
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary.attestation_set import AttestationSet
from lifeline_mesh.notary.shallow_head import (
    ShallowHead,
    attestations_digest,
    entries_digest,
    sign_head,
)
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.sets import ItemCodec, ParsedItem
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.port import ReconSet
from lifeline_mesh.transport.authz import SessionPeer
from lifeline_mesh.transport.shallow_rpc import (
    PushedItems,
    ShallowService,
    ShallowSnapshot,
    ShallowUnavailable,
)

if TYPE_CHECKING:
    from lifeline_mesh.node.root import Node

__all__ = ["MAX_PUSH_ITEMS", "admit_push", "build_snapshot", "shallow_service"]

MAX_PUSH_ITEMS = 20_000  # items in one push (a job's writes, not a history)
_VARS = 500


def _rows(conn: sqlite3.Connection, ids: Sequence[str]) -> list[tuple[str, int, str]]:
    out: list[tuple[str, int, str]] = []
    for start in range(0, len(ids), _VARS):
        part = list(ids[start : start + _VARS])
        marks = ",".join("?" * len(part))
        sql = f"SELECT id, height, parents FROM entries WHERE id IN ({marks})"
        out += [(i, int(h), p) for i, h, p in conn.execute(sql, part)]
    return out


def _heights(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, int]:
    return {i: h for i, h, _p in _rows(conn, ids)}


def _latest_states(conn: sqlite3.Connection) -> list[bytes]:
    """The newest state statement of each node (every part of it): one scan, grouped."""
    newest = conn.execute(
        "SELECT node_id, max(ts) FROM statements WHERE role = 'state' GROUP BY node_id"
    ).fetchall()
    out: list[bytes] = []
    for node_id, ts in sorted(newest):
        rows = conn.execute(
            "SELECT item FROM statements WHERE role = 'state' AND node_id = ? AND ts = ?"
            " ORDER BY id",
            (node_id, ts),
        )
        out += [bytes(r[0]) for r in rows]
    return out


def _imported(conn: sqlite3.Connection, ids: Sequence[str]) -> list[bytes]:
    """The `imported` statements of ``ids`` (custody of entries written unsigned)."""
    wanted = set(ids)
    out: list[bytes] = []
    for start in range(0, len(ids), _VARS):
        part = sorted({i[:16] for i in ids[start : start + _VARS]})
        marks = ",".join("?" * len(part))
        sql = (
            "SELECT subject, item FROM statements WHERE role = 'imported'"
            f" AND substr(subject, 1, 16) IN ({marks})"
        )
        out += [bytes(item) for subject, item in conn.execute(sql, part) if subject in wanted]
    return out


async def build_snapshot(
    store: SqlLine, line: str, identity: NodeIdentity, codec: EntryCodec, clock: Callable[[], str]
) -> ShallowSnapshot:
    if await store.run_read(boundary_size):
        raise ShallowUnavailable(
            f"line {line!r} is shallow on this node (it lacks older history): it serves no "
            "shallow snapshot; take one from a node holding the whole line"
        )
    tips = await store.tips()
    wanted = sorted(set(await ids_in_force(store)) | set(tips))
    count = await store.count()

    def read(conn: sqlite3.Connection) -> tuple[list[str], dict[str, int], list[bytes]]:
        rows = sorted(_rows(conn, wanted), key=lambda r: (r[1], r[0]))  # parents first
        held = {r[0] for r in rows}
        named = sorted({p for _i, _h, ps in rows for p in json.loads(ps)} - held)
        order = [r[0] for r in rows]
        return order, _heights(conn, named), _latest_states(conn) + _imported(conn, order)

    ordered, boundary, statements = await store.run_read(read)
    entries = await EntrySet(store, codec).fetch([bytes.fromhex(i) for i in ordered])
    notary = NotaryStore(store)
    signed = await AttestationSet(notary).fetch(await notary.author_ids(ordered))
    head = ShallowHead(
        line=line,
        node_id=identity.node_id,
        ts=clock(),
        count=count,
        entries=entries_digest(ordered),
        attestations=attestations_digest([*signed.raws, *statements]),
        tips=tuple(tips),
        boundary=boundary,
    )
    data, signature, public_key = sign_head(identity, head)
    return ShallowSnapshot(
        tuple(signed.raws), tuple(statements), tuple(entries.raws),
        tuple(entries.externals), data, signature, public_key,
    )  # fmt: skip


def _parse(codec: ItemCodec, raws: Sequence[bytes], max_item_bytes: int) -> list[ParsedItem]:
    out = []
    for raw in raws:
        if len(raw) > max_item_bytes:
            raise RemoteProtocolError(
                f"a pushed item of {len(raw)} bytes is over the cap of {max_item_bytes}"
            )
        out.append(codec.parse(raw))
    return out


async def admit_push(
    sets: Sequence[ReconSet], items: PushedItems, max_item_bytes: int
) -> tuple[int, int]:
    """Admit ``items`` through a session's sets (attestations, statements, entries);
    (entries added, attestations added)."""
    if len(items.entries) + len(items.attestations) > MAX_PUSH_ITEMS:
        raise RemoteProtocolError(
            f"a push of {len(items.entries) + len(items.attestations)} items (cap "
            f"MAX_PUSH_ITEMS = {MAX_PUSH_ITEMS}); sync in full instead"
        )
    atts, _statements, entry_set = sets
    signed = _parse(atts.codec, items.attestations, max_item_bytes)
    entries = _parse(entry_set.codec, items.entries, max_item_bytes)
    added_atts = (await atts.admit(signed, [])).added if signed else 0
    added = (await entry_set.admit(entries, items.externals)).added if entries else 0
    return added, added_atts


def shallow_service(node: Node) -> ShallowService:
    """The ``Shallow`` and ``Push`` calls of ``node``'s sync port."""

    async def snapshot(line: str, peer: SessionPeer) -> ShallowSnapshot:
        if node.identity is None or not node.lines.announces_rows:  # a hub's lines: not yet
            raise ShallowUnavailable(
                "this node serves no shallow snapshot (a hub, or a node without its signing "
                "key); sync in full (`--full`)"
            )
        async with node.lines.open(line) as opened:
            codec = EntryCodec(node.home.limits())
            sql = opened.sql_tables("serving a shallow snapshot")
            return await build_snapshot(sql, line, node.identity, codec, node.clock)

    async def admit(peer: SessionPeer, items: PushedItems) -> tuple[int, int]:
        async with node.session(items.line, peer) as session:
            return await admit_push(session.sets, items, node.limits.max_item_bytes)

    return ShallowService(node.security.authorizer, node.is_shared, snapshot, admit)
