"""Serving a shallow join (decision 0063): the snapshot a runner takes, and its push.

:func:`snapshot_of` reads, in one line (a line file, or a hub's line in PostgreSQL: its
:class:`~lifeline_mesh.node.snapshot_reads.SnapshotReads`, decision 0081): the entries in
force and the tips (:func:`lifeline.truth.in_force.ids_in_force`, the line's truth API,
whatever keeps it), parents first; their author signatures (and
the enrollments of runners among the signers, as a session sends them); the newest state
statement of each node (each witnesses every entry its tips descend from); the boundary
(absent parents of the entries sent, with their heights); and signs the head over all of it.
A line that is itself shallow serves no snapshot: its truth may lack what it never held.

:func:`admit_push` takes what a shallow caller wrote, through the same sets and checks as
a session's items (author signatures first, then entries: closure, ids, signatures), so the
node admits it as any other write — and signs its state statement as a session does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from lifeline.entry import Entry
from lifeline.errors import BadSignature, InvalidEntry, RemoteProtocolError
from lifeline.store.tiers import SqlLine
from lifeline.truth.in_force import ids_in_force
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.node.snapshot_reads import SnapshotReads, SqliteSnapshotReads
from lifeline_mesh.notary.attestation_set import AttestationSet
from lifeline_mesh.notary.shallow_head import (
    ShallowHead,
    attestations_digest,
    entries_digest,
    sign_head,
)
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.sets import ItemCodec, ParsedItem
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.port import AdmitResult, ReconSet
from lifeline_mesh.transport.authz import SessionPeer
from lifeline_mesh.transport.shallow_rpc import (
    CallHook,
    PushedItems,
    ShallowService,
    ShallowSnapshot,
    ShallowUnavailable,
)

if TYPE_CHECKING:
    from lifeline_mesh.home.node_home import NodeHome
    from lifeline_mesh.node.line_session import LineSession
    from lifeline_mesh.node.lines import NodeLines
    from lifeline_mesh.node.security import TransportSecurity
    from lifeline_mesh.recon.session import SessionLimits

__all__ = [
    "MAX_PUSH_ITEMS",
    "SnapshotParts",
    "admit_push",
    "build_snapshot",
    "shallow_service",
    "sign_snapshot",
    "snapshot_of",
    "snapshot_parts",
]

MAX_PUSH_ITEMS = 20_000  # items in one push (a job's writes, not a history)


async def build_snapshot(
    store: SqlLine, line: str, identity: NodeIdentity, codec: EntryCodec, clock: Callable[[], str]
) -> ShallowSnapshot:
    """The snapshot of a line file's ``store`` (:func:`snapshot_of` its SQLite reads)."""
    return await snapshot_of(SqliteSnapshotReads(store), line, identity, codec, clock)


@dataclass(frozen=True, slots=True)
class SnapshotParts:
    """A line's snapshot but its head's time and signature: what a node keeps between
    callers while the line does not change (:func:`shallow_service`)."""

    count: int
    tips: tuple[str, ...]
    ordered: tuple[str, ...]
    boundary: dict[str, int]
    statements: tuple[bytes, ...]
    entries: tuple[bytes, ...]
    externals: tuple[tuple[bytes, str], ...]
    signed: tuple[bytes, ...]


async def snapshot_parts(reads: SnapshotReads, line: str, codec: EntryCodec) -> SnapshotParts:
    """What the snapshot of the line ``reads`` reads carries (a line file or a hub's)."""
    if await reads.shallow():
        raise ShallowUnavailable(
            f"line {line!r} is shallow on this node (it lacks older history): it serves no "
            "shallow snapshot; take one from a node holding the whole line"
        )
    store = reads.store
    tips = await store.tips()
    wanted = sorted(set(await ids_in_force(store)) | set(tips))
    count = await reads.count()
    ordered, boundary, statements = await reads.layout(wanted)
    entries = await EntrySet(store, codec).fetch([bytes.fromhex(i) for i in ordered])
    signed = await AttestationSet(reads.notary()).fetch(await reads.author_ids(ordered))
    return SnapshotParts(
        count, tuple(tips), tuple(ordered), boundary, tuple(statements),
        tuple(entries.raws), tuple(entries.externals), tuple(signed.raws),
    )  # fmt: skip


def sign_snapshot(
    parts: SnapshotParts, line: str, identity: NodeIdentity, clock: Callable[[], str]
) -> ShallowSnapshot:
    """``parts`` under a head signed now by ``identity``."""
    head = ShallowHead(
        line=line,
        node_id=identity.node_id,
        ts=clock(),
        count=parts.count,
        entries=entries_digest(parts.ordered),
        attestations=attestations_digest([*parts.signed, *parts.statements]),
        tips=parts.tips,
        boundary=parts.boundary,
    )
    data, signature, public_key = sign_head(identity, head)
    return ShallowSnapshot(
        parts.signed, parts.statements, parts.entries, parts.externals, data, signature,
        public_key,
    )  # fmt: skip


async def snapshot_of(
    reads: SnapshotReads,
    line: str,
    identity: NodeIdentity,
    codec: EntryCodec,
    clock: Callable[[], str],
) -> ShallowSnapshot:
    """The signed snapshot of the line ``reads`` reads."""
    return sign_snapshot(await snapshot_parts(reads, line, codec), line, identity, clock)


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
    (entries added, attestations added).

    Its cross-line parents count against the cap, and are checked before anything is
    stored; only those naming a parent of the pushed entries are declared (as a session
    declares only those of the items it stores), never replacing a declaration held."""
    count = len(items.entries) + len(items.attestations) + len(items.externals)
    if count > MAX_PUSH_ITEMS:
        raise RemoteProtocolError(
            f"a push of {count} items, cross-line parents included (cap "
            f"MAX_PUSH_ITEMS = {MAX_PUSH_ITEMS}); sync in full instead"
        )
    atts, _statements, entry_set = sets
    signed = _parse(atts.codec, items.attestations, max_item_bytes)
    entries = _parse(entry_set.codec, items.entries, max_item_bytes)
    pushed = [i.value for i in entries if isinstance(i.value, Entry)]
    EntrySet.externals_of(items.externals, pushed)  # a bad one: refused before anything is stored
    taken = await atts.admit(signed, []) if signed else AdmitResult(0)
    if taken.refused:  # the caller hears it in the reply, rather than losing the entry
        raise BadSignature(f"refused the push: it carries {taken.refused[0]}")
    stored = await entry_set.admit(entries, items.externals) if entries else AdmitResult(0)
    if stored.refused:  # the rest is stored; the caller hears of the one left out
        raise InvalidEntry(f"refused part of the push: it carries {stored.refused[0]}")
    return stored.added, taken.added


class ServingNode(Protocol):
    """What the ``Shallow`` and ``Push`` calls ask of a node
    (:class:`~lifeline_mesh.node.root.Node`; a protocol, so the two do not import each
    other)."""

    @property
    def identity(self) -> NodeIdentity | None: ...
    @property
    def home(self) -> NodeHome: ...
    @property
    def lines(self) -> NodeLines: ...
    @property
    def limits(self) -> SessionLimits: ...
    @property
    def security(self) -> TransportSecurity: ...

    def clock(self) -> str: ...

    def is_shared(self, line: str) -> bool: ...

    def session(
        self, line: str, peer: SessionPeer | None = None, source: str | None = None
    ) -> AbstractAsyncContextManager[LineSession]: ...


def shallow_service(node: ServingNode, on_session: CallHook | None = None) -> ShallowService:
    """The ``Shallow`` and ``Push`` calls of ``node``'s sync port; each call is told to
    ``on_session`` as a session would be."""

    # Each line's last parts, by the line's version: CI jobs started together take one
    # build (~1 s of reads on a 1M-entry line), each under a head signed for it.
    kept: dict[str, tuple[Hashable, SnapshotParts]] = {}
    building = asyncio.Lock()

    async def snapshot(line: str, peer: SessionPeer) -> ShallowSnapshot:
        if node.identity is None:
            raise ShallowUnavailable(
                "this node serves no shallow snapshot (it has no signing key); sync in full"
            )
        async with building, node.lines.open(line) as opened:  # a line file, or a hub's
            reads = opened.snapshot_reads()
            version = await reads.version()
            found = kept.get(line)
            if found is None or found[0] != version:
                found = version, await snapshot_parts(reads, line, EntryCodec(node.home.limits()))
                kept[line] = found
        return sign_snapshot(found[1], line, node.identity, node.clock)

    async def admit(peer: SessionPeer, items: PushedItems) -> tuple[int, int]:
        async with node.session(items.line, peer) as session:
            return await admit_push(session.sets, items, node.limits.max_item_bytes)

    return ShallowService(
        node.security.authorizer, node.is_shared, snapshot, admit, on_session=on_session
    )
