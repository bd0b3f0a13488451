"""A line's read models folded ahead in parts (lifeline/truth/upkeep.py, decision 0103)
end exactly where a reader's one fold ends: the same tables, the same truth, the same
recall hits; and nothing is left for the reader to fold."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifeline.store.sqlite import SqliteStore
from lifeline.truth import recall, table
from lifeline.truth.recall import recall as recall_hits
from lifeline.truth.service import read_truth
from lifeline.truth.upkeep import fold_line, rows_behind
from tests.support.arrival import arrival_order
from tests.support.truth_ledgers import random_ledger

_READ_MODELS = (*table.TABLES, "truth_core", "recall_mark")


def _dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(path)
    try:
        out = {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in _READ_MODELS}
        out["recall_fts"] = conn.execute(
            "SELECT rowid FROM recall_fts WHERE recall_fts MATCH 'refund OR s3' ORDER BY rowid"
        ).fetchall()
        return out
    finally:
        conn.close()


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 45), part=st.integers(1, 9))
async def test_folding_in_parts_ends_where_one_fold_ends(
    seed: int, n: int, part: int, tmp_path: Path
) -> None:
    entries = arrival_order(random_ledger(seed, n), random.Random(seed))
    one, parts = tmp_path / f"one-{seed}-{n}-{part}.db", tmp_path / f"parts-{seed}-{n}-{part}.db"
    for path in (one, parts):
        path.unlink(missing_ok=True)
    half = len(entries) // 2
    async with await SqliteStore.open(one) as store:
        await store.append_many(entries[:half])
        await read_truth(store)  # folded once by readers, then more rows past the marks
        await store.run_write(recall.catch_up)
        await store.append_many(entries[half:])
        want_truth = (await read_truth(store)).truth
        await store.run_write(recall.catch_up)
    async with await SqliteStore.open(parts) as store:
        await store.append_many(entries[:half])
        await read_truth(store)
        await store.run_write(recall.catch_up)
        await store.append_many(entries[half:])
        assert await rows_behind(store) == len(entries) - half
        assert await fold_line(store, part) == len(entries) - half
        assert await rows_behind(store) == 0
        assert (await read_truth(store)).truth == want_truth
    assert _dump(parts) == _dump(one)


async def test_a_line_never_folded_is_folded_from_its_first_row(tmp_path: Path) -> None:
    entries = random_ledger(7, 40)
    async with await SqliteStore.open(tmp_path / "a.db") as store:
        await store.append_many(entries)
        assert await rows_behind(store) == 40
        assert await fold_line(store, 6) == 40
        assert await fold_line(store, 6) == 0  # nothing left: no transaction at all
        truth = (await read_truth(store)).truth
        hits = await recall_hits(store, truth, "refund")
    async with await SqliteStore.open(tmp_path / "b.db") as store:  # a reader's own fold
        await store.append_many(entries)
        assert (await read_truth(store)).truth == truth
        assert await recall_hits(store, truth, "refund") == hits


async def test_the_index_that_is_further_behind_counts(tmp_path: Path) -> None:
    entries = random_ledger(3, 30)
    async with await SqliteStore.open(tmp_path / "a.db") as store:
        await store.append_many(entries[:20])
        await read_truth(store)  # the truth's mark at 20; the recall index's still at 0
        await store.append_many(entries[20:])
        assert await rows_behind(store) == 30
        await store.run_write(recall.catch_up)
        assert await rows_behind(store) == 10
        await store.run_write(lambda conn: table.catch_up(conn, 4))
        assert await rows_behind(store) >= 1  # a part stops short of the top
        await fold_line(store)
        assert await rows_behind(store) == 0


async def test_a_read_only_line_is_left_to_its_readers(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    async with await SqliteStore.open(path) as store:
        await store.append_many(random_ledger(4, 12))
        store.read_only = True  # as a copy in a read-only folder is opened
        assert await fold_line(store) == 0
        store.read_only = False
        assert await rows_behind(store) == 12
