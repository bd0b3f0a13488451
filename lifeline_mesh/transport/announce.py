"""The Watch RPC, both ends: a node that dialed a peer hears of the peer's changes at once.

Sync sessions are opened by the dialing side, so a node that can only dial out (a CI runner
behind NAT, a laptop on hotel Wi-Fi) would learn of its peer's new entries only at its next
periodic sync. With Watch it keeps one server-streaming call open to each peer it dials;
the peer announces each change of a shared line the caller may read, and the caller runs a
sync session at once (docs/protocol.md, "Watch"). The call needs no more trust than a
session: read access, checked per line at every announcement (an unshared line or a revoked
caller hears nothing more).

A caller that asks for items (capability "watch-items", decision 0046) gets, with each
change of a line, the line's new rows — author attestations, then entries, parents first —
when the announcer had them at hand (:class:`ChangeItems`), and admits them as it would a
session's items: a write reaches a watching peer without any session. A change announced
without its rows (too many, or not read in time) makes the caller sync as before. Rows
carry the tree of relays they travel on (``tree_of`` their origin); a caller's own
announcements back to a peer may ask it to leave the caller out of some trees (``prune``)
or to send it every tree again (``graft``): decision 0083.

The caller is authenticated before anything else (``Authorizer.authenticate``): a call
without a mesh certificate, or from a revoked node, is refused whether or not it names
lines, as every method but Join is. A request naming more than ``MAX_WATCH_LINES`` lines
is refused before anything is built from it. An accepted call holds a subscription (~30 KB)
for as long as the caller keeps it open, so calls are counted like sessions
(``transport/call_caps.py``): at most ``MAX_WATCHES_PER_CALLER`` from one caller and
``MAX_WATCHES`` on the node, more refused at once as busy (docs/security.md, "What an
admitted caller can hold": one caller held 10,000 calls, +290 MB, before).

A heartbeat (an empty announcement) every ``WATCH_HEARTBEAT_S`` keeps NAT mappings open
and lets the caller notice a dead peer (no message for ``WATCH_IDLE_S``) and dial again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractContextManager, aclosing, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from lifeline.errors import LifelineError, PeerError, Refused, RemoteProtocolError
from lifeline_mesh.transport.authz import Access, Authorizer, PeerIdentity, identity_of
from lifeline_mesh.transport.call_caps import CallGate, caller_key
from lifeline_mesh.transport.channels import open_channel
from lifeline_mesh.transport.errors import error_from_rpc, status_for
from lifeline_mesh.transport.refusals import QuietLog, cut, peer_host, quote_all
from lifeline_mesh.wire import sync_pb2 as pb

__all__ = [
    "MAX_CHANGE_BYTES",
    "MAX_CHANGE_ITEMS",
    "MAX_WATCHES",
    "MAX_WATCHES_PER_CALLER",
    "MAX_WATCH_LINES",
    "WATCH_HEARTBEAT_S",
    "WATCH_IDLE_S",
    "WATCH_METHOD",
    "Announcements",
    "ChangeItems",
    "LineChange",
    "WatchService",
    "tree_of",
    "watch_lines",
]

log = logging.getLogger(__name__)

WATCH_METHOD = "/lifeline_mesh.v1.Mesh/Watch"
WATCH_HEARTBEAT_S = 20.0  # below common NAT idle timeouts (30 s for some UDP/TCP tables)
WATCH_IDLE_S = 3 * WATCH_HEARTBEAT_S
# The most rows one announcement carries (entries, and as many bytes of items in all): a
# larger change is announced without them and the caller syncs. Far under the frame caps.
MAX_CHANGE_ITEMS = 256
MAX_CHANGE_BYTES = 1 << 20
MAX_WATCH_LINES = 1024  # lines one Watch call may name
# Watch calls open at once from one caller: an honest node keeps one to each peer it dials,
# plus a call whose connection died unnoticed until its keepalive says so (decision 0130).
MAX_WATCHES_PER_CALLER = 8
# ... and on the node: a hub's laptops keep one each (MAX_SESSIONS is sized for a few
# hundred syncing at once); 4,096 calls hold ~120 MB.
MAX_WATCHES = 4096
_SETS = ("attestations", "entries")  # the sets an announcement's items belong to, in order
TREE_BYTES = 8  # a tree of relays is named by this many bytes of sha256(its origin's id)


def tree_of(node_id: str | None) -> bytes:
    """The name of the tree of relays of the rows ``node_id`` announces first (decision
    0083); empty without a node id (then its rows are relayed to every peer)."""
    return hashlib.sha256(node_id.encode()).digest()[:TREE_BYTES] if node_id else b""


@dataclass(frozen=True, slots=True)
class ChangeItems:
    """The new rows of one line: the author attestations of its new entries (and the
    enrollments of runners among their signers) and the entries, parents first, with the
    cross-line parents they name (``(id, line)``)."""

    line: str
    attestations: tuple[bytes, ...]
    entries: tuple[bytes, ...]
    externals: tuple[tuple[bytes, str], ...] = ()
    # The node these rows were taken from, when they are exactly the rows it announced to
    # us (not sent on the wire): it is not sent them back (decision 0066).
    source: str | None = None
    # The tree these rows travel on (decision 0083): 8 bytes naming the node that first
    # announced them, kept by every relay; empty when unknown (an older peer, merged rows).
    tree: bytes = b""

    @property
    def size(self) -> int:
        return sum(map(len, self.attestations)) + sum(map(len, self.entries))

    def then(self, later: ChangeItems) -> ChangeItems:
        """This change followed by ``later`` (of the same line), as one."""
        return ChangeItems(
            self.line,
            self.attestations + later.attestations,
            self.entries + later.entries,
            tuple(dict.fromkeys(self.externals + later.externals)),
            tree=self.tree if self.tree == later.tree else b"",
        )

    def fits(self) -> bool:
        return len(self.entries) <= MAX_CHANGE_ITEMS and self.size <= MAX_CHANGE_BYTES


@dataclass(frozen=True, slots=True)
class LineChange:
    """An announcement: these lines changed (``initial``: the call was just accepted;
    ``node_id``: on the initial one, the announcing node's id when it has one; ``items``:
    the new rows of one of the lines, when the caller asked for them; ``sends_rows``: on
    the initial one, the peer sends rows to the callers that ask, and so never dials them
    for a change of its own; ``prune``/``graft``: the peer asks us to leave it out of
    these trees of relays / to send it every tree again, decision 0083)."""

    lines: tuple[str, ...]
    initial: bool = False
    node_id: str | None = None
    items: ChangeItems | None = None
    sends_rows: bool = False
    prune: tuple[bytes, ...] = ()
    graft: bool = False


class Subscription(Protocol):
    async def next(self, timeout: float | None = None) -> set[str] | None: ...

    def take_items(self) -> dict[str, list[ChangeItems]]:
        """The rows of the lines of the last ``next`` whose every change came with them, a
        run per tree of relays."""
        ...

    def take_control(self) -> tuple[tuple[bytes, ...], bool]:
        """What this node asks the caller about relays since the last call: the trees to
        leave it out of, and whether to send it every tree again (decision 0083)."""
        ...


class Announcements(Protocol):
    """Where the server learns of its lines' changes (``peering.changes.ChangeFeed``)."""

    def shared_lines(self) -> Sequence[str]: ...

    def subscribe(
        self, *, items: bool = False, node: str | None = None
    ) -> AbstractContextManager[Subscription]:
        """``node``: the caller's node id, when known (rows it sent us are not echoed)."""
        ...

    def close(self) -> None:
        """End every subscription (the server is stopping)."""


class WatchService:
    """The server end: one async generator per Watch call."""

    def __init__(
        self,
        announcements: Announcements,
        is_shared: Callable[[str], bool],
        authorizer: Authorizer,
        heartbeat: float = WATCH_HEARTBEAT_S,
        node_id: str | None = None,
    ) -> None:
        self._announcements = announcements
        self._node_id = node_id
        self._is_shared = is_shared
        self._authorizer = authorizer
        self._heartbeat = heartbeat
        self.calls = 0  # calls accepted so far (tests, status)
        self.refused = 0  # calls refused so far
        # Calls open now, in all and per caller (each holds a subscription while it lasts)
        self.open = CallGate(
            "watch calls",
            MAX_WATCHES,
            MAX_WATCHES_PER_CALLER,
            ("MAX_WATCHES", "MAX_WATCHES_PER_CALLER"),
        )
        self.quiet_log = QuietLog(log)
        # Callers of the open calls that take items: a change of ours reaches each of them
        # over its call, so the node's scheduler need not start a session for it.
        self.item_callers: list[PeerIdentity] = []
        # Told of each caller that can be dialled back (its address and the port it gave)
        # when its call opens (True) and ends (False): the node may watch it back.
        self.on_watcher: Callable[[PeerIdentity, str, bool], None] | None = None
        # The caller's node id from its certificate (None without TLS), set by the node.
        self.caller_id: Callable[[PeerIdentity], str | None] | None = None

    def handler(self) -> grpc.RpcMethodHandler[Any, Any]:
        return grpc.unary_stream_rpc_method_handler(
            self.watch,
            request_deserializer=pb.WatchRequest.FromString,
            response_serializer=pb.LineChange.SerializeToString,
        )

    async def watch(
        self, request: pb.WatchRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.LineChange]:
        peer = identity_of(context)
        try:
            await self._authorizer.authenticate(peer)
            if len(request.lines) > MAX_WATCH_LINES:
                raise RemoteProtocolError(
                    f"a watch naming {len(request.lines)} lines (cap MAX_WATCH_LINES = "
                    f"{MAX_WATCH_LINES}); name fewer, or none for every line"
                )
            key = caller_key(peer)
            self.open.enter(key)  # Busy past either cap, before anything is held
        except LifelineError as exc:
            await self._refuse(context, exc)
            return
        try:
            # aclosing: the call's end (the caller gone, the server stopping) ends the
            # subscription now, not when the inner generator is collected
            async with aclosing(self._announce(request, peer, context)) as changes:
                async for change in changes:
                    yield change
        finally:
            self.open.leave(key)

    async def _announce(
        self,
        request: pb.WatchRequest,
        peer: PeerIdentity,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncGenerator[pb.LineChange, None]:
        """An accepted call, counted: the first announcement, then each change."""
        wanted = frozenset(request.lines)
        node = self.caller_id(peer) if self.caller_id is not None else None
        with self._announcements.subscribe(items=request.items, node=node) as sub:
            try:
                first = await self._readable(peer, wanted, self._announcements.shared_lines())
                if wanted and not first:
                    raise Refused(
                        f"none of the lines {quote_all(wanted)} is shared here and readable "
                        "by the caller; nothing to announce"
                    )
            except LifelineError as exc:
                await self._refuse(context, exc)
                return
            self.calls += 1
            if request.items:
                self.item_callers.append(peer)
            back = _dial_back(peer.address, request.serves_port)
            if back and self.on_watcher is not None:
                self.on_watcher(peer, back, True)
            try:
                # `sets` on the first message: this node sends the rows asked for
                sets = list(_SETS) if request.items else []
                yield pb.LineChange(
                    lines=sorted(first), initial=True, node_id=self._node_id or "", sets=sets
                )
                while (changed := await sub.next(self._heartbeat)) is not None:
                    lines = await self._readable(peer, wanted, changed) if changed else []
                    rows = sub.take_items()
                    prune, graft = sub.take_control()
                    plain = [line for line in sorted(lines) if line not in rows]
                    for line in sorted(set(lines) - set(plain)):
                        for run in rows[line]:  # one announcement per tree of relays
                            yield _with_items(run)
                    if plain or not changed or prune or graft:  # or a heartbeat
                        yield pb.LineChange(lines=plain, prune=prune, graft=graft)
            finally:
                if request.items:
                    self.item_callers.remove(peer)
                if back and self.on_watcher is not None:
                    self.on_watcher(peer, back, False)

    async def _refuse(
        self, context: grpc.aio.ServicerContext[Any, Any], exc: LifelineError
    ) -> None:
        self.refused += 1
        caller = context.peer() or "?"
        self.quiet_log.warning(peer_host(caller), "refused a watch from %s: %s", caller, exc)
        await context.abort(status_for(exc), cut(str(exc)))

    async def _readable(
        self, peer: PeerIdentity, wanted: frozenset[str], lines: Iterable[str]
    ) -> list[str]:
        """The lines among ``lines`` that are shared now and that the caller may read."""
        out = []
        for line in lines:
            if (wanted and line not in wanted) or not self._is_shared(line):
                continue
            try:
                await self._authorizer.authorize(peer, line, Access.READ)
            except PeerError:
                continue  # not for this caller (or no longer): it hears nothing of it
            out.append(line)
        return out


def _dial_back(caller: str, port: int) -> str | None:
    """``HOST:PORT`` where a caller (gRPC peer string ``ipv4:10.0.0.2:51234``) that said it
    serves on ``port`` can be dialled; None when it said it cannot be (0) or the string is
    not an IP one."""
    if not 0 < port < 65536:
        return None
    kind, _, rest = caller.partition(":")
    host = rest.rpartition(":")[0]
    if kind == "ipv4" and host:
        return f"{host}:{port}"
    if kind == "ipv6" and host:
        return f"{host}:{port}" if host.startswith("[") else f"[{host}]:{port}"
    return None


def _with_items(change: ChangeItems) -> pb.LineChange:
    return pb.LineChange(
        lines=[change.line],
        items_line=change.line,
        sets=list(_SETS),
        tree=change.tree,
        items=[
            pb.Items(set=0, items=change.attestations),
            pb.Items(
                set=1,
                items=change.entries,
                externals=[pb.External(id=i, line=n) for i, n in change.externals],
            ),
        ],
    )


def _items_of(msg: pb.LineChange) -> ChangeItems | None:
    """The rows an announcement carries; None when it has none or they are not in the
    form this node reads (the caller then syncs for them)."""
    if not msg.items_line or msg.items_line not in msg.lines or tuple(msg.sets) != _SETS:
        return None
    by_set: dict[int, list[bytes]] = {0: [], 1: []}
    externals: list[tuple[bytes, str]] = []
    for batch in msg.items:
        if batch.set not in by_set:
            return None
        by_set[batch.set] += batch.items
        externals += [(e.id, e.line) for e in batch.externals]
    change = ChangeItems(
        msg.items_line, tuple(by_set[0]), tuple(by_set[1]), tuple(externals), tree=msg.tree
    )
    return change if change.fits() else None


async def watch_lines(
    target: str,
    lines: Sequence[str],
    *,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, Any]] = (),
    idle: float = WATCH_IDLE_S,
    items: bool = False,
    serves_port: int = 0,
    channel: grpc.aio.Channel | None = None,
) -> AsyncIterator[LineChange]:
    """Watch ``lines`` (empty: every shared line we may read) at ``target`` until the call
    ends; yields each announcement (heartbeats are not yielded), with the new rows of a
    line when ``items`` asked for them and the peer sent them. Raises our errors: a
    PeerError when the peer is unreachable, silent for ``idle`` seconds, or too old to
    announce (UNIMPLEMENTED). ``serves_port``: the port we serve on at the address we dial
    from (0: we cannot be dialled), so the peer may watch us back. ``channel``: an open
    channel to ``target`` to call on (shared with sessions, decision 0096)."""
    opened = open_channel(target, credentials, options) if channel is None else None
    async with opened or nullcontext(channel) as ch:
        call = ch.unary_stream(
            WATCH_METHOD,
            request_serializer=pb.WatchRequest.SerializeToString,
            response_deserializer=pb.LineChange.FromString,
        )(pb.WatchRequest(lines=list(lines), items=items, serves_port=serves_port))
        try:
            while True:
                async with asyncio.timeout(idle):
                    msg = await call.read()
                if msg is grpc.aio.EOF:
                    return  # the peer is stopping: the caller dials again later
                if msg.lines or msg.initial or msg.prune or msg.graft:
                    rows = _items_of(msg) if items else None
                    sends = items and msg.initial and tuple(msg.sets) == _SETS
                    yield LineChange(
                        tuple(msg.lines),
                        msg.initial,
                        msg.node_id or None,
                        rows,
                        sends,
                        tuple(msg.prune)[:MAX_WATCH_LINES],
                        msg.graft,
                    )
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc, target) from exc
        except TimeoutError:
            raise PeerError(f"peer {target} sent nothing on the watch for {idle:.0f}s") from None
        finally:
            call.cancel()
