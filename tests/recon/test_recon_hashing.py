"""How many items a session hashes with its key when two large sets are a few items apart.

Keyed tokens (``blake2b(token, session key)``) are computed per item and per session, so
they are what a node spends on each propagated write at steady state (issue 14's soak: a
third of a node's CPU). A range one item apart is split finely before it is echoed, and a
split gives keyed-sum fingerprints only to parts of up to ``SUM_LIMIT`` items, so a session
hashes a few hundred items, not a sixteenth of the set (625 of 20,000 instead of 1,250; at
100,000, ~100 instead of 6,250).
"""

from __future__ import annotations

import hashlib

import pytest

from lifeline_mesh.recon import SessionLimits
from lifeline_mesh.recon.sets import Snapshot
from lifeline_mesh.testing.pair import MemorySet, SessionPair
from tests.support.recon_helpers import blob_set

N = 20_000
BLOBS = [hashlib.sha256(b"blob %d" % k).digest() * 2 for k in range(N + 3)]


def _watched(s: MemorySet, taken: list[Snapshot]) -> MemorySet:
    original = s.snapshot

    def snapshot() -> Snapshot:
        snap = original()
        taken.append(snap)
        return snap

    s.snapshot = snapshot  # type: ignore[method-assign]
    return s


def _hashed(snaps: list[Snapshot]) -> int:
    return sum(1 for snap in snaps for values, _ in snap._keyed.values() for v in values if v)


@pytest.mark.parametrize(
    ("a_has", "b_has"),
    [
        (BLOBS[:N], BLOBS[:7000] + BLOBS[7001:N]),  # the initiator holds one more
        (BLOBS[:7000] + BLOBS[7001:N], BLOBS[:N]),  # the responder holds one more
        (BLOBS[: N + 1], BLOBS[:N]),  # the newest item (the last in key order) is new
        (BLOBS[: N + 3], BLOBS[:N]),  # three writes not yet sent
        (BLOBS[:5000] + BLOBS[5001 : N + 1], BLOBS[:N]),  # one apart, not one item
    ],
)
def test_a_session_a_few_items_apart_hashes_few_items(
    a_has: list[bytes], b_has: list[bytes]
) -> None:
    taken_a: list[Snapshot] = []
    taken_b: list[Snapshot] = []
    a = _watched(blob_set(a_has), taken_a)
    b = _watched(blob_set(b_has), taken_b)
    r = SessionPair([a], [b], limits=SessionLimits()).run()
    assert r.errors == [] and a.state() == b.state()
    assert r.rounds <= 5
    assert _hashed(taken_a) <= 700 and _hashed(taken_b) <= 700, (
        _hashed(taken_a),
        _hashed(taken_b),
    )
    assert r.bytes_a_to_b + r.bytes_b_to_a < 12_000
