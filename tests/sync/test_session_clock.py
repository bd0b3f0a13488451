"""A session's age counts from `start(now)`, on the driver's clock (regression).

The gRPC server built its responder sessions with `now=0.0` while the driver fed them
`time.monotonic()`; on a host up for more than an hour every incoming session was aborted
at once with "session ran longer than 3600s (cap session_timeout)".
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import grpc

from lifeline_mesh.node.root import NODE_LIMITS
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.frames import Abort, Failed, Hello
from lifeline_mesh.recon.session import Role, Session, SessionLimits
from lifeline_mesh.sync.driver import IDLE_TIMEOUT
from lifeline_mesh.transport.channels import METHOD, grpc_options
from lifeline_mesh.wire.codec import decode_bytes, encode
from tests.support.sync_helpers import make_node, serving

UPTIME = 100_000.0  # a monotonic clock reading of a host up for more than a day


def _hello() -> Hello:
    return Hello(1, "ledger", ("entries",), (), 1 << 20, 10**6)


def test_a_responder_built_at_zero_but_started_late_is_not_timed_out() -> None:
    s = Session(Role.RESPONDER, "ledger", [("entries", EntryCodec())], 0.0)
    assert s.start(UPTIME) == []
    effects = s.receive(_hello(), UPTIME + 1.0)
    assert not [e for e in effects if isinstance(e, Failed)], effects


def test_the_timeout_still_trips_after_the_cap() -> None:
    s = Session(
        Role.RESPONDER, "ledger", [("entries", EntryCodec())], 0.0, SessionLimits(session_timeout=5)
    )
    s.start(UPTIME)
    failed = [e for e in s.receive(_hello(), UPTIME + 6.0) if isinstance(e, Failed)]
    assert len(failed) == 1 and "session_timeout" in str(failed[0].error)


async def test_a_peer_that_goes_silent_is_timed_out_at_the_session_deadline(
    tmp_path: Path,
) -> None:
    """Over a real gRPC server: a caller that sends its hello and then nothing (the stream
    stays open) is aborted at session_timeout, long before the driver's idle timeout."""
    node = make_node(tmp_path / "b", limits=dataclasses.replace(NODE_LIMITS, session_timeout=2.0))
    hello = Hello(1, "ledger", ("entries",), ("set-sums",), 1 << 20, 10**6)
    async with (
        serving(node) as (server, address),
        grpc.aio.insecure_channel(address, options=grpc_options(1 << 20)) as ch,
    ):
        call = ch.stream_stream(METHOD)()
        started = time.monotonic()
        await call.write(encode(hello).SerializeToString())
        got = []
        while (data := await asyncio.wait_for(call.read(), 30)) is not grpc.aio.EOF:
            got.append(decode_bytes(data))
        took = time.monotonic() - started
    assert isinstance(got[0], Hello)
    aborts = [f for f in got if isinstance(f, Abort)]
    assert len(aborts) == 1 and aborts[0].code == "timeout"
    assert "session_timeout" in aborts[0].reason
    assert 2.0 <= took < 2.0 + 5.0 < IDLE_TIMEOUT
    assert len(server.failures) == 1
