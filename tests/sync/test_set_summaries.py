"""Whole-set summaries: kept by every write, equal to the snapshot's fingerprint, and used
so that an in-sync check loads no snapshot — with nodes of the first wave still syncing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary.attestation_set import AttestationSet
from lifeline_mesh.notary.sign import receipts, sign_entries
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.recon.sets import Snapshot
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.memory import SessionMemory
from lifeline_mesh.testing.pair import SessionPair
from tests.support.recon_helpers import blob_set, chain, entry_set
from tests.support.sync_helpers import make_node, serving, write

BASE = chain(300, "base", body="y" * 50)
FIRST_WAVE = SessionLimits(set_summaries=False)


def _whole(snap: Snapshot) -> bytes:
    return snap.fingerprint(0, len(snap))


async def _assert_summary_matches(entries: EntrySet) -> None:
    summary = await entries.summary()
    snap = await entries.snapshot()
    assert summary is not None and summary.count == len(snap)
    assert summary.fingerprint() == _whole(snap)


async def test_every_write_keeps_the_entries_summary(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "line.db")
    try:
        entries = EntrySet(store)
        await _assert_summary_matches(entries)  # empty: computed, then kept
        await store.append_many(BASE[:100])
        await _assert_summary_matches(entries)
        for e in BASE[100:110]:  # single local writes
            await store.append(e)
        await _assert_summary_matches(entries)
        # an earlier ts of a held entry replaces its token; a later one changes nothing
        old = BASE[5]
        earlier = Entry.from_json(old.to_json().replace(old.ts.encode(), b"2025-12-31T00:00:00Z"))
        later = Entry.from_json(old.to_json().replace(old.ts.encode(), b"2027-01-01T00:00:00Z"))
        result = await store.append_many([earlier, later, *BASE[110:120]])
        assert result.ts_lowered == (old.id,)
        await _assert_summary_matches(entries)
    finally:
        await store.close()


async def test_a_new_line_keeps_its_summaries_from_the_first_write(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "line.db")
    try:
        await NotaryStore.attach(store)
        await store.append_many(BASE[:10])
        await sign_entries(store, NodeIdentity.generate(), BASE[:10])
        rows = await store.run_read(
            lambda c: c.execute("SELECT name, count FROM set_summaries ORDER BY name").fetchall()
        )
        assert rows == [("attestations", 10), ("entries", 10), ("statements", 0)]  # kept
        await _assert_summary_matches(EntrySet(store))
    finally:
        await store.close()


async def test_a_write_that_skipped_the_summary_is_noticed(tmp_path: Path) -> None:
    """An older release writing the same file leaves the summary behind: it is recomputed
    from the rows, never trusted."""
    path = tmp_path / "line.db"
    store = await SqliteStore.open(path)
    try:
        await store.append_many(BASE[:50])
        entries = EntrySet(store)
        await _assert_summary_matches(entries)
        conn = sqlite3.connect(path)
        row = conn.execute("SELECT * FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
        fresh = BASE[50]
        conn.execute(
            "INSERT INTO entries (id, ts, kind, author, agent, provider, model, summary, body,"
            " parents, dedup_key, height) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)",
            (fresh.id, fresh.ts, *row[3:11], row[12] + 1),
        )
        conn.commit()
        conn.close()
        summary = await entries.summary()
        assert summary is not None and summary.count == 51
        await _assert_summary_matches(entries)
        await store.append_many(BASE[51:60])  # kept again from here on
        await _assert_summary_matches(entries)
    finally:
        await store.close()


async def test_every_insert_keeps_the_attestations_summary(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "line.db")
    try:
        notary = await NotaryStore.attach(store, clock=lambda: "2026-03-01T12:00:00.000000Z")
        atts = AttestationSet(notary)
        author, witness = NodeIdentity.generate(), NodeIdentity.generate()
        await store.append_many(BASE[:40])
        await sign_entries(store, author, BASE[:40])
        for round_ in range(2):  # the second adds nothing new: the summary must not move
            await sign_entries(store, author, BASE[:20])
            now = f"2026-03-01T1{round_}:00:00.000000Z"
            await notary.add(receipts(witness, [e.id for e in BASE[:40]], now))
            summary, snap = await atts.summary(), await atts.snapshot()
            assert summary is not None and summary.count == len(snap) > 40
            assert summary.fingerprint() == _whole(snap)
    finally:
        await store.close()


def test_an_in_sync_check_loads_no_snapshot_on_either_side() -> None:
    a1, b1 = entry_set(BASE), entry_set(BASE)
    a2, b2 = blob_set([b"x", b"y"]), blob_set([b"x", b"y"])
    r = SessionPair([a1, a2], [b1, b2], names=("entries", "blobs")).run()
    assert r.errors == [] and r.done == 2 and r.rounds == 1
    assert [s.snapshots_taken for s in (a1, a2, b1, b2)] == [0, 0, 0, 0]
    assert r.bytes_a_to_b < 200 and r.bytes_b_to_a < 200


def test_only_the_sets_that_differ_are_loaded() -> None:
    a1, b1 = entry_set(BASE), entry_set(BASE[:-3])
    a2, b2 = blob_set([b"x", b"y"]), blob_set([b"x", b"y"])
    r = SessionPair([a1, a2], [b1, b2], names=("entries", "blobs")).run()
    assert r.errors == [] and r.done == 2
    assert b1.state() == a1.state()
    assert (a1.snapshots_taken, b1.snapshots_taken) == (1, 1)
    assert (a2.snapshots_taken, b2.snapshots_taken) == (0, 0)


def test_first_wave_peers_still_sync_both_ways() -> None:
    # (initiator, responder, the initiator once it knows the responder's hello, rounds of
    # the first in-sync check): a new initiator opens in its hello; a responder that does
    # not read that opening gets the ranges in a second round, and the transport remembers
    # the peer for the next sessions (transport/client.py).
    before_open = SessionLimits(open_sums=False)
    cases = (
        (FIRST_WAVE, None, FIRST_WAVE, 1),
        (None, FIRST_WAVE, before_open, 2),
        (None, before_open, before_open, 2),
        (before_open, None, before_open, 1),
    )
    for limits, limits_b, known, first_check in cases:
        a, b = entry_set(BASE[:-5]), entry_set(BASE[:-9] + BASE[-5:-2])
        r = SessionPair([a], [b], limits=limits, limits_b=limits_b).run()
        assert r.errors == [] and r.done == 2
        assert a.state() == b.state()
        again = SessionPair([a], [b], limits=limits, limits_b=limits_b).run()
        assert again.errors == [] and again.rounds == first_check
        known_again = SessionPair([a], [b], limits=known, limits_b=limits_b).run()
        assert known_again.errors == [] and known_again.rounds == 1


def test_a_first_wave_initiator_still_spares_the_responder_its_snapshot() -> None:
    a, b = entry_set(BASE), entry_set(BASE)
    r = SessionPair([a], [b], limits=FIRST_WAVE, limits_b=SessionLimits()).run()
    assert r.errors == [] and r.rounds == 1
    assert (a.snapshots_taken, b.snapshots_taken) == (1, 0)


def test_a_set_changed_between_summary_and_ranges_still_converges() -> None:
    """The responder's summary is read once per session; a later session catches up."""
    a, b = entry_set(BASE[:-1]), entry_set(BASE[:-1])
    pair = SessionPair([a], [b])
    b.add_raw(BASE[-1].to_json())  # after the sessions were made: summaries differ
    r = pair.run()
    assert r.errors == [] and a.state() == b.state()


async def test_an_in_sync_check_between_nodes_sorts_nothing(tmp_path: Path) -> None:
    """Over real gRPC, with both sets (entries, attestations) from SQLite stores."""
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    await write(a, BASE)
    await write(b, BASE[:200])
    async with serving(b) as (server, address):
        [first] = await a.sync(address, ["ledger"])
        [again] = await a.sync(address, ["ledger"])
    assert first.snapshots == 1 and first.entries_sent == 100  # only the entries differed
    assert again.snapshots == 0 and again.round_trips == 1
    # Three sets (entries, attestations, statements), their openings in one record of the
    # hello: under DESIGN §10's 200 bytes each way (docs/protocol.md, the in-sync check).
    assert again.bytes_sent < 200 and again.bytes_received < 200
    assert [r.snapshots for r in server.reports] == [1, 0]


async def test_a_peer_that_does_not_read_the_opening_is_remembered(tmp_path: Path) -> None:
    """A responder from before the opening in the hello (open_sums off) gets the ranges in
    a second round once; the client remembers it and opens with ranges from then on."""
    a, d = make_node(tmp_path / "a"), make_node(tmp_path / "d")
    b = make_node(tmp_path / "b", limits=SessionLimits(open_sums=False))
    await write(a, BASE)
    await write(b, BASE)
    await write(d, BASE)
    async with serving(b) as (server, address):
        reports = [(await a.sync(address, ["ledger"]))[0] for _ in range(3)]
        # what a learned is a's (Node.openings): d, in the same process, learns it itself
        later = [(await d.sync(address, ["ledger"]))[0] for _ in range(2)]
    assert [r.round_trips for r in reports] == [2, 1, 1]
    assert [r.round_trips for r in later] == [2, 1]
    assert all(r.snapshots == 0 and r.entries_sent == 0 for r in reports)
    assert [r.snapshots for r in server.reports] == [0, 0, 0, 0, 0]
    c = make_node(tmp_path / "c")  # a node that reads it: one round from the first session
    await write(c, BASE)
    async with serving(c) as (_, address):
        reports = [(await a.sync(address, ["ledger"]))[0] for _ in range(2)]
    assert [r.round_trips for r in reports] == [1, 1]


def test_the_heap_is_trimmed_once_the_last_session_that_sorted_ends() -> None:
    trims: list[int] = []
    memory = SessionMemory(trim=lambda pad: trims.append(pad) or 1)
    memory.enter()
    memory.leave(built_snapshots=False)  # an in-sync check: nothing to give back
    assert trims == []
    memory.enter()
    memory.enter()
    memory.leave(built_snapshots=True)  # another session still runs: later
    assert trims == []
    memory.leave(built_snapshots=False)
    assert trims == [0] and memory.running == 0
