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
from lifeline_mesh.sync.driver import Progress, SyncReport, drive
from lifeline_mesh.sync.fast import FAST, FastPaths
from lifeline_mesh.sync.port import ReconSet, running
from lifeline_mesh.transport.channels import (
    FRAME_HEADROOM,
    METHOD,
    ClientChannel,
    open_channel,
    sized,
)

__all__ = ["PeerOpenings", "sync_line"]


class PeerOpenings:
    """The peers whose last hello did not read an opening in ours (nodes from before it):
    the next sessions with them open with ranges, saving the round trip the fallback costs.
    Held by the node that dials them, for its life (``Node.openings``)."""

    def __init__(self) -> None:
        self._with_ranges: set[str] = set()

    def limits_for(self, target: str, limits: SessionLimits) -> SessionLimits:
        """``limits`` for a session with ``target``: without the opening when it reads none."""
        if target in self._with_ranges:
            return dataclasses.replace(limits, open_sums=False)
        return limits

    def learn(self, target: str, session: Session) -> None:
        """What ``target``'s hello in ``session`` said it reads."""
        hello = session.peer_hello
        if hello is None or not session.limits.set_summaries:
            return
        if OPEN_CAPABILITY in hello.capabilities:
            self._with_ranges.discard(target)
        else:
            self._with_ranges.add(target)


async def sync_line(
    target: str,
    line: str,
    sets: Sequence[ReconSet],
    *,
    credentials: grpc.ChannelCredentials | None = None,
    limits: SessionLimits | None = None,
    extra_options: Sequence[tuple[str, Any]] = (),
    fast: FastPaths = FAST,
    openings: PeerOpenings | None = None,
    channel: grpc.aio.Channel | None = None,
    progress: Progress | None = None,
) -> SyncReport:
    """Reconcile ``line`` with the peer at ``target`` (``HOST:PORT``); ``openings`` is
    what the caller learned of its peers' hellos (kept up to date here). ``channel``: an
    open channel to ``target`` to run the session on (``ChannelPool``), instead of a
    channel of its own made of ``credentials`` and ``extra_options``. ``progress``: told
    of the report after each received batch is stored."""
    limits = limits or SessionLimits()
    if openings is not None:
        limits = openings.limits_for(target, limits)
    if channel is not None:  # shared: a larger receive limit, the frame cap checked here
        return await _session(channel, target, line, sets, limits, fast, openings, progress)
    # The frame cap wins over the TLS defaults' sizes (the target name override stays).
    options = sized(extra_options, limits.max_frame_bytes + FRAME_HEADROOM)
    async with open_channel(target, credentials, options) as grpc_channel:
        return await _session(grpc_channel, target, line, sets, limits, fast, openings, progress)


async def _session(
    grpc_channel: grpc.aio.Channel,
    target: str,
    line: str,
    sets: Sequence[ReconSet],
    limits: SessionLimits,
    fast: FastPaths,
    openings: PeerOpenings | None,
    progress: Progress | None = None,
) -> SyncReport:
    call = grpc_channel.stream_stream(METHOD)()
    channel = ClientChannel(call, target, limits.max_frame_bytes + FRAME_HEADROOM)
    session = Session(
        Role.INITIATOR,
        line,
        [(s.name, s.codec) for s in sets],
        time.monotonic(),
        limits,
        runs=running(sets),
    )
    try:
        report = await drive(session, channel, sets, fast=fast, progress=progress)
        await channel.close()
    except LifelineError:
        call.cancel()
        raise
    finally:
        if openings is not None:
            openings.learn(target, session)
    return report
