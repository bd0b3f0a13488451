"""Property test: whatever happens to frames, a later clean session makes both sets equal.

Random inserts on both sides (new children of random existing entries, and the same
content with a different ts), sessions whose frames are dropped, duplicated and reordered,
then a clean session: both sets are equal, closed under parents, and keep the earliest ts.
"""

from __future__ import annotations

from collections import deque

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from lifeline.entry import Entry
from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.testing.pair import MemorySet, SessionPair
from tests.support.recon_helpers import entry_set

LIMITS = SessionLimits(branch=4, leaf=3)  # small, so that few items exercise deep splits
# A node that does not offer compact ranges: sessions with it stay in plain ranges.
PLAIN = SessionLimits(branch=4, leaf=3, compact_ranges=False)


class TwoNodes(RuleBasedStateMachine):
    limits_b: SessionLimits | None = None  # the responder's limits, when not LIMITS
    runs = False  # a set the peer lacks sent whole in key order (decision 0144)

    def __init__(self) -> None:
        super().__init__()
        self.a = entry_set()
        self.b = entry_set()
        self.counter = 0
        self.synced = True

    def _side(self, left: bool) -> MemorySet:
        return self.a if left else self.b

    @rule(left=st.booleans(), pick=st.integers(0, 10_000), second=st.booleans())
    def insert(self, left: bool, pick: int, second: bool) -> None:
        side = self._side(left)
        ids = sorted(side.items)
        parents: tuple[str, ...] = ()
        if ids:
            parents = (ids[pick % len(ids)].hex(),)
            if second and len(ids) > 1:
                parents += (ids[(pick // 7) % len(ids)].hex(),)
        self.counter += 1
        e = Entry.create(
            ts=f"2026-01-01T00:00:{self.counter % 60:02d}Z",
            kind="note",
            summary=f"e{self.counter}",
            parents=parents,
        )
        side.add_raw(e.to_json())
        self.synced = False

    @rule(left=st.booleans(), minute=st.integers(0, 59), summary=st.integers(0, 5))
    def insert_same_content(self, left: bool, minute: int, summary: int) -> None:
        # The same content on either side, at a different ts: ids equal, versions not.
        e = Entry.create(ts=f"2025-01-01T00:{minute:02d}:00Z", kind="note", summary=f"dup{summary}")
        self._side(left).add_raw(e.to_json())
        self.synced = False

    @rule(faults=st.lists(st.sampled_from(["pass", "drop", "dup", "swap"]), max_size=60))
    def faulty_session(self, faults: list[str]) -> None:
        plan = iter(faults)

        def hook(side: str, q: deque[bytes]) -> None:
            action = next(plan, "pass")
            if action == "drop":
                q.popleft()
            elif action == "dup":
                q.appendleft(q[0])
            elif action == "swap" and len(q) > 1:
                q[0], q[1] = q[1], q[0]

        SessionPair(
            [self.a], [self.b], limits=LIMITS, faults=hook, limits_b=self.limits_b, runs=self.runs
        ).run()

    @rule(a_starts=st.booleans())
    def clean_session(self, a_starts: bool) -> None:
        first, second = (self.a, self.b) if a_starts else (self.b, self.a)
        result = SessionPair(
            [first], [second], limits=LIMITS, limits_b=self.limits_b, runs=self.runs
        ).run()
        assert result.errors == [], result.errors
        assert result.done == 2
        assert self.a.state() == self.b.state()
        self.synced = True

    @invariant()
    def closed(self) -> None:
        assert self.a.closed() and self.b.closed()

    @precondition(lambda self: self.synced)
    @invariant()
    def equal_when_synced(self) -> None:
        assert self.a.state() == self.b.state()


class CompactAndPlainNodes(TwoNodes):
    """The same, with a responder that does not offer compact ranges."""

    limits_b = PLAIN


class NodesThatRun(TwoNodes):
    """The same, each side sending a set its peer lacks as a run, and a side that starts
    over empty now and then (a new node): frames lost in a run leave orphans and gaps
    that the next clean session fills."""

    runs = True

    @rule(left=st.booleans())
    def start_over(self, left: bool) -> None:
        self._side(left).items.clear()
        self.synced = False


TwoNodes.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
test_two_nodes = TwoNodes.TestCase
CompactAndPlainNodes.TestCase.settings = settings(
    max_examples=30, stateful_step_count=25, deadline=None
)
test_compact_and_plain_nodes = CompactAndPlainNodes.TestCase
NodesThatRun.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_nodes_that_run = NodesThatRun.TestCase
