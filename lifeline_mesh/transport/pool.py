"""Channels shared by the calls a node makes to one peer (decision 0096).

A node keeps a Watch call open to each peer it follows. The sessions it starts with that
peer (the periodic check, a sync for an untaken change) and the membership pull before
each session used to open a connection of their own: a TCP set-up and a mutual-TLS
handshake each, two per session. A lease of :class:`ChannelPool` hands out the channel
already open to the same address with the same credentials and options, so those calls
ride on the Watch call's connection as further HTTP/2 streams; a channel is closed when
its last lease ends. The options are part of the key: a session pinned to the node
serving at an address never shares a channel that was not pinned to it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from lifeline.errors import PermissionDenied
from lifeline_mesh.transport.addresses import require_loopback
from lifeline_mesh.transport.channels import open_channel, refuse_other_users_server

__all__ = ["ChannelPool"]

_Key = tuple[str, int, tuple[tuple[str, Any], ...]]


@dataclass
class _Shared:
    channel: grpc.aio.Channel
    credentials: grpc.ChannelCredentials | None  # held: its id() is part of the key
    leases: int = 0


class ChannelPool:
    """The open channels of one node's outgoing calls, shared while any call holds one."""

    def __init__(self) -> None:
        self._open: dict[_Key, _Shared] = {}

    def __len__(self) -> int:
        return len(self._open)

    @contextlib.asynccontextmanager
    async def lease(
        self,
        target: str,
        credentials: grpc.ChannelCredentials | None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> AsyncIterator[grpc.aio.Channel]:
        """The channel to ``target`` (see :func:`open_channel`), opened by the first lease
        and closed when the last one ends."""
        key = (target, id(credentials), tuple(options))
        if key in self._open and credentials is None:
            await self._recheck(target)  # the channel may close meanwhile: read it after
        shared = self._open.get(key)
        if shared is None:
            shared = _Shared(open_channel(target, credentials, options), credentials)
            self._open[key] = shared
        shared.leases += 1
        try:
            yield shared.channel
        finally:
            shared.leases -= 1
            if shared.leases == 0:
                if self._open.get(key) is shared:
                    del self._open[key]
                await shared.channel.close()

    async def _recheck(self, target: str) -> None:
        """Without TLS, who listens on the peer's port is read again at each lease of a
        channel already open (decision 0146): the peer's process may have restarted under
        it, and another user of the machine taken its port meanwhile. Then the channel is
        cut and the lease refused (PermissionDenied), as a new channel would be."""
        host, port = require_loopback(target, tls=False, what="peer address")
        try:
            await asyncio.to_thread(refuse_other_users_server, target, host, port)
        except PermissionDenied:
            await self.cut(target)
            raise

    async def cut(self, target: str) -> None:
        """Close every channel open to ``target`` now, whatever holds a lease on it (its
        calls end); the next lease opens a new one."""
        for key in [k for k in self._open if k[0] == target]:
            await self._open.pop(key).channel.close()
