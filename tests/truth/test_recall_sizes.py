"""Recall on lines of every size: a word that occurs is found, a word that does not is not.

The abstention floor is relative to the best hit, so the tiny BM25 scores of a one- or
two-entry line (where every term is in half the documents or more) still find their entry.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline.truth import recall as recall_mod
from lifeline.truth.recall import FTS5_AVAILABLE, recall
from lifeline.truth.service import read_truth
from tests.support.clirun import lifeline
from tests.support.paths import REPO

WORDS = [
    "build",
    "deploy",
    "schema",
    "queue",
    "cache",
    "index",
    "shard",
    "replica",
    "token",
    "session",
]


def _filler(n: int) -> list[Entry]:
    return [
        Entry.create(
            ts=f"2026-01-01T00:00:00.{i:06d}Z",
            kind="note",
            summary=f"{WORDS[i % 10]} {WORDS[(i * 7) % 10]} item {i}",
            body=f"routine {WORDS[(i * 3) % 10]} work",
        )
        for i in range(n)
    ]


def _needle() -> Entry:
    return Entry.create(
        ts="2026-02-01T00:00:00Z",
        kind="decision",
        summary="Database: PostgreSQL",
        body="The audit trail needs cross-row ACID.",
    )


async def _check(tmp_path: Path, n: int) -> None:
    store = await SqliteStore.open(tmp_path / "l.db")
    try:
        needle = _needle()
        await store.append_many([*_filler(n - 1), needle])
        truth = (await read_truth(store)).truth
        for query in ["PostgreSQL", "audit trail", "acid", "database audit"]:
            hits = await recall(store, truth, query)
            assert hits and hits[0].entry_id == needle.id, (n, query)
            assert hits[0].score == 1.0
        assert await recall(store, truth, "kubernetes helm") == []
        if n > 1:
            common = await recall(store, truth, "routine")  # in every filler entry
            assert common and all(h.entry_id != needle.id for h in common)
    finally:
        await store.close()


@pytest.fixture(params=["fts", "scan"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "fts" and not FTS5_AVAILABLE:
        pytest.skip("this SQLite has no FTS5")
    if request.param == "scan":
        monkeypatch.setattr(recall_mod, "FTS5_AVAILABLE", False)
    return str(request.param)


@pytest.mark.parametrize("n", [1, 2, 10])
async def test_small_lines_find_their_words(tmp_path: Path, mode: str, n: int) -> None:
    await _check(tmp_path, n)


@pytest.mark.slow
@pytest.mark.parametrize("n", [10_000, 100_000])
async def test_large_lines_find_their_words(tmp_path: Path, n: int) -> None:
    await _check(tmp_path, n)


def _tour_writes() -> list[list[str]]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```sh\n(.*?)^```$", readme, flags=re.M | re.S)
    tour = next(b for b in blocks if "lifeline recall" in b)
    return [
        shlex.split(line)[1:]
        for line in tour.splitlines()
        if line.startswith(("lifeline log ", "lifeline checkpoint "))
    ]


async def test_readme_tour_recalls_each_entry_by_any_of_its_words(tmp_path: Path) -> None:
    writes = _tour_writes()
    assert len(writes) >= 3
    assert lifeline(tmp_path, "init").returncode == 0
    for args in writes:
        done = lifeline(tmp_path, *args)
        assert done.returncode == 0, done.stderr
    shown = lifeline(tmp_path, "recall", "audit trail")
    assert "Database: PostgreSQL" in shown.stdout, shown.stdout
    store = await SqliteStore.open(tmp_path / ".lifeline" / "ledger.db")
    try:
        truth = (await read_truth(store)).truth
        entries = [e async for e in store.stream()]
        assert len(entries) == len(writes)
        for entry in entries:
            for word in set(re.findall(r"[A-Za-z]{3,}", f"{entry.summary} {entry.body}")):
                ids = [h.entry_id for h in await recall(store, truth, word)]
                assert entry.id in ids, (word, entry.summary)
        assert await recall(store, truth, "kubernetes") == []
    finally:
        await store.close()
