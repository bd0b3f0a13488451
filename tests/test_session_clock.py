"""A session's age counts from `start(now)`, on the driver's clock (regression).

The gRPC server built its responder sessions with `now=0.0` while the driver fed them
`time.monotonic()`; on a host up for more than an hour every incoming session was aborted
at once with "session ran longer than 3600s (cap session_timeout)".
"""

from __future__ import annotations

from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.frames import Failed, Hello
from lifeline_mesh.recon.session import Role, Session, SessionLimits

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
