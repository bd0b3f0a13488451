"""An entry's ts as a time: the stored form orders as text; any other ISO 8601 form is read
as a time where it can be, and one that cannot is said so rather than failing the audit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lifeline_mesh.notary.statement import ts_micros

__all__ = ["canonical_ts", "micros", "seconds_between", "unreadable"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def canonical_ts(ts: str) -> bool:
    """The stored form (``2026-01-02T03:04:05.123456Z``), where string order is time order."""
    return len(ts) == 27 and ts[26] == "Z" and ts[10] == "T"


def micros(ts: str) -> int | None:
    """Microseconds since the epoch of any ISO 8601 time (UTC when it names no zone), or
    None: an entry's ts is whatever its writer stored (lifeline-context wrote other forms)."""
    if canonical_ts(ts):
        return ts_micros(ts)
    try:
        moment = datetime.fromisoformat(ts)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1)


def seconds_between(later: str, earlier: str) -> float | None:
    """How many seconds ``later`` is after ``earlier`` (negative when before); None when
    either is not a time."""
    a, b = micros(later), micros(earlier)
    return None if a is None or b is None else (a - b) / 1e6


def unreadable(ts: str, against: str) -> str:
    return (
        f"ts {ts!r} is not a time (ISO 8601) verify can read, so it was not checked "
        f"against {against}; the stored form is like 2026-01-02T03:04:05.123456Z"
    )
