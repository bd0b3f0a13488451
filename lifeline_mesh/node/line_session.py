"""One sync session of one line, as the node runs it: its sets, its caller, what it admitted.

Made by :meth:`lifeline_mesh.node.root.Node.session` for a session dialed to us or one we
dial, it holds what the session needs from start to end — the line (store, notary and
snapshots matched, node/lines.py), the sets, the caller, the line's highest row when it
began — and ends itself: one state statement when it admitted new entries (DESIGN §6,
decision 0015; in its closing round when the peer takes one, decision 0059), the store's
upkeep, and what the peer now holds told to the scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lifeline.errors import LifelineError, PermissionDenied
from lifeline.store.grouped import commit_group
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.node.lines import NodeLine
from lifeline_mesh.node.security import TransportSecurity, peer_node_id
from lifeline_mesh.node.signatures_ahead import SignaturesAhead
from lifeline_mesh.node.witness_pace import WitnessPace
from lifeline_mesh.notary.attestation_set import AttestationSet
from lifeline_mesh.notary.notarized_set import NotarizedEntrySet
from lifeline_mesh.notary.sign import sign_state
from lifeline_mesh.notary.signers import KnownSigners
from lifeline_mesh.peering.scheduler import SyncScheduler
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.sync.guards import ReceiveOnly, SendNothing
from lifeline_mesh.sync.port import ReconSet
from lifeline_mesh.transport.authz import MeshRole, SessionPeer

__all__ = ["LineSession", "SessionParts"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SessionParts:
    """What every session of one node shares (held by the node, passed to each session)."""

    signers: Callable[[str | None, str | None], KnownSigners | None]
    security: TransportSecurity
    identity: NodeIdentity | None
    clock: Callable[[], str]
    scheduler: Callable[[], SyncScheduler | None]
    # rows taken over Watch calls are witnessed at most once per interval (decision 0091);
    # witness_later(line, seconds) signs the deferred statement then
    pace: WitnessPace = field(default_factory=WitnessPace)
    witness_later: Callable[[str, float], None] | None = None
    # why the node we dialed (its node id) may not send us items — a reader — or None
    may_send: Callable[[str | None], str | None] = lambda _node_id: None
    # why no session on a line runs with the node we dialed (its node id), or None
    line_refused: Callable[[str | None, str], str | None] = lambda _node_id, _line: None


class LineSession:
    """The sets of one session on ``line`` and what it did (see the module docstring)."""

    def __init__(
        self,
        parts: SessionParts,
        line: NodeLine,
        codec: EntryCodec,
        peer: SessionPeer | None = None,
        source: str | None = None,
        *,
        live: bool = False,
    ) -> None:
        self.parts, self.line, self.peer = parts, line, peer
        self.live = live  # rows taken over a Watch call, not a session (witness_pace.py)
        self.caller = peer_node_id(peer.identity) if peer is not None else None
        # source: the node we dialed (a caller: its certificate's)
        source = self.caller if peer is not None else source
        if peer is None and (why := parts.line_refused(source, line.name)):
            raise PermissionDenied(why)
        local = parts.identity.node_id if parts.identity else None
        signers = parts.signers(local, self.caller)
        notary = line.notary(signers, parts.clock, source)
        self.entries = NotarizedEntrySet(line.entries(codec), notary)
        self.entries.on_close = self._witness
        statements = notary.statements()
        authors = AttestationSet(notary, line.attestation_snapshots(notary))
        self.entries.ahead = SignaturesAhead(line, authors)
        sets: list[ReconSet] = [
            authors,
            AttestationSet(statements, line.attestation_snapshots(statements)),
            self.entries,
        ]
        # A reader sends nothing, whoever dialed: refused by the other side in every
        # session, be it the caller or the node dialed (a reader gets nothing in by being
        # dialed), and its own side offers nothing in either.
        if peer is not None:
            refusal = None if peer.can_write else peer.why_not or "it may not write here"
        else:
            refusal = parts.may_send(source)
        if refusal is not None:
            sets = [ReceiveOnly(s, refusal) for s in sets]
        if parts.security.role is MeshRole.READER:
            sets = [SendNothing(s) for s in sets]  # a reader's own side offers nothing
        self.sets: Sequence[ReconSet] = sets
        self.start: int | None = None
        self.held: int | None = None  # what the peer holds after it (our own sessions)

    async def begin(self) -> None:
        self.start = await self.line.mark()
        scheduler = self.parts.scheduler()
        if self.peer is not None and scheduler is not None:
            scheduler.inbound_started(self.caller)

    async def end(self, *, ok: bool) -> None:
        """Sign the new state (if any), keep the store, and say what the peer holds."""
        try:
            await self._witness(self.line.name)
        finally:
            await self.line.finish(self.entries.admitted, ok=ok)
        held = None
        role = self.parts.security.role
        if ok and self.start is not None and role is not MeshRole.READER:
            end = await self.line.mark()
            if end is not None and end - self.start == self.entries.admitted:
                held = end
        if self.peer is None:
            self.held = held  # our own session: Node.sync reads it
            return
        scheduler = self.parts.scheduler()
        if scheduler is not None:
            marks = None if held is None else {self.line.name: held}
            scheduler.inbound_ended(self.caller, marks, ok=ok and self.start is not None)

    async def _witness(self, line: str) -> list[bytes]:
        """One state statement after a session that admitted new entries (none otherwise);
        never twice for one state (``sign_state`` signs only a state it has not)."""
        identity = self.parts.identity
        if not self.entries.admitted or identity is None:
            return []
        if self.parts.security.ephemeral:
            # A runner's statements would outlive it for nothing (the node it syncs with
            # witnesses what it wrote) and would grow the line by one per job.
            return []
        pace = self.parts.pace
        if self.live or pace.sampling():
            wait = pace.now_or_later(line)
            if wait is None:
                return []  # other nodes of the LAN witness this interval (decision 0095)
            if wait > 0:
                later = self.parts.witness_later
                if later is not None and self.parts.pace.defer(line):
                    later(line, wait)
                return []
        try:
            # what the statement names is committed first (a grouped pull: sqlite_group)
            await commit_group(self.line.store)
            atts = await sign_state(self.entries.notary, identity, line, self.parts.clock)
        except LifelineError as exc:  # the entries are stored; the next session signs
            log.warning("line %s: no state statement signed: %s", line, exc)
            return []
        return [a.item for a in atts]
