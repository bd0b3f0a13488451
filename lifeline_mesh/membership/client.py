"""Member-to-member calls on the Membership service over mutual TLS.

``whoami`` checks that a peer accepts us (and tells who it is); ``pull_membership``
fetches a peer's signed revocation statements (imported only if they verify against our
CA) and adds members we did not know — how a member catches up without the sync.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import grpc

from lifeline.errors import ConfigError, RemoteProtocolError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
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
    home: NodeHome, address: str, timeout: float = CALL_TIMEOUT
) -> list[Revocation]:
    """Import the revocations and new members ``address`` knows; returns new revocations."""
    creds = channel_credentials(home)
    async with open_channel(address, creds, channel_options()) as ch:
        try:
            reply = await pb_grpc.MembershipStub(ch).Revocations(
                pb.RevocationsRequest(), timeout=timeout
            )
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc, address) from exc
    new = import_revocations(home, reply.revocations_json.encode())
    try:
        theirs = Registry.from_json(json.loads(reply.members_json))
    except (ValueError, ConfigError, RecursionError) as exc:
        raise RemoteProtocolError(f"{address} sent a malformed members list ({exc})") from exc
    with files.exclusive(home):  # a join or a revocation may write the registry meanwhile
        ours = Registry.load(home)
        before = ours.to_json()
        ours.merge(theirs)  # adds unknown nodes only: a peer cannot change roles we know
        ours.prune(dt.datetime.now(dt.UTC))
        for statement in RevocationList.load(home).statements.values():
            ours.mark_revoked(statement.node_id, statement.revoked_at)
        if ours.to_json() != before:  # written only when it changed (each session asks)
            ours.save(home)
    return new
