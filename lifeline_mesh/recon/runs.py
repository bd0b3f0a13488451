"""Whole runs (decision 0144): a set sent whole in key order, a chunk at a time, with no
snapshot, to a peer that holds none of it; when a session starts one, and its state."""

from __future__ import annotations

from collections.abc import Iterator

from lifeline_mesh.recon.frames import FetchRun, Mode, Recon
from lifeline_mesh.recon.sets import SetSummary

__all__ = ["EMPTY", "WholeRun", "wants_whole"]

# The whole-set fingerprint of an empty set: a peer whose hello names it holds none of it.
EMPTY = SetSummary(0, 0).fingerprint()


def wants_whole(frame: Recon) -> bool:
    """Whether ``frame`` says the peer holds none of its set: the peer's opening with a
    count of 0, or its answer to ours wanting all of it (one range over everything)."""
    if len(frame.ranges) != 1 or frame.ranges[0].upper is not None:
        return False
    rng = frame.ranges[0]
    empty = rng.mode is Mode.FINGERPRINT and rng.count == 0 and not rng.summed
    return empty or rng.mode is Mode.WANT_ALL


class WholeRun:
    """A whole set sent in key order, a chunk at a time, with no snapshot: to a peer that
    holds none of it (decision 0144). At most one a session for a set."""

    def __init__(self, set_index: int, limit: int) -> None:
        self.set_index = set_index
        self.limit = limit
        self.after: tuple[object, ...] | None = None  # the last key read
        self.done = False

    def fetches(self) -> Iterator[FetchRun]:
        """The run's reads, each made once the one before it is answered (``read``)."""
        while not self.done:
            yield FetchRun(self.set_index, self.after, self.limit)

    def read(self, after: tuple[object, ...] | None) -> None:
        """A chunk was read up to ``after`` (None: the set is over)."""
        self.after = after
        self.done = after is None
