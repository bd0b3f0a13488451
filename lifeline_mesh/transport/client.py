"""The gRPC client side: one initiator session for one line with one peer."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import grpc

from lifeline.errors import LifelineError
from lifeline_mesh.recon.session import Role, Session, SessionLimits
from lifeline_mesh.recon.summaries import OPEN_CAPABILITY
from lifeline_mesh.sync.driver import SyncReport, drive
from lifeline_mesh.sync.fast import FAST, FastPaths
from lifeline_mesh.sync.port import ReconSet
from lifeline_mesh.transport.channels import METHOD, ClientChannel, grpc_options, open_channel

__all__ = ["sync_line"]

# Peers whose last hello did not read an opening in our hello (nodes from before it): the
# next sessions with them open with ranges, saving the round trip the fallback costs.
_OPENS_WITH_RANGES: set[str] = set()


async def sync_line(
    target: str,
    line: str,
    sets: Sequence[ReconSet],
    *,
    credentials: grpc.ChannelCredentials | None = None,
    limits: SessionLimits | None = None,
    extra_options: Sequence[tuple[str, Any]] = (),
    fast: FastPaths = FAST,
) -> SyncReport:
    """Reconcile ``line`` with the peer at ``target`` (``HOST:PORT``)."""
    limits = limits or SessionLimits()
    if target in _OPENS_WITH_RANGES:
        limits = dataclasses.replace(limits, open_sums=False)
    # Ours win over the TLS defaults (e.g. the target name override), sizes included.
    mine = grpc_options(limits.max_frame_bytes)
    names = {name for name, _ in mine}
    options = [*mine, *(o for o in extra_options if o[0] not in names)]
    async with open_channel(target, credentials, options) as grpc_channel:
        call = grpc_channel.stream_stream(METHOD)()
        channel = ClientChannel(call, target)
        session = Session(
            Role.INITIATOR, line, [(s.name, s.codec) for s in sets], time.monotonic(), limits
        )
        try:
            report = await drive(session, channel, sets, fast=fast)
            await channel.close()
        except LifelineError:
            call.cancel()
            raise
        finally:
            _remember(target, session)
    return report


def _remember(target: str, session: Session) -> None:
    hello = session.peer_hello
    if hello is None or not session.limits.set_summaries:
        return
    if OPEN_CAPABILITY in hello.capabilities:
        _OPENS_WITH_RANGES.discard(target)
    else:
        _OPENS_WITH_RANGES.add(target)
