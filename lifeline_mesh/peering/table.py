"""The peer table: every peer this node syncs with, where it came from, how it is doing.

Static peers come from the config file and ``--peer HOST:PORT``; discovered peers come and
go with LAN adverts. A static peer that is also discovered stays one row (it learns its
node id). The table is written to ``NodeHome.peers_path`` after each change so
``lifeline-mesh peers`` can show it from another process while the node runs.

Anyone on a LAN can send an advert naming a member's node id with another address
(decision 0121). So the table keeps the node found answering at each address it dialed
(``serving``: a Watch call's hello, over a channel pinned to the certificate served
there), and an advert never moves a row off an address its node answered at: the
advert's addresses are kept as candidates (``PeerState.addresses``, at most
``MAX_CANDIDATES``), tried only when the current one fails; one that failed before its
node answered there is dropped, and one where another node answers is never tried again.
"""

from __future__ import annotations

import enum
import ipaddress
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lifeline.errors import ConfigError
from lifeline.fsutil import atomic_file
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.transport.addresses import split_address

__all__ = [
    "MAX_CANDIDATES",
    "PeerAddress",
    "PeerSource",
    "PeerState",
    "PeerTable",
    "Wake",
    "load_peers_file",
    "save_peers_file",
]


MAX_CANDIDATES = 4  # addresses a discovered row keeps to try in turn


class PeerSource(enum.Enum):
    STATIC = "static"
    DISCOVERED = "discovered"
    WATCHER = "watcher"  # it watches us and said where it serves: we watch it back


@dataclass(frozen=True, slots=True, order=True)
class PeerAddress:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> PeerAddress:
        """``HOST:PORT`` or ``[IPV6]:PORT``; a ConfigError shows the value otherwise."""
        return cls(*split_address(text, what="peer"))

    def __str__(self) -> str:
        try:
            is_v6 = ipaddress.ip_address(self.host.split("%")[0]).version == 6
        except ValueError:
            is_v6 = False
        return f"[{self.host}]:{self.port}" if is_v6 else f"{self.host}:{self.port}"


@dataclass(slots=True)
class Wake:
    """Why a peer was made due early, so the scheduler can tell at its time whether the
    session is still needed: ``marks``, our lines' highest rows it may lack; ``announced``,
    when it announced a change (answered by any session with it since); ``fallback``, the
    attempt time to go back to when neither holds; ``hard``: needed whatever happened."""

    fallback: float
    marks: dict[str, int] = field(default_factory=dict)
    announced: float | None = None
    hard: bool = False
    # A catch-up (a fresh Watch call, decision 0099): until ``catch_up_until`` it waits
    # while another session of this node runs (``deferred``), then runs whatever happened
    catch_up_until: float | None = None
    deferred: bool = False

    def add(self, marks: dict[str, int] | None, announced: float | None, hard: bool) -> None:
        for line, mark in (marks or {}).items():
            self.marks[line] = max(mark, self.marks.get(line, mark))
        if announced is not None:
            self.announced = max(announced, self.announced or announced)
        self.hard = self.hard or hard


@dataclass(slots=True)
class PeerState:
    """One peer and its sync bookkeeping (times: ``*_at`` wall clock, ``next_attempt`` the
    scheduler's monotonic clock)."""

    key: str
    address: PeerAddress
    sources: set[PeerSource]
    node_id: str | None = None
    last_sync_at: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    last_result: str | None = None
    failures: int = 0
    syncs: int = 0  # sessions with it this node started (since it started)
    next_attempt: float = 0.0
    in_flight: bool = False
    resync: bool = False  # a local change arrived during the running session
    addresses: tuple[PeerAddress, ...] = field(default_factory=tuple)
    # Fewer sessions per change (``schedule.py``): what this peer is known to hold (the
    # highest row of each line it held when a session with it ended), when it last dialed
    # us, when a session with it last ran, and the conditions of a pending wake-up.
    synced: dict[str, int] = field(default_factory=dict)
    dialed_in_at: float | None = None
    touched_at: float | None = None
    wake: Wake | None = None  # the next attempt is conditional (None: it is not)
    pending: Wake | None = None  # conditions of changes seen while a session ran

    def to_json(self, *, mono_now: float, wall_now: float) -> dict[str, Any]:
        wait = max(0.0, self.next_attempt - mono_now)
        return {
            "key": self.key,
            "address": str(self.address),
            "node_id": self.node_id,
            "sources": sorted(s.value for s in self.sources),
            "last_sync_at": self.last_sync_at,
            "last_result": self.last_result,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "failures": self.failures,
            "syncs": self.syncs,
            "next_attempt_at": None if self.in_flight else wall_now + wait,
            "syncing": self.in_flight,
            "candidates": [str(a) for a in self.addresses if a != self.address],
        }


class PeerTable:
    """The peers by key: ``static:HOST:PORT`` or ``node:<node id>``."""

    def __init__(self) -> None:
        self._peers: dict[str, PeerState] = {}
        # The node that answered at each address dialed (bounded by the members' addresses)
        self.serving: dict[PeerAddress, str] = {}

    def __iter__(self) -> Iterator[PeerState]:
        return iter(sorted(self._peers.values(), key=lambda p: p.key))

    def __len__(self) -> int:
        return len(self._peers)

    def __contains__(self, key: object) -> bool:
        return key in self._peers

    def get(self, key: str) -> PeerState:
        return self._peers[key]

    def add_static(self, address: PeerAddress) -> PeerState:
        key = f"static:{address}"
        peer = self._peers.setdefault(
            key, PeerState(key, address, {PeerSource.STATIC}, addresses=(address,))
        )
        return peer

    def discovered(self, node_id: str, addresses: tuple[PeerAddress, ...]) -> PeerState | None:
        """Record a LAN advert; returns the row to sync (a static row when one matches), or
        None when another node answered at every address it names."""
        if not addresses:
            raise ValueError("a discovered peer needs at least one address")
        addresses = tuple(a for a in addresses if self.serving.get(a, node_id) == node_id)
        for static in self._peers.values():
            if PeerSource.STATIC in static.sources and (
                static.node_id == node_id or static.address in addresses
            ):
                static.sources.add(PeerSource.DISCOVERED)
                static.node_id = node_id
                return static
        key = f"node:{node_id}"
        held = self._peers.get(key)
        candidates = self._candidates(node_id, addresses, held.addresses if held else ())
        if not candidates:
            return None
        peer = held or PeerState(key, candidates[0], {PeerSource.DISCOVERED})
        self._peers[key] = peer
        peer.sources.add(PeerSource.DISCOVERED)
        peer.node_id, peer.addresses = node_id, candidates
        if not self._answered(peer) or peer.address not in candidates:
            peer.address = candidates[0]  # an address its node answered at stays
        return peer

    def _candidates(
        self, node_id: str, *groups: tuple[PeerAddress, ...]
    ) -> tuple[PeerAddress, ...]:
        """The addresses to try for ``node_id``: those it answered at first, then
        ``groups`` in order, none where another node answered, at most MAX_CANDIDATES."""
        answered = [a for a, n in self.serving.items() if n == node_id]
        merged = dict.fromkeys([*answered, *(a for g in groups for a in g)])
        kept = [a for a in merged if self.serving.get(a, node_id) == node_id]
        return tuple(kept[:MAX_CANDIDATES])

    def _answered(self, peer: PeerState) -> bool:
        """Whether ``peer``'s node answered at its current address."""
        return peer.node_id is not None and self.serving.get(peer.address) == peer.node_id

    def unreachable(self, peer: PeerState, dialed: PeerAddress) -> bool:
        """A session or Watch call dialed to ``dialed`` failed: a discovered row moves to
        its next candidate; ``dialed`` stays one only when its node answered there before.
        Returns whether the row moved."""
        if dialed != peer.address or len(peer.addresses) < 2 or PeerSource.STATIC in peer.sources:
            return False
        at = peer.addresses.index(dialed) if dialed in peer.addresses else -1
        following = peer.addresses[(at + 1) % len(peer.addresses)]
        if not self._answered(peer):
            peer.addresses = tuple(a for a in peer.addresses if a != dialed)
        peer.address = following
        return True

    def answered(self, peer: PeerState, node_id: str, address: PeerAddress) -> bool:
        """Node ``node_id`` answered at ``address``, dialed for ``peer`` (a Watch call's
        hello). A static row learns who it is; a row of another node drops the address
        (and goes when it has no other): False then."""
        self.serving[address] = node_id
        if peer.node_id is None or PeerSource.STATIC in peer.sources:
            self.learned(peer, node_id)
            return True
        if peer.node_id == node_id:
            peer.addresses = self._candidates(node_id, (address,), peer.addresses)
            if not self._answered(peer):
                peer.address = address
            return True
        rest = tuple(a for a in peer.addresses if a != address)
        if not rest:
            del self._peers[peer.key]
        elif peer.address not in rest:
            peer.address, peer.addresses = rest[0], rest
        else:
            peer.addresses = rest
        return False

    def learned(self, peer: PeerState, node_id: str) -> None:
        """A session told us who ``peer`` is: merge a discovered row of the same node into it."""
        peer.node_id = node_id
        twin = self._peers.get(f"node:{node_id}")
        if twin is not None and twin is not peer and PeerSource.STATIC in peer.sources:
            peer.sources.add(PeerSource.DISCOVERED)
            del self._peers[twin.key]

    def lost(self, node_id: str) -> list[str]:
        """A node withdrew its advert: drop discovered-only rows, keep static ones."""
        gone = []
        for key, peer in list(self._peers.items()):
            if peer.node_id != node_id or PeerSource.DISCOVERED not in peer.sources:
                continue
            peer.sources.discard(PeerSource.DISCOVERED)
            if not peer.sources:
                del self._peers[key]
                gone.append(key)
        return gone

    def watched_by(self, node_id: str, address: PeerAddress) -> PeerState | None:
        """Node ``node_id``, which watches us, serves at ``address``: a row to watch it
        back, or None when it has a row already (a static row at that address learns
        who it is)."""
        for peer in self._peers.values():
            if peer.node_id == node_id:
                if PeerSource.STATIC not in peer.sources and address not in peer.addresses:
                    # its own call says where it serves: tried before any unanswered one
                    peer.addresses = self._candidates(node_id, (address,), peer.addresses)
                    if not self._answered(peer) and address in peer.addresses:
                        peer.address = address
                return None
            if peer.node_id is None and peer.address == address:
                self.learned(peer, node_id)
                return None
        key = f"node:{node_id}"
        peer = PeerState(key, address, {PeerSource.WATCHER}, node_id=node_id)
        peer.addresses = (address,)
        self._peers[key] = peer
        return peer

    def unwatched(self, node_id: str) -> bool:
        """Node ``node_id`` no longer watches us: a row kept only for that goes."""
        peer = self._peers.get(f"node:{node_id}")
        if peer is None or PeerSource.WATCHER not in peer.sources:
            return False
        peer.sources.discard(PeerSource.WATCHER)
        if not peer.sources:
            del self._peers[peer.key]
            return True
        return False

    def to_json(self, *, mono_now: float, wall_now: float) -> list[dict[str, Any]]:
        return [p.to_json(mono_now=mono_now, wall_now=wall_now) for p in self]


def save_peers_file(
    home: NodeHome, rows: list[dict[str, Any]], *, pid: int, wall_now: float
) -> None:
    """Write the table atomically so a reader never sees half a file."""
    path = home.peers_path
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"version": 1, "pid": pid, "updated_at": wall_now, "peers": rows}
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    # not fsynced: rewritten as peers come and go; a crash loses only its last rows
    with atomic_file(path, mode=0o600, durable=False) as out:
        out.write(text.encode("utf-8"))


def load_peers_file(home: NodeHome) -> dict[str, Any] | None:
    """The last table a node wrote, or None when no node has run here."""
    path = home.peers_path
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(
            f"{path} is not valid JSON ({exc}); delete it, the node rewrites it"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("peers"), list):
        raise ConfigError(f"{path} has no peer list; delete it, the node rewrites it")
    return data
