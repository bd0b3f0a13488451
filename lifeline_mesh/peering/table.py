"""The peer table: every peer this node syncs with, where it came from, how it is doing.

Static peers come from the config file and ``--peer HOST:PORT``; discovered peers come and
go with LAN adverts. A static peer that is also discovered stays one row (it learns its
node id). The table is written to ``NodeHome.peers_path`` after each change so
``lifeline-mesh peers`` can show it from another process while the node runs.
"""

from __future__ import annotations

import enum
import ipaddress
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lifeline.errors import ConfigError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.transport.addresses import split_address

__all__ = [
    "PeerAddress",
    "PeerSource",
    "PeerState",
    "PeerTable",
    "Wake",
    "load_peers_file",
    "save_peers_file",
]


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
        }


class PeerTable:
    """The peers by key: ``static:HOST:PORT`` or ``node:<node id>``."""

    def __init__(self) -> None:
        self._peers: dict[str, PeerState] = {}

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

    def discovered(self, node_id: str, addresses: tuple[PeerAddress, ...]) -> PeerState:
        """Record a LAN advert; returns the row to sync (a static row when one matches)."""
        if not addresses:
            raise ValueError("a discovered peer needs at least one address")
        for peer in self._peers.values():
            if PeerSource.STATIC in peer.sources and (
                peer.node_id == node_id or peer.address in addresses
            ):
                peer.sources.add(PeerSource.DISCOVERED)
                peer.node_id = node_id
                return peer
        key = f"node:{node_id}"
        peer = self._peers.get(key) or PeerState(key, addresses[0], {PeerSource.DISCOVERED})
        peer.sources.add(PeerSource.DISCOVERED)
        peer.node_id, peer.addresses = node_id, addresses
        if peer.address not in addresses:
            peer.address = addresses[0]
        self._peers[key] = peer
        return peer

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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".peers-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


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
