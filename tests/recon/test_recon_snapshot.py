"""The session snapshot's compact structures against plain Python: range sums from sparse
prefix sums, and positions from the sorted id-prefix index (equal prefixes included)."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from lifeline_mesh.recon.sets import SUM_STRIDE, Snapshot


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
