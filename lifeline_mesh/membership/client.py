"""Member-to-member calls on the Membership service over mutual TLS.

``whoami`` checks that a peer accepts us (and tells who it is); ``pull_membership``
fetches a peer's signed revocation statements (imported only if they verify against our
CA) and the members rows whose CA certificates prove them (proof.py: an unproven row is
refused and logged with the peer that sent it) — how a member catches up without the sync.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

import grpc

from lifeline.errors import ConfigError, RemoteProtocolError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.ca import load_ca_cert
from lifeline_mesh.membership.proof import (
    Refused,
    RowProof,
    attach_proofs,
    merge_proven,
    own_certificate,
)
from lifeline_mesh.membership.registry import Registry
from lifeline_mesh.membership.revocation import Revocation, RevocationList, import_revocations
from lifeline_mesh.membership.tls import channel_credentials, channel_options
from lifeline_mesh.transport.channels import open_channel
from lifeline_mesh.transport.errors import error_from_rpc
from lifeline_mesh.wire import membership_pb2 as pb
from lifeline_mesh.wire import membership_pb2_grpc

pb_grpc: Any = membership_pb2_grpc  # generated code carries no annotations

__all__ = ["CALL_TIMEOUT", "pull_membership", "whoami"]

CALL_TIMEOUT = 10.0
MAX_SEEN_PEERS = 4096  # peers whose lists' digest a node keeps (far more than it syncs with)
log = logging.getLogger(__name__)


async def whoami(
    home: NodeHome, address: str, peer_node_id: str | None = None, timeout: float = CALL_TIMEOUT
) -> pb.WhoAmIReply:
    """Ask ``address`` who it sees calling; raises a PeerError (Refused when it refuses us)."""
    creds = channel_credentials(home)
    async with open_channel(address, creds, channel_options(peer_node_id)) as ch:
        try:
            reply: pb.WhoAmIReply = await pb_grpc.MembershipStub(ch).WhoAmI(
                pb.WhoAmIRequest(), timeout=timeout
            )
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc, address) from exc
    return reply


async def pull_membership(
    home: NodeHome,
    address: str,
    timeout: float = CALL_TIMEOUT,
    logged: set[tuple[str, str, str]] | None = None,
    seen: dict[str, bytes] | None = None,
    channel: grpc.aio.Channel | None = None,
) -> list[Revocation]:
    """Import the revocations and proven members ``address`` knows; returns new revocations.

    Each refused row is logged (a warning naming ``address``) — once per (peer, row,
    reason) when the caller keeps ``logged`` across sessions. With ``seen`` (kept across
    sessions: the digest of each peer's last lists), a peer whose lists did not change
    since sends none, and nothing is imported again. ``channel``: an open channel to
    ``address`` to ask on (a node's sessions share one, decision 0096)."""
    known = seen.get(address, b"") if seen is not None else b""
    request = pb.RevocationsRequest(known=known)
    try:
        if channel is not None:
            reply = await pb_grpc.MembershipStub(channel).Revocations(request, timeout=timeout)
        else:
            async with open_channel(address, channel_credentials(home), channel_options()) as ch:
                reply = await pb_grpc.MembershipStub(ch).Revocations(request, timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        raise error_from_rpc(exc, address) from exc
    if reply.unchanged and known and reply.digest == known:
        return []  # imported already, from the same lists
    new = _merge(home, address, reply, logged)
    if seen is not None and reply.digest:
        if len(seen) >= MAX_SEEN_PEERS and address not in seen:
            seen.clear()  # addresses of peers long gone: asking again costs one full list
        seen[address] = bytes(reply.digest)
    return new


def _merge(
    home: NodeHome,
    address: str,
    reply: pb.RevocationsReply,
    logged: set[tuple[str, str, str]] | None,
) -> list[Revocation]:
    new = import_revocations(home, reply.revocations_json.encode())
    try:
        theirs = Registry.from_json(json.loads(reply.members_json))
    except (ValueError, ConfigError, RecursionError) as exc:
        raise RemoteProtocolError(f"{address} sent a malformed members list ({exc})") from exc
    proof = RowProof(load_ca_cert(home))
    with files.exclusive(home):  # a join or a revocation may write the registry meanwhile
        ours = Registry.load(home)
        before = ours.to_json()
        now = dt.datetime.now(dt.UTC)
        refused = merge_proven(ours, theirs, proof, now)  # proven rows only
        attach_proofs(ours, own_certificate(home), proof)  # our own row, if written before
        ours.prune(now)
        for statement in RevocationList.load(home).statements.values():
            ours.mark_revoked(statement.node_id, statement.revoked_at)
        if ours.to_json() != before:  # written only when it changed (each session asks)
            ours.save(home)
    _log_refused(address, refused, logged)
    return new


MAX_ROWS_LOGGED = 5  # refused rows a pull logs one by one; the rest are counted in one line
MAX_ROWS_REMEMBERED = 10_000  # refused rows a node remembers as logged (then it forgets them)


def _log_refused(
    address: str, refused: list[Refused], logged: set[tuple[str, str, str]] | None
) -> None:
    """Each refused row logged once (``logged``: the ones logged before), at most
    :data:`MAX_ROWS_LOGGED` a pull: a rogue member sending 20,000 made-up rows a session
    wrote 20,000 lines each time, and grew ``logged`` without end."""
    if logged is not None and len(logged) > MAX_ROWS_REMEMBERED:
        logged.clear()  # some are logged again: bounded either way
    new = 0
    for row in refused:
        key = (address, row.node_id, row.reason)
        if logged is not None:
            if key in logged:
                continue
            logged.add(key)
        new += 1
        if new <= MAX_ROWS_LOGGED:
            log.warning(
                "members row for %s sent by peer %s refused: %s",
                str(row.node_id)[:80], address, str(row.reason)[:300],
            )  # fmt: skip
    if new > MAX_ROWS_LOGGED:
        log.warning(
            "%d more members rows sent by peer %s refused (a member sending made-up rows?)",
            new - MAX_ROWS_LOGGED, address,
        )  # fmt: skip
