"""A set the peer lacks, sent whole in key order with no snapshot (decision 0144).

Sessions over the real frame codec, in memory (``SessionPair``): the side that holds a set
its peer lacks reads it in chunks in key order (``FetchRun``) instead of building its
sorted snapshot, whichever side started the session; the bytes on the wire are the same.
"""

from __future__ import annotations

import pytest

from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.testing.pair import MemorySet, SessionPair
from tests.support.recon_helpers import chain, entry_set

LIMITS = SessionLimits(fetch_chunk=7)


def _full() -> MemorySet:
    return entry_set(chain(50, "run") + chain(5, "side"))


@pytest.mark.parametrize("holder_starts", [True, False])
def test_a_peer_that_holds_nothing_gets_the_set_as_a_run(holder_starts: bool) -> None:
    holder, empty = _full(), entry_set()
    sides = ([holder], [empty]) if holder_starts else ([empty], [holder])
    result = SessionPair(*sides, limits=LIMITS, runs=True).run()
    assert result.errors == [] and result.done == 2
    assert empty.state() == holder.state() and empty.closed()
    assert holder.snapshots_taken == 0
    assert holder.runs_read == 8  # 55 items, 7 a chunk: 7 full chunks, then the last 6
    assert result.rounds == (2 if holder_starts else 1)


def test_a_run_puts_the_same_bytes_on_the_wire_as_a_snapshot() -> None:
    with_runs, empty = _full(), entry_set()
    ran = SessionPair([empty], [with_runs], limits=LIMITS, runs=True).run()
    without, empty2 = _full(), entry_set()
    built = SessionPair([empty2], [without], limits=LIMITS).run()
    assert without.snapshots_taken == 1 and with_runs.snapshots_taken == 0
    assert (ran.bytes_a_to_b, ran.bytes_b_to_a) == (built.bytes_a_to_b, built.bytes_b_to_a)
    assert (ran.frames_a_to_b, ran.frames_b_to_a) == (built.frames_a_to_b, built.frames_b_to_a)


def test_a_peer_that_holds_some_is_answered_from_the_snapshot() -> None:
    holder, partial = _full(), entry_set(chain(10, "run"))
    result = SessionPair([partial], [holder], limits=LIMITS, runs=True).run()
    assert result.errors == [] and partial.state() == holder.state()
    assert holder.snapshots_taken == 1 and holder.runs_read == 0


def test_a_set_run_exactly_in_whole_chunks_ends_with_an_empty_read() -> None:
    holder, empty = entry_set(chain(14, "even")), entry_set()
    result = SessionPair([empty], [holder], limits=LIMITS, runs=True).run()
    assert result.errors == [] and empty.state() == holder.state()
    assert holder.runs_read == 3  # 7, 7, then none: the set is over


def test_a_want_after_the_run_loads_the_snapshot() -> None:
    """Items written to the holder between the run's chunks are found by the next
    session; anything the peer asks for afterwards is answered from a snapshot."""
    holder, empty = _full(), entry_set()
    reads = holder.run

    def growing(after: tuple[object, ...] | None, limit: int) -> tuple[list[bytes], object]:
        if after is not None and holder.runs_read == 2:
            for e in chain(3, "late"):  # heights 0 to 2: below where the run has read
                holder.add_raw(e.to_json())
        return reads(after, limit)

    holder.run = growing  # type: ignore[method-assign, assignment]
    first = SessionPair([empty], [holder], limits=LIMITS, runs=True).run()
    assert first.errors == [] and empty.closed()
    assert len(empty.items) == 55  # the roots came in below where the run had read
    second = SessionPair([empty], [holder], limits=LIMITS, runs=True).run()
    assert second.errors == [] and empty.state() == holder.state()
    assert holder.snapshots_taken == 1
