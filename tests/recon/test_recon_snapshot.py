"""The session snapshot's compact structures against plain Python: range sums from sparse
prefix sums, and positions from the sorted id-prefix index (equal prefixes included)."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from lifeline_mesh.recon.sets import SCANNED_LOOKUPS, SUM_STRIDE, Snapshot


def _snapshot(n: int, shared_prefix_every: int = 0) -> tuple[Snapshot, list[bytes], list[bytes]]:
    ids: list[bytes] = []
    for k in range(n):
        digest = hashlib.sha256(f"item {k}".encode()).digest()
        if shared_prefix_every and k % shared_prefix_every == 0:
            digest = b"\x42" * 8 + digest[8:]  # several ids share their first 8 bytes
        ids.append(digest)
    ids.sort()
    tokens = [hashlib.sha256(b"t" + i).digest() for i in ids]
    return Snapshot([1] * n, ids, tokens), ids, tokens


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=5 * SUM_STRIDE + 3),
    data=st.data(),
)
def test_range_sums_match_the_plain_sum(n: int, data: st.DataObject) -> None:
    snap, _ids, tokens = _snapshot(n)
    lo = data.draw(st.integers(min_value=0, max_value=n))
    hi = data.draw(st.integers(min_value=lo, max_value=n))
    expected = sum(int.from_bytes(t, "little") for t in tokens[lo:hi]) % (1 << 256)
    assert snap.range_sum(lo, hi) == expected.to_bytes(32, "little")


def test_positions_are_found_even_when_prefixes_repeat() -> None:
    snap, ids, _tokens = _snapshot(3 * SUM_STRIDE + 5, shared_prefix_every=4)
    for k, item_id in enumerate(ids):
        assert snap.position(item_id) == k and snap.knows(item_id)
    stranger = b"\x42" * 8 + b"\x00" * 24  # a known prefix, an unknown id
    assert snap.position(stranger) is None and not snap.knows(stranger)
    assert Snapshot.empty().position(ids[0]) is None


def test_lookups_scan_until_the_index_pays_and_both_answer_alike() -> None:
    """The first lookups scan the ids (a restarted node's first sessions check a few
    parents), later ones use the id index; a byte run that spans two ids is no match."""
    snap, ids, _tokens = _snapshot(SCANNED_LOOKUPS + 40, shared_prefix_every=4)
    across = ids[3][16:] + ids[4][:16]  # 32 bytes of the buffer that are no item's id
    assert snap.position(across) is None and snap.position(ids[4]) == 4
    assert snap._shared.index is None  # answered by scanning
    answers = [snap.position(i) for i in ids]
    assert answers == list(range(len(ids))) and snap._shared.index is not None
    assert snap.position(across) is None and snap.view().position(ids[7]) == 7


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=0, max_value=4 * SUM_STRIDE + 3), data=st.data())
def test_a_replaced_run_equals_a_snapshot_built_from_scratch(n: int, data: st.DataObject) -> None:
    """``replaced`` (a hub's snapshot brought up to date by buckets): items lo..hi swapped
    for other rows of the same key span give the snapshot a full build gives."""
    ids = [hashlib.sha256(f"item {h}".encode()).digest() for h in range(n)]
    rows = [(h, i, hashlib.sha256(b"t" + i).digest()) for h, i in enumerate(ids)]
    lo = data.draw(st.integers(min_value=0, max_value=n))
    hi = data.draw(st.integers(min_value=lo, max_value=n))
    extra = data.draw(st.integers(min_value=0, max_value=2 * SUM_STRIDE))
    span = max(1, hi - lo)  # new rows at the heights of the replaced run, a few per height
    new = sorted(
        (lo + k % span, hashlib.sha256(f"new {k}".encode()).digest(), bytes([k % 256]) * 32)
        for k in range(extra)
    ) if hi > lo else []  # fmt: skip
    got = Snapshot.build(rows).replaced(lo, hi, new)
    fresh = Snapshot.build([*rows[:lo], *new, *rows[hi:]])
    assert len(got) == len(fresh) and got.whole() == fresh.whole()
    assert [got.key(i) for i in range(len(got))] == [fresh.key(i) for i in range(len(fresh))]
    for a in range(0, len(got) + 1, 5):
        assert got.range_sum(a, len(got)) == fresh.range_sum(a, len(got))
    for i in range(len(got)):
        assert got.position(got.item_id(i)) == i


def _item(k: int, height: int) -> tuple[int, bytes, bytes]:
    return height, hashlib.sha256(b"id %d" % k).digest(), hashlib.sha256(b"t %d" % k).digest()


def _facts(snap: Snapshot) -> tuple[object, ...]:
    n = len(snap)
    return (
        n,
        snap.whole(),
        [snap.range_sum(0, i) for i in range(0, n + 1, 7)],
        snap.index_of(None),
        [bytes(b) for b in snap.buffers()],
    )


def test_items_appended_at_the_end_grow_the_buffers_in_place_and_views_keep_their_items() -> None:
    """A successor with new items after all of ours shares our buffers, grown in place
    (no copy of the set per session, decision 0042); we, and every view of us, still
    answer for our own items only, and a stale snapshot merged again copies."""
    first = Snapshot.build(sorted(_item(k, k // 3) for k in range(50)))
    view = first.view()
    before = _facts(first)
    new = [_item(1000 + k, 100) for k in range(20)]  # heights after every held one
    second = first.merged(new)
    assert second.buffers()[1].obj is first.buffers()[1].obj  # the same bytearray, grown
    assert _facts(first) == before and _facts(view) == before
    assert all(first.position(item_id) is None for _h, item_id, _t in new)
    assert first.index_of(None) == 50 and len(second) == 70
    rebuilt = Snapshot.build(_items())
    assert _facts(second) == _facts(rebuilt)
    # A merge from the stale snapshot cannot grow what its successor owns: it copies.
    other = first.merged([_item(2000, 100)])
    assert other.buffers()[1].obj is not first.buffers()[1].obj
    assert _facts(second) == _facts(rebuilt) and len(other) == 51
    # While a snapshot file is written from its buffers, a successor copies too.
    held = second.buffers()
    third = second.merged([_item(3000, 200)])
    assert third.buffers()[1].obj is not held[1].obj and _facts(second) == _facts(rebuilt)
    assert _facts(third) == _facts(Snapshot.build([*_items(), _item(3000, 200)]))


def _items() -> list[tuple[int, bytes, bytes]]:
    """The items of ``second`` above, in key order."""
    return sorted(
        [*(_item(k, k // 3) for k in range(50)), *(_item(1000 + k, 100) for k in range(20))]
    )
