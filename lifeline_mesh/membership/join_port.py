"""The join port: a gRPC server of its own, where callers have no certificate yet.

Anyone who can reach it may call it, so it serves ``Membership/Join`` and nothing else
(a Sync, Watch, WhoAmI or Revocations call there is UNIMPLEMENTED), and every resource a
caller can hold is bounded before our code runs: a message is at most
``JOIN_MAX_MESSAGE`` bytes (a join request is about 4.4 KB: ``MAX_CSR`` plus keys and
proofs), at most ``JOIN_MAX_CALLS`` calls run at once (more are refused
RESOURCE_EXHAUSTED by gRPC), a TLS handshake must end within ``HANDSHAKE_TIMEOUT_S``, and a
connection lives at most ``JOIN_CONNECTION_AGE_S`` (a join takes well under a second), so
a call that never sends its request is cut with its connection (docs/security.md,
"Unauthenticated network peer").
"""

from __future__ import annotations

from typing import Any

import grpc

from lifeline.errors import ConfigError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.service import MembershipServicer
from lifeline_mesh.membership.tls import join_server_credentials
from lifeline_mesh.transport.addresses import check_bindable, split_address
from lifeline_mesh.transport.call_caps import connections_for_this_process
from lifeline_mesh.transport.channels import HANDSHAKE_TIMEOUT_S
from lifeline_mesh.wire import membership_pb2 as pb

__all__ = [
    "JOIN_CONNECTION_AGE_S",
    "JOIN_MAX_CALLS",
    "JOIN_MAX_MESSAGE",
    "start_join_server",
]

JOIN_MAX_MESSAGE = 16 * 1024
JOIN_MAX_CALLS = 64
JOIN_CONNECTION_AGE_S = 30.0
_SERVICE = "lifeline_mesh.v1.Membership"


def join_options() -> list[tuple[str, Any]]:
    """The join server's gRPC options: small messages, short-lived connections."""
    return [
        ("grpc.max_receive_message_length", JOIN_MAX_MESSAGE),
        ("grpc.server_handshake_timeout_ms", int(HANDSHAKE_TIMEOUT_S * 1000)),
        ("grpc.max_connection_age_ms", int(JOIN_CONNECTION_AGE_S * 1000)),
        ("grpc.max_connection_age_grace_ms", 5000),
        ("grpc.so_reuseport", 0),  # a port one node serves is not shared with another
        # at most a sixteenth of the open-file limit: the sync port's connections, the
        # node's sessions and its lines keep the rest (decision 0134)
        ("grpc.max_allowed_incoming_connections", connections_for_this_process(share=16)),
    ]


async def start_join_server(home: NodeHome, listen: str) -> tuple[grpc.aio.Server, int]:
    """Start the join port on ``listen`` (server-authenticated TLS); the server and the
    port it bound. The caller stops the server."""
    host, port_wanted = split_address(listen, what="join address", listen=True)
    check_bindable(host, port_wanted, what="join port")
    server = grpc.aio.server(options=join_options(), maximum_concurrent_rpcs=JOIN_MAX_CALLS)
    servicer = MembershipServicer(home)
    join = grpc.unary_unary_rpc_method_handler(
        servicer.Join,
        request_deserializer=pb.JoinRequest.FromString,
        response_serializer=pb.JoinReply.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(_SERVICE, {"Join": join}),)
    )
    port: int = server.add_secure_port(listen, join_server_credentials(home))
    if not port:
        raise ConfigError(f"cannot listen on {listen} for joins (address in use?)")
    await server.start()
    return server, port
