"""Received signatures stored without a row handed back per insert (decision 0065): a batch
that repeats an item, or names items the line holds already, adds exactly the others, and
the set's kept fingerprint (count, sum of ids) stays the one computed from the rows; a bad
signature in the middle of a large batch stores nothing of it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from lifeline.errors import BadSignature
from lifeline.store.sqlite import SqliteStore
from lifeline.store.summary import SetTotals
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary.statement import Role, sign
from lifeline_mesh.notary.storage import NotaryStore

NOW = "2026-03-01T12:00:00.000000Z"
AUTHOR = NodeIdentity.generate()


def _items(first: int, count: int) -> list[bytes]:
    return [
        sign(
            AUTHOR,
            Role.AUTHOR,
            f"{k:064x}",
            f"2026-03-01T10:{k // 60 % 60:02d}:{k % 60:02d}.000000Z",
        ).item
        for k in range(first, first + count)
    ]


def _from_rows(path: Path) -> tuple[SetTotals, SetTotals, int, int]:
    """The set's totals computed from its rows, the totals its kept row holds, that row's
    mark and the table's highest row number."""
    with sqlite3.connect(path) as conn:
        ids = [bytes(r[0]) for r in conn.execute("SELECT id FROM attestations")]
        top = int(conn.execute("SELECT max(seq) FROM attestations").fetchone()[0])
        count, total, mark = conn.execute(
            "SELECT count, total, mark FROM set_summaries WHERE name = 'attestations'"
        ).fetchone()
    computed = sum(int.from_bytes(i, "little") for i in ids) % (1 << 256)
    kept = SetTotals(int(count), int.from_bytes(total, "little"))
    return SetTotals(len(ids), computed), kept, int(mark), top


async def _receive(notary: NotaryStore, items: list[bytes]) -> int:
    return await notary.commit(await notary.prepare(items))


async def test_held_and_repeated_items_are_added_once_and_the_fingerprint_holds(
    tmp_path: Path,
) -> None:
    path = tmp_path / "line.db"
    held, fresh = _items(0, 1500), _items(1500, 1200)
    async with await SqliteStore.open(path) as store:
        notary = await NotaryStore.attach(store, clock=lambda: NOW)
        assert await _receive(notary, held) == 1500
        # held items mixed in, one fresh item twice, over several statements' worth of rows
        batch = [*held[::7], fresh[0], *fresh, *held[1::300]]
        assert await _receive(notary, batch) == 1200
        assert await _receive(notary, held[:10] + fresh[-10:]) == 0
    computed, kept, mark, top = _from_rows(path)
    assert computed.count == 2700
    assert kept == computed  # the row kept by each insert, not recomputed from the rows
    assert mark == top


@pytest.mark.parametrize("bad_at", [0, 1300, 2499])
async def test_a_bad_signature_in_a_large_batch_stores_none_of_it(
    tmp_path: Path, bad_at: int
) -> None:
    path = tmp_path / "line.db"
    items = _items(0, 2500)
    forged = bytearray(items[bad_at])
    forged[-1] ^= 1  # the signature's last byte
    items[bad_at] = bytes(forged)
    async with await SqliteStore.open(path) as store:
        notary = await NotaryStore.attach(store, clock=lambda: NOW)
        assert await _receive(notary, _items(7000, 10)) == 10
        with pytest.raises(BadSignature, match=f"attestation {bad_at} of the batch"):
            await _receive(notary, items)
    computed, kept, mark, top = _from_rows(path)
    assert computed.count == 10
    assert kept == computed
    assert mark == top
