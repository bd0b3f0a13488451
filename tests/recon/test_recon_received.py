"""The ids a session received (recon/received.py): the same answers as a set, in a few
bytes an id, so pulling a million entries does not hold ~100 MB of ids (issue 21)."""

from __future__ import annotations

import hashlib
import json
import random
import tracemalloc
from dataclasses import astuple

import pytest

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.validate import DEFAULT_LIMITS
from lifeline_mesh.helpers.worker import parse_entries
from lifeline_mesh.notary.attestation_set import AttestationCodec
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.received import ReceivedIds
from lifeline_mesh.recon.session_state import SessionLimits, SetState
from lifeline_mesh.recon.sets import ParsedItem


def _ids(n: int, seed: int) -> list[bytes]:
    return [hashlib.sha256(f"{seed}:{i}".encode()).digest() for i in range(n)]


def test_received_ids_answer_as_a_set_does_across_sealed_runs() -> None:
    rng = random.Random(7)
    held = ReceivedIds(min_run=50)
    mirror: set[bytes] = set()
    ids = _ids(3_000, 1)
    # ids sharing an 8-byte prefix with a held one, and ids of other lengths
    twins = [i[:8] + bytes(24) for i in ids[::97]]
    odd = [b"short", b"x" * 40]
    for n, item in enumerate([*ids, *twins, *odd, ids[5], ids[2_000]]):
        held.add(item)
        mirror.add(item)
        if n % 250 == 0:
            for probe in rng.sample([*ids, *twins, *odd, *_ids(50, 2)], 200):
                assert (probe in held) == (probe in mirror), probe.hex()
    assert len(held._runs) > 5  # the answers above came from sealed runs too
    for probe in [*ids, *twins, *odd, *_ids(500, 3), b"", b"y" * 32]:
        assert (probe in held) == (probe in mirror)


def test_a_session_remembers_what_it_received_in_about_40_bytes_an_id() -> None:
    """500,000 items received through the closure, in batches as a sync delivers them, and
    then dropped (stored). The ids the session must remember cost ~23 MB here; a set of
    them cost ~53 MB (the first wave's), ~110 MB at a million."""
    state = SetState("entries", EntryCodec(), SessionLimits())
    n, size = 500_000, 6_400
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        prev: tuple[bytes, ...] = ()
        for k in range(0, n, size):
            batch = []
            for i in range(k, min(n, k + size)):
                item_id = hashlib.sha256(f"5:{i}".encode()).digest()
                batch.append(ParsedItem(item_id, b"", prev, b""))
                prev = (item_id,)
            ready = state.pool.admit(batch, state.known, state.received.add)
            assert len(ready) == len(batch)
            del batch, ready
        held = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert all(i in state.received for i in _ids(n, 5)[::997])
    assert not state.known(hashlib.sha256(b"never sent").digest())
    assert held < 32_000_000, held


def test_a_flat_set_keeps_none_of_the_ids_it_received() -> None:
    """Attestations never name each other (their codec is flat), so the closure never asks
    for one: a session receiving the million signatures of an initial sync kept 40 MB of
    their ids for nothing (decision 0102). Entries still keep theirs."""
    flat = SetState("attestations", AttestationCodec(), SessionLimits())
    entries = SetState("entries", EntryCodec(), SessionLimits())
    ids = _ids(20_000, 9)
    batch = [ParsedItem(i, b"", (), b"") for i in ids]
    assert len(flat.pool.admit(batch, flat.known, flat.received.add)) == len(ids)
    assert len(entries.pool.admit(batch, entries.known, entries.received.add)) == len(ids)
    assert not any(i in flat.received for i in ids)
    assert all(i in entries.received for i in ids)


def test_a_parent_id_with_a_trailing_newline_is_refused() -> None:
    """``$`` in the id pattern took "<id>\\n": a peer's entry naming its parent so was
    admitted by the session, which read its dependency as the real parent (bytes.fromhex
    skips whitespace), and then refused by a line file, which looked the text up."""
    parent = Entry.create(ts="2026-01-01T00:00:00Z", kind="note", summary="p", body="")
    child = Entry.create(
        ts="2026-01-01T00:00:01Z", kind="note", summary="c", body="", parents=(parent.id + "\n",)
    )
    raw = json.dumps(json.loads(child.to_json())).encode()
    with pytest.raises(InvalidEntry, match="not a 64-hex entry id"):
        EntryCodec().parse(raw)
    assert parse_entries(astuple(DEFAULT_LIMITS), [raw]) == (0, [])  # the helpers' path
