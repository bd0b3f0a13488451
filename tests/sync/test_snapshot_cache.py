"""A serving node's snapshots brought up to date from the rows added since, not rebuilt:
each one equal to a snapshot built from scratch, whatever changed in between."""

from __future__ import annotations

from pathlib import Path

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary.attestation_set import AttestationSet, attestation_rows
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.sets import Snapshot
from lifeline_mesh.sync.entry_set import ENTRY_ROWS, EntrySet, KeyedEntries, ScannedEntries
from lifeline_mesh.sync.snapshot_cache import SnapshotCache
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import make_node, serving, write

BASE = chain(120, "cache")
SIDE = chain(40, "side", BASE[30].id)  # heights in the middle of the key order


def _same(got: Snapshot, fresh: Snapshot) -> None:
    assert len(got) == len(fresh) and got.whole() == fresh.whole()
    assert [got.key(i) for i in range(len(got))] == [fresh.key(i) for i in range(len(fresh))]
    assert [got.token(i) for i in range(len(got))] == [fresh.token(i) for i in range(len(got))]
    n = len(got)
    for lo, hi in ((0, n), (n // 4, 3 * n // 4), (n // 2, n - 1)):
        assert got.fingerprint(lo, hi) == fresh.fingerprint(lo, hi)
    for i in range(n):  # the id index, carried over from the snapshot before or built
        assert got.position(got.item_id(i)) == i
    assert got.position(b"\xff" * 32) is None


def _kept(cache: SnapshotCache, store: SqliteStore) -> EntrySet:
    return EntrySet(store, snapshots=cache.of(store, ENTRY_ROWS))


async def _fresh(store: SqliteStore) -> Snapshot:
    """Built from every row, through the port (no SQL of the line's): the reference."""
    return await EntrySet(store).snapshot()


async def test_entries_brought_up_to_date_equal_a_fresh_snapshot(tmp_path: Path) -> None:
    cache = SnapshotCache()
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        cached, plain = _kept(cache, store), EntrySet(store, snapshots=ScannedEntries(store))
        await store.append_many(BASE[:60])
        first, at_first = await cached.snapshot(), await plain.snapshot()
        first.index_ids()  # its id index is built: the update extends it
        _same(first, at_first)
        await store.append_many(BASE[60:])  # at the end of the key order
        _same(await cached.snapshot(), await plain.snapshot())
        await store.append_many(SIDE)  # in the middle of it
        _same(await cached.snapshot(), await plain.snapshot())
        old = BASE[5]  # an earlier ts of a held entry: its token changes in place
        earlier = old.to_json().replace(old.ts.encode(), b"2025-12-31T00:00:00Z")
        await store.append_many([Entry.from_json(earlier)])
        _same(await cached.snapshot(), await plain.snapshot())
        assert (cache.built, cache.updated) == (2, 2)  # the first, and after the ts change
        _same(first, at_first)  # a session's snapshot never changes under it


async def test_attestations_brought_up_to_date_equal_a_fresh_snapshot(tmp_path: Path) -> None:
    cache = SnapshotCache()
    identity = NodeIdentity.generate()
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        notary = await NotaryStore.attach(store)
        kept = cache.of(store, attestation_rows(notary.table))
        cached, plain = AttestationSet(notary, kept), AttestationSet(notary)
        await store.append_many(BASE)
        await sign_entries(store, identity, BASE[:50])
        _same(await cached.snapshot(), await plain.snapshot())
        await sign_entries(store, identity, BASE[50:])
        _same(await cached.snapshot(), await plain.snapshot())
        assert (cache.built, cache.updated) == (1, 1)


async def test_sets_over_the_cap_are_built_each_time(tmp_path: Path) -> None:
    cache = SnapshotCache(max_items=50)
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        await store.append_many(BASE)
        for _ in range(2):
            _same(await _kept(cache, store).snapshot(), await _fresh(store))
    assert (cache.built, cache.updated) == (2, 0)


async def test_a_serving_node_updates_its_snapshots_between_sessions(tmp_path: Path) -> None:
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    await write(a, BASE)
    await write(b, BASE[:100])
    async with serving(b) as (_, address):
        for k in range(3):
            await write(a, chain(2, f"new{k}", BASE[-1].id))
            [report] = await a.sync(address, ["ledger"])
            assert report.entries_sent == (22 if k == 0 else 2)
    assert b.snapshots.updated >= 2 and b.snapshots.built <= 3
    async with a.open_line("ledger") as sa, b.open_line("ledger") as sb:
        assert [e.id async for e in sa.stream()] == [e.id async for e in sb.stream()]


async def test_a_fresh_process_starts_from_the_snapshots_kept_on_disk(tmp_path: Path) -> None:
    """A restarted node reads its snapshots back and merges the rows written since; a file
    that does not match the line (damaged, or rows changed in place) is built again."""
    kept = tmp_path / "snapshots"
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        await store.append_many(BASE[:60])
        first = SnapshotCache(directory=kept)
        _same(await _kept(first, store).snapshot(), await _fresh(store))
        await first.flush()
        assert (first.built, first.loaded) == (1, 0) and len(list(kept.iterdir())) == 1
        await store.append_many(BASE[60:])  # written while no node served it
        second = SnapshotCache(directory=kept)  # the restarted process
        _same(await _kept(second, store).snapshot(), await _fresh(store))
        assert (second.built, second.updated, second.loaded) == (0, 1, 1)
        await second.flush()  # brought up to date right after a load: not written again yet
        (path,) = kept.iterdir()
        data = bytearray(path.read_bytes())
        data[-40] ^= 1  # one flipped bit in the stored tokens
        path.write_bytes(bytes(data))
        third = SnapshotCache(directory=kept)
        _same(await _kept(third, store).snapshot(), await _fresh(store))
        assert (third.built, third.loaded) == (1, 0)  # refused by its checksum, built again
        await third.flush()
        old = BASE[5]  # an earlier ts of a held entry: its token changes in place
        earlier = old.to_json().replace(old.ts.encode(), b"2025-12-31T00:00:00Z")
        await store.append_many([Entry.from_json(earlier)])
        fourth = SnapshotCache(directory=kept)
        _same(await _kept(fourth, store).snapshot(), await _fresh(store))
        assert (fourth.built, fourth.loaded) == (1, 1)  # loaded, did not match: built again


async def test_every_source_of_a_line_files_snapshot_gives_the_same_one(tmp_path: Path) -> None:
    """The port's (keys, then each ts), one SQL scan, and the kept one, ids of another line
    included: a line's opener may hand any of them to its set (decision 0076)."""
    outside = [bytes([k]) * 32 for k in (1, 2)]
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        await store.append_many([*BASE, *SIDE])
        keyed = await KeyedEntries(store).snapshot(outside)
        for other in (ScannedEntries(store), SnapshotCache().of(store, ENTRY_ROWS)):
            got = await other.snapshot(outside)
            _same(got, keyed)
            assert all(got.knows(i) for i in outside) and not got.knows(b"\x03" * 32)
