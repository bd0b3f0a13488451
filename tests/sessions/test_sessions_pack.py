"""A part's body built from its items' JSON, as packing makes it, is byte for byte the body
``dumps`` makes of the whole (entry ids depend on it)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lifeline.sessions.pack import Packer, Part, dumps

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(
    st.lists(st.dictionaries(st.text(), _JSON, max_size=5), max_size=6),
    st.text(),
    st.integers(0, 10_000),
)
def test_the_body_from_item_texts_is_the_body_of_the_whole(
    items: list[dict[str, Any]], session: str, index: int
) -> None:
    made = Part(index, items, (1, 9), [dumps(i) for i in items]).body(session)
    assert made == Part(index, items, (1, 9)).body(session)


def test_a_resumed_packer_closes_the_same_parts_as_one_pass() -> None:
    items = [{"kind": "note", "text": "x" * (n * 37 % 500), "ln": n} for n in range(200)]
    one = Packer(4_000)
    for n, item in enumerate(items):
        one.add(n, [item])
    two = Packer(4_000)
    for n, item in enumerate(items[:120]):
        two.add(n, [item])
    tail = two.tail()
    assert tail is not None
    resumed = Packer(
        4_000, index=tail.index, items=tail.items, first_line=tail.lines[0], last_line=tail.lines[1]
    )
    for n, item in enumerate(items[120:], start=120):
        resumed.add(n, [item], [dumps(item)])
    bodies = [p.body("s") for p in one.closed]
    assert bodies == [p.body("s") for p in two.closed + resumed.closed]
