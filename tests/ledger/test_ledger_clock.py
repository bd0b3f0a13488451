"""A local write is dated no earlier than its parents (decision 0112): a clock that went
back (a VM restored, a dead battery, a bad time server) would date it before them, and
every peer refuses such an entry with what descends from it. On every store, by every way
a write takes its parents."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.ledger import Draft, Ledger, not_before
from tests.support.pg_server import open_test_store

PARENT_TS = "2026-03-01T12:00:00.000000Z"
BEHIND = "2026-03-01T10:00:00.000000Z"  # two hours before the line's newest entry
AHEAD = "2026-03-01T12:30:00.000000Z"


def test_not_before_takes_the_later_of_the_clock_and_the_parents() -> None:
    assert not_before(BEHIND, [PARENT_TS, "2026-03-01T11:00:00.000000Z"]) == PARENT_TS
    assert not_before(AHEAD, [PARENT_TS]) == AHEAD
    assert not_before(BEHIND, []) == BEHIND
    # a parent's time in another form (lifeline-context wrote some) bounds nothing
    assert not_before(BEHIND, ["2026-03-01T12:00:00Z"]) == BEHIND
    # nor does a clock of another form get replaced
    assert not_before("2026-03-01T10:00:00Z", [PARENT_TS]) == "2026-03-01T10:00:00Z"


@pytest.mark.parametrize("adapter", ["sqlite", "memory", "postgres"])
async def test_a_clock_behind_the_line_dates_each_write_at_its_parents(
    request: pytest.FixtureRequest, tmp_path: Path, adapter: str
) -> None:
    store = await open_test_store(request, adapter, tmp_path)
    try:
        root = Entry.create(ts="2026-03-01T08:00:00.000000Z", kind="bootstrap", summary="root")
        parent = Entry.create(ts=PARENT_TS, kind="note", summary="parent", parents=(root.id,))
        await store.append_many([root, parent])
        behind = Ledger(store, clock=lambda: BEHIND)
        onto_tips, _ = await behind.append(Draft(kind="note", summary="onto the tips"))
        assert onto_tips.parents == (parent.id,) and onto_tips.ts == PARENT_TS
        named, _ = await behind.append(Draft(kind="note", summary="named", parents=(root.id,)))
        assert named.ts == BEHIND  # its parent is older than the clock
        result = await behind.append_many(
            [Draft(kind="note", summary=f"batch {k}") for k in range(3)]
            + [Draft(kind="note", summary="child", parents=(parent.id,))]
        )
        batch = await store.get_many(list(result.added))
        assert len(batch) == 4 and {e.ts for e in batch} == {PARENT_TS}
        ahead = Ledger(store, clock=lambda: AHEAD)
        later, _ = await ahead.append(Draft(kind="note", summary="clock right"))
        assert later.ts == AHEAD
    finally:
        await store.close()
