"""Omitting up front what the budget fit is certain to omit (decision 0078) changes nothing:
for random ledgers large enough to overflow, every budget in characters and every thread,
the fit gives the same text and the same omissions, in the same order, as the fit that
renders and measures its way down one item at a time (a measure that is not ``len`` itself
takes that path)."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from lifeline.truth.assemble import _render_section, recent_ids
from lifeline.truth.budget import Budget
from lifeline.truth.fit import fit, omit_certain
from lifeline.truth.pieces import Section
from lifeline.truth.reducers import fold_all
from lifeline.truth.sections import Inputs, Render, build_sections
from lifeline.truth.views import derive
from tests.support.truth_ledgers import random_ledger


def _render(sections: list[Section]) -> str:
    return "# head\n" + "".join(_render_section(s) for s in sections) + "-- foot\n"


def _same_length(text: str) -> int:
    return len(text)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(50, 700),
    limit=st.integers(200, 6_000),
    by_thread=st.booleans(),
)
def test_omitting_up_front_gives_what_the_fit_gives(
    seed: int, n: int, limit: int, by_thread: bool
) -> None:
    entries = random_ledger(seed, n)
    state = fold_all(entries)
    truth = derive(state)
    thread = sorted(state.threads)[0] if by_thread and state.threads else None
    by_id = {e.id: e for e in entries}
    inp = Inputs(state, truth, by_id, thread=thread, recent=12, max_items=1_000_000)
    budget = Budget(limit)
    sections = build_sections(inp, recent_ids(inp), False, Render(budget.item_cap_chars))
    for section in sections:
        for piece in section.pieces:
            piece.cap(budget.item_cap_chars)
    slow = copy.deepcopy(sections)
    fast_text = fit(sections, _render, len, limit)
    slow_text = fit(slow, _render, _same_length, limit)
    assert fast_text == slow_text
    assert [s.omitted for s in sections] == [s.omitted for s in slow]


def test_a_large_overflow_is_omitted_up_front() -> None:
    entries = random_ledger(7, 600)
    state = fold_all(entries)
    inp = Inputs(state, derive(state), {e.id: e for e in entries})
    sections = build_sections(inp, recent_ids(inp), False, Render(160))
    before = sum(len(s.pieces) for s in sections)
    omit_certain(sections, 400)
    after = sum(len(s.pieces) for s in sections)
    assert before > 100 and after < before // 2, (before, after)
    for section in sections:  # a section that lost items is still over the limit alone
        total = sum(len(p.levels[-1]) + 1 for p in section.pieces)
        assert total > 400 or not section.omitted, section.key
