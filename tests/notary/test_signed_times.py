"""The session's memory of the author signatures it stored (notary/signed_times.py,
decision 0105): every pair added is found, no other pair is, in 8 to 16 bytes a pair,
and no further than its limit."""

from __future__ import annotations

import random

from lifeline_mesh.notary.signed_times import SignedTimes

TS = "2026-03-01T10:00:00.000000Z"


def _ids(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(256):064x}" for _ in range(n)]


def test_every_pair_added_is_found_and_no_other() -> None:
    memory = SignedTimes()
    ids = _ids(20_000, 1)
    for start in range(0, len(ids), 640):  # batches, as a session stores them
        memory.add((i, TS) for i in ids[start : start + 640])
    assert len(memory) == 20_000 and 20_000 * 8 < memory.nbytes() <= 20_000 * 16 * 2
    assert all(memory.holds(i, TS) for i in ids)
    assert not any(memory.holds(i, "2026-03-01T10:00:00.000001Z") for i in ids[:2000])
    assert not any(memory.holds(i, TS) for i in _ids(2000, 2))


def test_two_signatures_of_one_id_are_both_found() -> None:
    memory = SignedTimes()
    [entry] = _ids(1, 3)
    memory.add([(entry, TS)])
    memory.add([(entry, "2026-03-01T10:30:00.000000Z")])
    assert memory.holds(entry, TS) and memory.holds(entry, "2026-03-01T10:30:00.000000Z")
    assert not memory.holds(entry, "2026-03-01T10:59:00.000000Z")


def test_no_further_than_its_limit() -> None:
    memory = SignedTimes(limit=100)
    ids = _ids(150, 4)
    memory.add((i, TS) for i in ids[:80])
    memory.add((i, TS) for i in ids[80:])
    assert len(memory) == 100
    assert sum(memory.holds(i, TS) for i in ids) == 100  # the rest: the table's lookup
    memory.add([(ids[0], "2026-03-01T11:00:00.000000Z")])
    assert len(memory) == 100


def test_each_session_digests_with_a_secret_of_its_own() -> None:
    one, two = SignedTimes(), SignedTimes()
    [entry] = _ids(1, 5)
    assert one._digest(entry, TS) != two._digest(entry, TS)
