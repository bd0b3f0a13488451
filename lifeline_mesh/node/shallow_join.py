"""Joining a line shallow (decision 0063): take the signed truth, write on its tips, push.

:func:`shallow_sync` takes each line's snapshot from a peer (``Shallow`` call), checks all
of it before storing anything — the head's signature by the node serving at that address
(not revoked), the digests of what arrived against the head, every tip and every parent
accounted for, each entry's author signature naming its id and ts — then stores the
signatures, the statements, the boundary and the entries through the session's own sets,
and records the signed head (``lifeline.store.shallow``). A peer from before the
capability gets a full session instead.

:func:`push_lines` sends what was written on a shallow line since its snapshot (``Push``):
the node admits it as a session's items. A later full ``sync`` deepens the line.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lifeline.entry import Entry
from lifeline.errors import (
    BadSignature,
    LifelineError,
    PermissionDenied,
    RemoteProtocolError,
    StoreError,
)
from lifeline.store.shallow import (
    drop_boundary,
    read_mark,
    record_boundary,
    record_source,
)
from lifeline.store.tiers import SqlLine
from lifeline_mesh.helpers import pool as offload
from lifeline_mesh.membership import RevocationList
from lifeline_mesh.membership.client import pull_membership
from lifeline_mesh.notary.attestation_set import AttestationSet
from lifeline_mesh.notary.shallow_head import ShallowHead, attestations_digest, entries_digest
from lifeline_mesh.notary.statement import Attestation, Role, decode
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.incoming import REFUSALS_KEPT
from lifeline_mesh.recon.sets import ParsedItem
from lifeline_mesh.sync.driver import SyncReport
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.outcome import reported_if_refused
from lifeline_mesh.transport.errors import Refused
from lifeline_mesh.transport.shallow_rpc import (
    NoShallow,
    PushedItems,
    ShallowSnapshot,
    fetch_shallow,
    push_items,
)

if TYPE_CHECKING:
    from lifeline_mesh.node.line_session import LineSession
    from lifeline_mesh.node.root import Node

log = logging.getLogger(__name__)

__all__ = ["NoShallow", "check_snapshot", "push_lines", "shallow_sync"]

# the channel options for a peer and the node id pinned there (None: a lab node)
_Target = tuple[list[tuple[str, object]], str | None]


def _refuse(peer: str, what: str) -> RemoteProtocolError:
    return RemoteProtocolError(
        f"refused the shallow snapshot from {peer}: {what}; nothing was stored"
    )


def check_snapshot(
    snap: ShallowSnapshot, peer: str, line: str, expected: str | None, revoked: RevocationList
) -> tuple[ShallowHead, list[Entry]]:
    """Every check before anything is stored; the head and the entries, parents first."""
    head = ShallowHead.decode(snap.head)
    head.verify(snap.signature, snap.public_key, snap.head)  # BadSignature: forged
    if head.line != line:
        raise _refuse(peer, f"it is of line {head.line!r}, not {line!r}")
    if expected is not None and head.node_id != expected:
        raise BadSignature(
            f"refused the shallow snapshot from {peer}: signed by node {head.node_id}, but "
            f"node {expected} serves there (a forged snapshot); nothing was stored"
        )
    when = revoked.revoked_at(head.node_id)
    if when is not None:
        raise Refused(
            f"refused the shallow snapshot from {peer}: signed by node {head.node_id}, "
            f"revoked at {when}; nothing was stored — take it from a node in good standing"
        )
    codec = EntryCodec()
    entries = [codec.parse(raw).value for raw in snap.entries]  # IdMismatch when altered
    typed = [e for e in entries if isinstance(e, Entry)]
    ids = {e.id for e in typed}
    if entries_digest(ids) != head.entries or len(ids) != len(typed):
        raise _refuse(peer, "its entries are not the ones its signed head lists")
    if attestations_digest([*snap.attestations, *snap.statements]) != head.attestations:
        raise _refuse(peer, "its signatures and statements are not the ones its head lists")
    missing = sorted(set(head.tips) - ids)
    if missing:
        raise _refuse(peer, f"tip {missing[0][:12]} of its head is not among its entries")
    externals = {bytes(i).hex() for i, _line in snap.externals}
    for e in typed:
        lost = [p for p in e.parents if p not in ids and p not in head.boundary]
        lost = [p for p in lost if p not in externals]
        if lost:
            raise _refuse(
                peer, f"entry {e.id[:12]} names parent {lost[0][:12]}, neither sent nor listed"
            )
    _check_authors(peer, typed, [decode(raw) for raw in snap.attestations])
    return head, typed


def _check_authors(peer: str, entries: Sequence[Entry], atts: Sequence[Attestation]) -> None:
    """Every author signature sent verifies, and an entry that has one is at the ts its
    author signed. An entry with none (written before its node had a key, or imported) is
    taken as a full sync takes it: provisionally, attributed to the serving node, and
    reported unsigned by ``verify`` (decision 0048)."""
    signed: dict[str, set[str]] = {}
    for att in atts:
        if att.role is Role.AUTHOR:
            att.verify()  # BadSignature names the signer and the subject
            signed.setdefault(att.subject, set()).add(att.ts)
    for e in entries:
        stamps = signed.get(e.id)
        if stamps and e.ts not in stamps:
            raise BadSignature(
                f"refused the shallow snapshot from {peer}: entry {e.id[:12]} has ts {e.ts}, "
                f"but its author signed {sorted(stamps)[0]} (its signature does not match); "
                "nothing was stored"
            )


async def _store(
    node: Node, session: LineSession, snap: ShallowSnapshot, head: ShallowHead, peer: str
) -> tuple[int, int, list[str]]:
    """Signatures, statements, boundary, entries: (entries added, attestations added, why
    each item refused alone was: decision 0111; reported as a full sync reports them)."""
    sql = session.line.sql_tables("a shallow sync")
    atts, statements, entry_set = session.sets
    codec = EntryCodec(node.home.limits())
    signed = [atts.codec.parse(raw) for raw in snap.attestations]
    stmts = [statements.codec.parse(raw) for raw in snap.statements]
    refused: list[str] = []
    added_atts = 0
    if signed:
        taken = await atts.admit(signed, [])
        added_atts, refused = taken.added, [*refused, *taken.refused]
    try:  # witnesses are evidence about the entries, not needed to hold them
        if stmts:
            taken = await statements.admit(stmts, [])
            added_atts, refused = added_atts + taken.added, [*refused, *taken.refused]
    except LifelineError as exc:
        log.warning("line %s: the snapshot's statements were not stored: %s", head.line, exc)
    boundary = dict(head.boundary)
    recorded = await sql.run_write(lambda c: _record(c, boundary))
    items: list[ParsedItem] = [codec.parse(raw) for raw in snap.entries]
    try:
        taken = await entry_set.admit(items, list(snap.externals))
        added, refused = taken.added, [*refused, *taken.refused]
    except BaseException:
        await sql.run_write(lambda c: drop_boundary(c, recorded))
        raise
    # Rows past the mark are this node's own writes, pushed by `sync --push`. A line taken
    # shallow again keeps its first mark: what it wrote and never pushed stays past it.
    mark = await sql.run_read(read_mark)
    if mark is None:
        mark = await sql.run_read(lambda c: c.execute("SELECT max(seq) FROM entries").fetchone()[0])
    source_text = snap.head.decode("utf-8")
    await sql.run_write(
        lambda c: record_source(
            c, source_text, snap.signature, snap.public_key, int(mark or 0), peer
        )
    )
    return added, added_atts, refused


def _record(conn: sqlite3.Connection, boundary: dict[str, int]) -> list[str]:
    record_boundary(conn, boundary)
    return sorted(boundary)


async def _target(node: Node, peer: str) -> _Target:
    """Channel options for ``peer`` and the node id pinned there (None: a lab node)."""
    if node.security.insecure:
        return list(node.security.channel_options), None
    await pull_membership(node.home, peer, logged=node.refused_rows)
    options = await node.pins.pin(peer)
    return list(options), node.pins.known.get(peer)


def _check_line(node: Node, expected: str | None, line: str) -> None:
    """Refuse, before anything of it is asked or sent, a line the node pinned at the peer
    may not use (a CI runner's certificate names its lines: decision 0120), as a session
    does."""
    if why := node.pins.line_refused(expected, line):
        raise PermissionDenied(why)


async def shallow_sync(
    node: Node, peer: str, lines: Sequence[str], *, go_on: bool = False
) -> list[SyncReport]:
    """One shallow snapshot per line from ``peer``; a line that already holds history (not
    shallow, not empty) gets a full session instead, as does every line of an older peer.
    ``go_on``: a line refused (by the peer, or to this node) is an ``error`` report and the
    next lines sync, as in ``Node.sync``."""
    node.config().require_shared(lines)
    options, expected = await _target(node, peer)
    reports: list[SyncReport] = []
    for line in lines:
        with reported_if_refused(reports, line, "shallow", go_on=go_on):
            reports += await _shallow_line(node, peer, line, (options, expected))
    return reports


async def _shallow_line(node: Node, peer: str, line: str, target: _Target) -> list[SyncReport]:
    options, expected = target
    _check_line(node, expected, line)
    async with node.lines.open(line) as opened:
        full = await opened.store.count() > 0 and not await opened.shallow()
    if full:
        return await node.sync(peer, [line])
    started = time.perf_counter()
    try:
        snap = await fetch_shallow(
            peer, line, credentials=node.security.channel_credentials, options=options
        )
    except NoShallow as exc:
        log.info("%s; syncing line %s in full", exc, line)
        return await node.sync(peer, [line])
    revoked = RevocationList.load(node.home)
    head, _entries = check_snapshot(snap, peer, line, expected, revoked)
    # A snapshot's few thousand signatures are checked sooner by a thread of this
    # process than by helper interpreters started for them (decision 0082)
    with offload.allowed(False):
        async with node.session(line, source=expected or peer) as session:
            added, signed, refused = await _store(node, session, snap, head, peer)
    return [
        SyncReport(
            line=line,
            role="shallow",
            entries_received=len(snap.entries),
            entries_added=added,
            attestations_added=signed,
            signatures_received=len(snap.attestations) + len(snap.statements),
            bytes_received=snap.wire_bytes,
            round_trips=1,
            seconds=time.perf_counter() - started,
            refused=len(refused),
            refusals=[f"the peer sent {why}" for why in refused[:REFUSALS_KEPT]],
        )
    ]


def _written(conn: sqlite3.Connection, after: int, cap: int) -> list[str]:
    sql = "SELECT id FROM entries WHERE seq > ? ORDER BY seq LIMIT ?"
    return [r[0] for r in conn.execute(sql, (after, cap + 1))]


async def _written_items(node: Node, sql: SqlLine) -> PushedItems | None:
    from lifeline_mesh.node.shallow_serve import MAX_PUSH_ITEMS

    mark = await sql.run_read(read_mark)
    if mark is None:
        return None
    ids = await sql.run_read(lambda c: _written(c, mark, MAX_PUSH_ITEMS))
    if len(ids) > MAX_PUSH_ITEMS:
        raise StoreError(
            f"this shallow line holds over {MAX_PUSH_ITEMS} entries written since its "
            "snapshot (cap MAX_PUSH_ITEMS); run a full `lifeline-mesh sync PEER` instead"
        )
    entries = await EntrySet(sql, EntryCodec(node.home.limits())).fetch(
        [bytes.fromhex(i) for i in ids]
    )
    notary = NotaryStore(sql)
    signed = await AttestationSet(notary).fetch(await notary.author_ids(ids))
    return PushedItems("", tuple(signed.raws), tuple(entries.raws), tuple(entries.externals))


async def push_lines(
    node: Node, peer: str, lines: Sequence[str], *, go_on: bool = False
) -> list[SyncReport]:
    """Push what each shallow line wrote since its snapshot to ``peer`` (a line that is
    not shallow syncs in full). ``go_on``: as in :func:`shallow_sync`."""
    options, expected = await _target(node, peer)
    reports: list[SyncReport] = []
    for line in lines:
        with reported_if_refused(reports, line, "push", go_on=go_on):
            reports += await _push_line(node, peer, line, (options, expected))
    return reports


async def _push_line(node: Node, peer: str, line: str, target: _Target) -> list[SyncReport]:
    options, expected = target
    _check_line(node, expected, line)
    async with node.lines.open(line) as opened:
        shallow = await opened.shallow()
        items = await _written_items(node, opened.sql_tables("a push")) if shallow else None
    if items is None:
        return await node.sync(peer, [line])
    started = time.perf_counter()
    items = PushedItems(line, items.attestations, items.entries, items.externals)
    try:
        _added, _signed, sent = await push_items(
            peer, items, credentials=node.security.channel_credentials, options=options
        )
    except NoShallow:  # a peer from before the capability: a session (it deepens)
        return await node.sync(peer, [line])
    except LifelineError:
        node.pins.forget(peer)
        raise
    return [
        SyncReport(
            line=line,
            role="push",
            entries_sent=len(items.entries),
            signatures_sent=len(items.attestations),
            bytes_sent=sent,
            round_trips=1,
            seconds=time.perf_counter() - started,
        )
    ]
