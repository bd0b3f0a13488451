"""InForce moved by the items touched since equals InForce read anew (decision 0087): the
same ids per role in the order the database gives (ts, then id, as bytes), ties included."""

from __future__ import annotations

import random

from lifeline.truth.order_memo import InForce, OrderMemo, Read

ROLES = [b"d", b"o", b"x", b"s"]  # in force, open, and two roles that are neither


def _row(rng: random.Random, i: int) -> tuple[bytes, bytes, bytes]:
    ts = f"2026-01-01T00:0{rng.randint(0, 3)}:00Z".encode()  # ties on purpose
    return (f"{i:064x}".encode(), rng.choice(ROLES), ts)


def test_moved_by_what_was_touched_equals_a_fresh_read() -> None:
    for seed in range(40):
        rng = random.Random(seed)
        table = {r[0]: r for r in (_row(rng, i) for i in range(rng.randint(0, 60)))}
        kept = InForce.of(table.values())
        for _ in range(8):
            touched = []
            for _ in range(rng.randint(0, 6)):  # new items, and roles given anew
                i = rng.randrange(80)
                row = _row(rng, i)
                if row[0] in table:
                    row = (row[0], rng.choice(ROLES), table[row[0]][2])  # a role, same ts
                table[row[0]] = row
                touched.append(row)
            before = {role: kept.ids(role) for role in (b"d", b"o")}
            moved = kept.moved(touched)
            assert {role: kept.ids(role) for role in (b"d", b"o")} == before  # a copy moved
            fresh = InForce.of(table.values())
            for role in (b"d", b"o"):
                assert moved.ids(role) == fresh.ids(role)
                expected = sorted((r[2], r[0]) for r in table.values() if r[1] == role)
                assert moved.ids(role) == [i.decode() for _ts, i in expected]
            kept = moved


def test_a_memo_never_hands_lists_of_a_newer_view_to_an_older_one() -> None:
    memo, lists = OrderMemo(), InForce.of([])
    assert memo.since(1, 10) is None
    memo.keep(Read(1, 10, 5), lists)
    assert memo.since(1, 10) == (Read(1, 10, 5), lists)
    assert memo.since(1, 12) is not None
    assert memo.since(1, 9) is None  # kept from a newer view
    assert memo.since(2, 12) is None  # another generation
    memo.keep(Read(1, 8, 4), InForce.of([]))  # an older view does not replace it
    assert memo.since(1, 10) == (Read(1, 10, 5), lists)
