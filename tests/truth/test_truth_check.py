"""The truth tables' check (``lifeline/truth/check.py``) against the fold it mirrors: on
tables the fold wrote, whatever the ledger, arrival order and increments, it finds
nothing, whether the rows are checked in one range or cut into several (as the worker
processes cut them); and one edited value of any derived row is found and named."""

from __future__ import annotations

import itertools
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifeline.audit.worker import check_range
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.check import judge, read_stored, scan
from lifeline.truth.service import read_shown
from tests.support.arrival import arrival_order
from tests.support.truth_ledgers import random_ledger as _ledger


async def _folded(path: Path, seed: int, n: int, step: int) -> None:
    entries = _ledger(seed, n)
    order = arrival_order(entries, random.Random(seed))
    async with await SqliteStore.open(path) as store:
        for start in range(0, len(order), step):  # the tables caught up in increments
            await store.append_many(order[start : start + step])
            await read_shown(store)


def _findings(path: Path, cuts: int) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        stored = read_stored(conn)
        assert stored is not None and stored.mark >= 0, stored
        if cuts == 1:
            results = [scan(conn, stored.mark)]
        else:  # the worker processes' code, in ranges of rows
            results = []
            bounds = [stored.mark * k // cuts for k in range(cuts + 1)]
            for lo, hi in itertools.pairwise(bounds):
                sent: list[tuple[Any, ...]] = []
                check_range(conn, lo, hi, sent.extend, None, stored.mark)
                results += [r[1] for r in sent if r[0] == "truth"]
        found, _over = judge(stored, results)
        return found
    finally:
        conn.close()


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60), step=st.integers(1, 15))
async def test_tables_the_fold_wrote_pass(seed: int, n: int, step: int, tmp_path: Path) -> None:
    path = tmp_path / f"{seed}-{n}-{step}.db"
    path.unlink(missing_ok=True)
    await _folded(path, seed, n, step)
    assert _findings(path, 1) == []
    assert _findings(path, 3) == []


EDITS = [
    ("truth_items", "kind"),
    ("truth_items", "ts"),
    ("truth_items", "summary"),
    ("truth_items", "why"),
    ("truth_items", "thread"),
    ("truth_items", "role"),
    ("truth_marks", "cp"),
    ("truth_corrections", "targets"),
]


@pytest.mark.parametrize(("table", "column"), EDITS)
@pytest.mark.parametrize("cuts", [1, 3])
async def test_one_edited_value_is_named(
    table: str, column: str, cuts: int, tmp_path: Path
) -> None:
    path = tmp_path / "l.db"
    await _folded(path, 7, 60, 9)
    conn = sqlite3.connect(path)
    key = "id"
    subject = conn.execute(f"SELECT {key} FROM {table} ORDER BY {key} LIMIT 1").fetchone()[0]
    new = {"cp": 7, "targets": "[]"}.get(column, "edited")
    conn.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (new, subject))
    conn.commit()
    conn.close()
    found = _findings(path, cuts)
    assert found and all(f[0] == "truth-row" for f in found), found
    assert subject in {f[1] for f in found}
    assert any(f"{table}.{column}" in f[2] for f in found), found
