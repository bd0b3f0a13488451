"""The session's parts that hold no protocol logic: limits, stats, per-set state, and the
hello's checks and capabilities (``session.py`` is the state machine)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from lifeline.errors import InvalidEntry, RemoteProtocolError
from lifeline_mesh.recon.closure import OrphanPool
from lifeline_mesh.recon.dialect import COMPACT_CAPABILITY, Dialect
from lifeline_mesh.recon.frames import Hello, Recon
from lifeline_mesh.recon.outbox import SetOutbox
from lifeline_mesh.recon.ranges import Responder
from lifeline_mesh.recon.received import NoIds, ReceivedIds
from lifeline_mesh.recon.runs import EMPTY, WholeRun, wants_whole
from lifeline_mesh.recon.sets import ItemCodec, ParsedItem, SetSummary, Snapshot
from lifeline_mesh.recon.summaries import (
    OPEN_CAPABILITY,
    SUMS_CAPABILITY,
    fingerprints,
    opening_record,
)

__all__ = [
    "CLOSING_ANY_CAPABILITY",
    "CLOSING_CAPABILITY",
    "KEEP_ALIVE_CAPABILITY",
    "PROTOCOL_VERSION",
    "Role",
    "SessionLimits",
    "SessionStats",
    "SetState",
    "capabilities",
    "check_hello",
    "closing_offered",
    "inactive",
]

PROTOCOL_VERSION = 1
# Version 1 implies the first wave's range-recon, versioned-tokens and externals (no node
# ever read those names, so hellos no longer carry them); only later ones are negotiated.
CAPABILITIES: tuple[str, ...] = ()
# The sender of a hello with this reads KeepAlive frames (the driver sends them to it while
# it builds a snapshot or stores a batch, so a long silence is not taken for a dead peer).
KEEP_ALIVE_CAPABILITY = "keep-alive"
# After a session that moved entries, each side sends the state statements it signed for
# them (its closing round, docs/protocol.md) and stores the peer's (decision 0059).
CLOSING_CAPABILITY = "closing"
# The closing round ends every session that moved items of any set, not only entries, so a
# side that sent a lone signature the peer refused is told (decision 0126). It implies
# ``closing``: a responder names it alone to an initiator that offered it.
CLOSING_ANY_CAPABILITY = "closing-any"
# The sender of a hello with this takes seals ahead of a whole run of the `attestations`
# set (one author signature over a batch of its signatures, decision 0149).
SEALS_CAPABILITY = "seals"


class Role(enum.Enum):
    INITIATOR = "initiator"
    RESPONDER = "responder"


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """Named caps; each error that trips one names it. Tests shrink them."""

    max_frame_bytes: int = 1 << 20
    max_items: int = 5_000_000  # items received per session
    orphan_pool: int = 10_000  # orphans kept in memory
    orphan_pool_bytes: int = 64 << 20  # and their raw bytes (about twice that once parsed)
    orphan_overflow: int = 1_000_000  # further orphans remembered by id, asked for again
    # Distinct cross-line parents a peer declares in one session (each set), and ids it
    # asks for by id (missing parents, remembered orphans: at most ~1.6 million from a
    # node with these caps): past either, the session is aborted.
    max_externals: int = 100_000
    max_wanted_ids: int = 2_000_000
    max_item_bytes: int = 256 * 1024
    # Inadmissible items (an entry whose id does not match its content, a damaged row the
    # peer read) refused one by one, the rest of their frame stored; past this many in one
    # session the peer is misbehaving and the session is aborted (decision 0111).
    max_refused: int = 1_000
    max_rounds: int = 32
    branch: int = 16
    leaf: int = 12
    fetch_chunk: int = 256
    session_timeout: float = 3600.0
    # Compact ranges (docs/protocol.md): offered in the hello, used when both sides offer it.
    compact_ranges: bool = True
    fingerprint_bytes: int = 8  # keyed fingerprints of the ranges this side sends
    short_id_bytes: int = 6  # keyed short ids in the id lists this side sends
    # Whole-set summaries first, snapshots only for sets that differ (off: a first-wave node)
    set_summaries: bool = True
    # With set_summaries: open in the hello (one record, no Recon frames) and read such an
    # opening as a responder (off: a node from before it; docs/protocol.md)
    open_sums: bool = True
    # Read KeepAlive frames, and say so in the hello (off: a node from before them)
    keep_alive: bool = True
    # Exchange the state statements a session's admissions made in a closing round, and
    # say so in the hello (off: a node from before it; the next session carries them)
    closing_round: bool = True
    # With closing_round: take that round after a session that moved any items, signatures
    # and statements too, and say so in the hello (off: a node from before it, whose round
    # follows only a session that moved entries)
    closing_any: bool = True
    # Take seals ahead of a whole run of signatures, and say so in the hello (off: a node
    # from before them, which would refuse the role; decision 0149)
    seals: bool = True

    def check_rounds(self, rounds: int) -> None:
        if rounds > self.max_rounds:
            raise RemoteProtocolError(
                f"reconciliation did not finish in {self.max_rounds} rounds "
                "(cap max_rounds); the peer keeps answering with new work"
            )

    def check_elapsed(self, seconds: float) -> None:
        if seconds > self.session_timeout:
            raise RemoteProtocolError(
                f"session ran longer than {self.session_timeout:.0f}s "
                "(cap session_timeout); sync again to continue"
            )


@dataclass(slots=True)
class SessionStats:
    items_sent: int = 0
    items_received: int = 0
    rounds: int = 0
    orphans_dropped: int = 0
    snapshots_loaded: int = 0  # sets whose sorted snapshot this side built (0 when in sync)
    refused: int = 0  # distinct inadmissible items refused (decision 0111)
    refusals: list[str] = field(default_factory=list)  # the first few reasons
    refused_digests: set[bytes] = field(default_factory=set)  # one sent twice counts once
    sent_by_set: dict[str, int] = field(default_factory=dict)
    received_by_set: dict[str, int] = field(default_factory=dict)

    def sent(self, name: str, count: int) -> None:
        """``count`` items of set ``name`` sent."""
        self.items_sent += count
        self.sent_by_set[name] = self.sent_by_set.get(name, 0) + count


class SetState:
    """One set in a session: its snapshot (once loaded), summary, answers and outbox."""

    def __init__(
        self, name: str, codec: ItemCodec, limits: SessionLimits, *, runnable: bool = False
    ) -> None:
        """``runnable``: this side can read the set in key order, a chunk at a time, with
        no snapshot (``FetchRun``), and so sends it that way whole to a peer that holds
        none of it (decision 0144)."""
        self.name = name
        self.codec = codec
        self.active = True
        self.snap = Snapshot.empty()
        self.loaded = False  # the snapshot is loaded (only sets that differ ever are)
        self.summary: SetSummary | None = None
        self.responder = Responder(self.snap, branch=limits.branch, leaf=limits.leaf)
        self.pool = OrphanPool(limits.orphan_pool, limits.orphan_overflow, limits.orphan_pool_bytes)
        # ids received, for the closure; none kept for a flat set (ItemCodec)
        self.received = NoIds() if getattr(codec, "flat", False) else ReceivedIds()
        self.externals: dict[bytes, str] = {}  # cross-line references the peer declared
        self.outbox = SetOutbox(limits.max_wanted_ids)
        self.runnable = runnable
        self.run: WholeRun | None = None  # the whole set sent in key order (decision 0144)

    def differs(self, theirs: dict[str, bytes]) -> bool:
        """Active, not loaded, and its whole-set fingerprint is not the peer's ``theirs``
        names (or it keeps none): its snapshot is needed."""
        mine = self.summary
        return (
            self.active
            and not self.loaded
            and (mine is None or theirs.get(self.name) != mine.fingerprint())
        )

    def needs_snapshot(self, theirs: dict[str, bytes]) -> bool:
        """The initiator, on the peer's hello naming the fingerprints ``theirs``: the set
        differs, and it is not one the peer holds none of that this side runs."""
        return self.differs(theirs) and not (self.runnable and theirs.get(self.name) == EMPTY)

    def runs_whole(self, frame: Recon, chunk: int) -> bool:
        """Whether ``frame`` says the peer holds none of this set, which this side runs,
        and so starts its run: the peer's opening with a count of 0, or its answer to ours
        wanting all of it. Sent in key order with no snapshot, parents first (decision
        0144). Anything else about the set later (a want, ranges) loads its snapshot."""
        if not self.runnable or self.loaded or self.run is not None:
            return False
        if wants_whole(frame):
            self.run = WholeRun(frame.set_index, chunk)
        return self.run is not None

    def load(self, snap: Snapshot, limits: SessionLimits, dialect: Dialect) -> None:
        self.snap = snap
        self.loaded = True
        self.responder = Responder(snap, branch=limits.branch, leaf=limits.leaf, dialect=dialect)

    def known(self, item_id: bytes) -> bool:
        return item_id in self.received or item_id in self.externals or self.snap.knows(item_id)


def check_hello(hello: Hello, line: str) -> None:
    """A peer's hello this session can go on with, or the reason it cannot."""
    if hello.protocol_version != PROTOCOL_VERSION:
        raise RemoteProtocolError(
            f"peer speaks protocol version {hello.protocol_version}, this node speaks "
            f"{PROTOCOL_VERSION}; upgrade the older node"
        )
    if hello.line != line:
        raise RemoteProtocolError(f"peer opened line {hello.line!r}, expected {line!r}")
    if hello.max_frame_bytes < 4096:
        raise RemoteProtocolError(f"peer frame limit {hello.max_frame_bytes} is below 4096")
    if hello.opening and len(hello.opening) != len(hello.sets):
        raise RemoteProtocolError("the hello's opening does not cover its sets one for one")


def capabilities(
    limits: SessionLimits, role: Role, peer: Hello | None = None, *, takes_runs: bool = True
) -> tuple[str, ...]:
    """What this side's hello offers (a responder's: in answer to the initiator's ``peer``).
    ``takes_runs``: this side may be sent a set whole (it holds none of one, or does not
    know yet); else it names no ``seals``, which go only ahead of a run (7 bytes fewer in
    the hello of every sync between two nodes that hold something of every set)."""
    caps: tuple[str, ...] = CAPABILITIES
    if limits.keep_alive:
        caps = (*caps, KEEP_ALIVE_CAPABILITY)
    if limits.closing_round:
        caps = (*caps, *_closing(limits, role, peer))
    if limits.compact_ranges:
        caps = (*caps, COMPACT_CAPABILITY)
    if limits.seals and takes_runs:
        caps = (*caps, SEALS_CAPABILITY)
    if limits.set_summaries:
        caps = (*caps, SUMS_CAPABILITY)
        if limits.open_sums and role is Role.RESPONDER:
            caps = (*caps, OPEN_CAPABILITY)  # the initiator's opening says it reads it
    return caps


def _closing(limits: SessionLimits, role: Role, peer: Hello | None) -> tuple[str, ...]:
    """The closing round's names. An initiator names both: an older responder reads only
    ``closing``. A responder answering an initiator that offered ``closing-any`` names that
    alone, which implies the other (9 bytes fewer in every session's hello)."""
    if not limits.closing_any:
        return (CLOSING_CAPABILITY,)
    if role is Role.RESPONDER and peer is not None and CLOSING_ANY_CAPABILITY in peer.capabilities:
        return (CLOSING_ANY_CAPABILITY,)
    return (CLOSING_CAPABILITY, CLOSING_ANY_CAPABILITY)


def closing_offered(hello: Hello) -> bool:
    """Whether the sender of ``hello`` takes a closing round (``closing-any`` implies it)."""
    return CLOSING_CAPABILITY in hello.capabilities or CLOSING_ANY_CAPABILITY in hello.capabilities


def inactive(name: str, limits: SessionLimits) -> SetState:
    """A set the peer offered that this node does not reconcile: frames for it are refused."""
    state = SetState(name, _NoCodec(), limits)
    state.active = False
    return state


class _NoCodec:
    def parse(self, raw: bytes) -> ParsedItem:
        raise InvalidEntry("this node does not reconcile that set")


def _takes_runs(sets: Sequence[SetState]) -> bool:
    """Whether a peer may send this side a set whole: it holds none of one of its sets, or
    has not read a set's summary yet (decision 0144 sends a run only to such a side)."""
    return any(s.summary is None or s.summary.count == 0 for s in sets if s.active)


def hello_for(
    line: str,
    sets: Sequence[SetState],
    limits: SessionLimits,
    role: Role,
    salt: bytes,
    peer: Hello | None,
    opened_in_hello: bool,
) -> Hello:
    """This side's hello: the sets it reconciles, its capabilities and caps, and the
    whole-set sums it may carry (the initiator's opening, the responder's fingerprints)."""
    opening: tuple[tuple[int, bytes], ...] = ()
    if role is Role.INITIATOR and opened_in_hello:
        opening = opening_record([s.summary for s in sets]) or ()
    summaries: tuple[bytes, ...] = ()
    if (
        role is Role.RESPONDER
        and peer is not None
        and SUMS_CAPABILITY in peer.capabilities
        and limits.set_summaries
    ):
        summaries = fingerprints([s.summary for s in sets if s.active])
    return Hello(
        protocol_version=PROTOCOL_VERSION,
        line=line,
        sets=tuple(s.name for s in sets if s.active),
        capabilities=capabilities(limits, role, peer, takes_runs=_takes_runs(sets)),
        max_frame_bytes=limits.max_frame_bytes,
        max_items=limits.max_items,
        salt=salt,
        summaries=summaries,
        opening=opening,
    )
