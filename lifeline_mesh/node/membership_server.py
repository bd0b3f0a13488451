"""A node's server that shares no line: the standalone Membership server
(``membership-serve``), on the same server class a node runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import grpc

from lifeline.errors import LocalProtocolError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.join_port import start_join_server
from lifeline_mesh.membership.service import add_membership
from lifeline_mesh.membership.tls import server_credentials
from lifeline_mesh.transport.addresses import split_address
from lifeline_mesh.transport.server import SyncServer

__all__ = ["MembershipServer", "serve_membership"]


@dataclass
class MembershipServer:
    """A node's server that shares no line: the Membership service on a mutual-TLS port
    (sync sessions there are refused, as on a node that shares nothing) and a join port."""

    server: SyncServer
    join_port: int
    mtls_port: int

    async def stop(self) -> None:
        await self.server.stop(grace=0)


def _shares_nothing(line: str) -> bool:
    return False


def _no_line(*args: object) -> NoReturn:
    raise LocalProtocolError("the membership server shares no line; no session reaches here")


async def serve_membership(
    home: NodeHome, listen: str = "127.0.0.1:0", mtls_listen: str = "127.0.0.1:0"
) -> MembershipServer:
    """Start a standalone Membership server (``membership-serve``): a join port and a
    mutual-TLS port, on the same server a node runs."""
    join_ports: list[int] = []

    def extend(server: grpc.aio.Server) -> None:
        add_membership(server, home)

    async def join_port() -> grpc.aio.Server:
        server, port = await start_join_server(home, listen)
        join_ports.append(port)
        return server

    server = SyncServer(
        _no_line,
        _shares_nothing,
        credentials=server_credentials(home),
        extend=extend,
        side=join_port,
    )
    address = await server.start(mtls_listen)
    return MembershipServer(server, join_ports[0], split_address(address)[1])
