"""How many calls of one kind a node serves at once: in all, and for any one caller.

An admitted caller (a reader is enough) could open sessions until the node ran out of
file descriptors: each idle session holds its line open (two descriptors), and with
``ulimit -n 1024`` 494 of them left an honest member's sync failing with a TLS error
and the join port unreachable. A :class:`CallGate` counts the calls it lets in, by the
caller's certificate (without TLS, by its connection), and refuses one more past
either cap with :class:`~lifeline.errors.Busy` (RESOURCE_EXHAUSTED, details starting
``busy:``), before the call opens anything. docs/security.md, "What an admitted caller
can hold".
"""

from __future__ import annotations

import hashlib
import resource
from collections.abc import Iterator
from contextlib import contextmanager

from lifeline.errors import Busy
from lifeline_mesh.transport.authz import PeerIdentity
from lifeline_mesh.transport.errors import BUSY

__all__ = [
    "CONNECTION_IDLE_S",
    "MAX_CONNECTIONS",
    "MAX_SESSIONS",
    "MAX_SESSIONS_PER_CALLER",
    "MAX_SHALLOW_CALLS",
    "MAX_SHALLOW_CALLS_PER_CALLER",
    "CallGate",
    "caller_key",
    "connection_options",
    "connections_for_this_process",
    "raise_open_file_limit",
    "sessions_for_this_process",
]

# Sync sessions at once on a node: a hub process whose laptops (a few hundred) all sync
# after a write, within the open-file limit (:func:`sessions_for_this_process`).
MAX_SESSIONS = 512
# ... and from one caller: an honest node runs one session with a peer at a time (its
# scheduler), plus a `sync` by hand, plus sessions of a connection that died unnoticed.
MAX_SESSIONS_PER_CALLER = 8
# Shallow and Push calls at once (a CI fleet's jobs starting together), and per caller (a
# job makes one pull and one push, one after the other).
MAX_SHALLOW_CALLS = 64
MAX_SHALLOW_CALLS_PER_CALLER = 4
DESCRIPTORS_PER_SESSION = 8  # two held, and room for the connections and the rest
# Connections open at once on a gRPC port, whatever they carry. gRPC counts them only in
# all, neither per certificate nor per source address: a cap below the open-file limit
# keeps descriptors for the node's own work (its line files, sessions, dials) when one
# caller opens hundreds that carry no call (decision 0134). An idle TLS connection holds
# ~66 KB of a `serve`: ~270 MB at the cap.
MAX_CONNECTIONS = 4096
CONNECTIONS_SHARE = 4  # at most a quarter of the open-file limit on the sync port
# A connection that carries no call for this long is closed (an HTTP/2 GOAWAY; a client
# with more to say opens another at its next call). Honest ones are rarely idle: a
# following node keeps a Watch call open on its connection, a `sync` closes its own.
CONNECTION_IDLE_S = 30.0
# The soft open-file limit `serve` raises itself to, within the hard limit: a shell's
# 1,024 would otherwise bound every cap above to a few hundred.
OPEN_FILES_WANTED = 65_536


def sessions_for_this_process(cap: int = MAX_SESSIONS) -> int:
    """``cap``, lowered to an eighth of the open-file limit (1,024 → 128 sessions): a
    session holds two descriptors, and the connections, the join port, the line files and
    the node's own syncs need the rest."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return cap
    return max(16, min(cap, soft // DESCRIPTORS_PER_SESSION))


def connections_for_this_process(share: int = CONNECTIONS_SHARE) -> int:
    """:data:`MAX_CONNECTIONS`, lowered to ``1/share`` of the open-file limit (1,024 → 256
    connections on the sync port)."""
    cap = MAX_CONNECTIONS
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return cap
    return min(cap, max(16, soft // share))


def connection_options(share: int = CONNECTIONS_SHARE) -> list[tuple[str, int]]:
    """A gRPC server's options that cap its connections (:func:`connections_for_this_process`)
    and close those idle for :data:`CONNECTION_IDLE_S`."""
    return [
        ("grpc.max_allowed_incoming_connections", connections_for_this_process(share=share)),
        ("grpc.max_connection_idle_ms", int(CONNECTION_IDLE_S * 1000)),
    ]


def raise_open_file_limit(wanted: int = OPEN_FILES_WANTED) -> int:
    """Raise this process's soft open-file limit to ``wanted``, or to the hard limit if that
    is lower (nothing here uses ``select()``, which needs descriptors below 1,024); returns
    the soft limit in force. A limit already higher is kept."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft  # a container's seccomp profile, say: the caps follow the soft one
        return target
    return soft


def caller_key(peer: PeerIdentity) -> str:
    """Who a call is from, for counting: the certificate TLS verified (its hash), else the
    connection's address (plain text is loopback only)."""
    certificates = peer.auth_context.get("x509_pem_cert") or ()
    if certificates:
        return "cert:" + hashlib.sha256(certificates[0]).hexdigest()
    return "address:" + peer.address


class CallGate:
    """Counts the calls of one kind running now; :meth:`held` lets one in or refuses it.

    ``what`` names the calls in a refusal (``sessions``), ``caps`` the two constants
    (node's, caller's) it quotes. Both caps are attributes: tests shrink them."""

    def __init__(self, what: str, total: int, per_caller: int, caps: tuple[str, str]) -> None:
        self.what = what
        self.total = total
        self.per_caller = per_caller
        self._caps = caps
        self.running = 0
        self._by_caller: dict[str, int] = {}
        self.refused = 0

    def enter(self, key: str) -> None:
        """Count one more call of ``key``, or raise :class:`Busy` past either cap."""
        mine = self._by_caller.get(key, 0)
        if mine >= self.per_caller:
            self.refused += 1
            raise Busy(
                f"{BUSY}this caller already has {mine} {self.what} running on this node "
                f"(cap {self._caps[1]} = {self.per_caller}); try again once one has ended"
            )
        if self.running >= self.total:
            self.refused += 1
            raise Busy(
                f"{BUSY}{self.running} {self.what} are running on this node (cap "
                f"{self._caps[0]} = {self.total}); try again in a moment"
            )
        self.running += 1
        self._by_caller[key] = mine + 1

    def leave(self, key: str) -> None:
        self.running -= 1
        left = self._by_caller[key] - 1
        if left:
            self._by_caller[key] = left
        else:
            del self._by_caller[key]

    @contextmanager
    def held(self, key: str) -> Iterator[None]:
        """One call of ``key`` counted for the block (:class:`Busy` if it may not run)."""
        self.enter(key)
        try:
            yield
        finally:
            self.leave(key)

    def callers(self) -> int:
        """Callers with a call running now."""
        return len(self._by_caller)
