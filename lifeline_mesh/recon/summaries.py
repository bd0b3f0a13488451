"""Whole-set summaries in a session (capability ``set-sums``): pure decisions.

Each side reads its sets' count and sum of tokens (kept by its store on every write) instead
of building sorted snapshots; a set is loaded only when its whole-set fingerprint differs
from the peer's, or when a frame about it needs it (docs/protocol.md, "In-sync check").
"""

from __future__ import annotations

from collections.abc import Sequence

from lifeline_mesh.recon.frames import Frame, Hello, Items, Mode, Range, Recon, Want
from lifeline_mesh.recon.sets import ParsedItems, SetSummary

__all__ = [
    "OPEN_CAPABILITY",
    "SUMS_CAPABILITY",
    "fingerprints",
    "opening_frames",
    "opening_range",
    "opening_record",
    "peer_summaries",
    "set_of",
    "whole_set_equal",
]

# The responder's hello carries its whole-set fingerprints; a set found equal is never
# loaded on either side.
SUMS_CAPABILITY = "set-sums"
# The initiator opens in its hello: one record of (count, fingerprint) per set instead of
# one Recon frame per set. A responder that reads it lists this capability in its hello
# and answers the record as the opening ranges; one that does not gets the ranges next turn.
OPEN_CAPABILITY = "open-sums"


def opening_range(summary: SetSummary) -> Range:
    """The initiator's opening range for a set, from its summary: byte for byte what a
    snapshot of the same set would give (every node reads it)."""
    return Range(None, Mode.FINGERPRINT, summary.fingerprint(), summary.count)


def peer_summaries(hello: Hello) -> dict[str, bytes]:
    """The whole-set fingerprints a responder's hello names, by set (none: not offered)."""
    if SUMS_CAPABILITY in hello.capabilities and len(hello.summaries) == len(hello.sets):
        return dict(zip(hello.sets, hello.summaries, strict=True))
    return {}


def whole_set_equal(summary: SetSummary | None, frame: Recon) -> bool:
    """The peer's opening range (one plain fingerprint over everything) equals our set."""
    if summary is None or frame.compact or len(frame.ranges) != 1:
        return False
    rng = frame.ranges[0]
    return (
        rng.upper is None
        and rng.mode is Mode.FINGERPRINT
        and rng.count == summary.count
        and rng.fingerprint == summary.fingerprint()
    )


def set_of(frame: Frame | ParsedItems) -> int | None:
    """The set a Want or Items frame is about (None for frames about no set)."""
    if isinstance(frame, Want | Items):
        return frame.set_index
    if isinstance(frame, ParsedItems):
        return frame.frame.set_index
    return None


def fingerprints(summaries: Sequence[SetSummary | None]) -> tuple[bytes, ...]:
    """A responder's hello field: each set's fingerprint, b"" when it keeps no summary."""
    return tuple(s.fingerprint() if s is not None else b"" for s in summaries)


def opening_record(summaries: Sequence[SetSummary | None]) -> tuple[tuple[int, bytes], ...] | None:
    """The initiator's opening for its hello: (count, fingerprint) of each whole set, the
    same values as its opening ranges; None when a set keeps no summary (it opens with
    ranges from its snapshot instead)."""
    if any(s is None for s in summaries):
        return None
    return tuple((s.count, s.fingerprint()) for s in summaries if s is not None)


def opening_frames(opening: Sequence[tuple[int, bytes]], active: Sequence[bool]) -> list[Recon]:
    """The opening ranges an initiator's hello carries, as the Recon frames it would
    otherwise have sent (one plain fingerprint over each set this side reconciles)."""
    return [
        Recon(index, (Range(None, Mode.FINGERPRINT, fingerprint, count),))
        for index, ((count, fingerprint), on) in enumerate(zip(opening, active, strict=True))
        if on
    ]
