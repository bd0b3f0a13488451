"""A pull into an empty line drops the signatures' subject index with their id index and
builds both at its end (decision 0150). Whatever looks signatures up by entry meanwhile
builds it first when it can write, and reads right without it when it cannot: real line
files, real nodes over gRPC on loopback."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary import deferred_index
from lifeline_mesh.notary.audit_reads import items_about
from lifeline_mesh.notary.deferred_index import ID_INDEX
from lifeline_mesh.notary.row_writes import SUBJECT_INDEX
from lifeline_mesh.notary.sign import fingerprint
from lifeline_mesh.notary.statement import Attestation, Role, sign
from lifeline_mesh.notary.storage import NotaryStore
from tests.support.recon_helpers import chain


def _indexes(path: Path) -> set[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        sql = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'attestations'"
        found = {r[0] for r in conn.execute(sql)}
    conn.close()
    return found


def _signed(root: Path, entries: list[Entry]) -> tuple[NodeIdentity, list[Attestation]]:
    identity, _ = NodeIdentity.load_or_create(NodeHome(root))
    return identity, [sign(identity, Role.AUTHOR, e.id, e.ts) for e in entries]


@asynccontextmanager
async def _deferred(
    tmp_path: Path, n: int, name: str
) -> AsyncIterator[tuple[SqliteStore, NodeIdentity, list[Entry], list[Attestation]]]:
    """A line whose first batch of ``n`` signatures, received, dropped both indexes."""
    entries = chain(n, name)
    identity, authors = _signed(tmp_path / "signer", entries)
    store = await SqliteStore.open(tmp_path / "ledger.db")
    try:
        pulling = await NotaryStore.attach(store)
        pulling.may_defer = True
        assert await pulling.commit_each(authors) == (len(authors), [])
        assert not {ID_INDEX, SUBJECT_INDEX} & _indexes(store.path)
        yield store, identity, entries, authors
    finally:
        await store.close()


@pytest.fixture(autouse=True)
def _small_pulls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deferred_index, "DEFER_MIN", 10)


async def test_entries_the_session_does_not_find_signed_build_it_mid_pull(
    tmp_path: Path,
) -> None:
    """Entries whose signatures another session stored are looked up by entry: the index
    is built in that batch's transaction, and the check refuses a copy at an unsigned ts."""
    async with _deferred(tmp_path, 40, "unmatched") as (store, _, entries, _):
        later = await NotaryStore.attach(store)  # remembers none of them
        moved = replace(entries[39], ts="2020-01-01T00:00:00.000000Z")  # same id
        result = await later.admit_entries([*entries[:39], moved], [])
        assert len(result.added) == 39 and moved.id not in result.added
        found = _indexes(store.path)
        assert SUBJECT_INDEX in found and ID_INDEX not in found  # the id index still waits


async def test_a_summary_claim_received_meanwhile_builds_it(tmp_path: Path) -> None:
    async with _deferred(tmp_path, 30, "claims") as (store, identity, entries, _):
        ids = sorted(e.id for e in entries)
        claim = sign(
            identity, Role.SUMMARY, "ledger", entries[-1].ts, str(len(ids)), fingerprint(ids)
        )
        later = await NotaryStore.attach(store)
        assert await later.commit_each([claim]) == (1, [])
        assert SUBJECT_INDEX in _indexes(store.path)


async def test_signatures_served_by_entry_build_both_first(tmp_path: Path) -> None:
    """A peer asking for an entry's signatures would make the node scan the table for each
    chunk it asks: serving them builds the deferred indexes first."""
    async with _deferred(tmp_path, 30, "served") as (store, _, entries, authors):
        serving = await NotaryStore.attach(store)
        asked = [e.id for e in entries[3:9]]
        assert await serving.author_ids(asked) == [a.id for a in authors[3:9]]
        assert {ID_INDEX, SUBJECT_INDEX} <= _indexes(store.path)


async def test_a_reader_that_cannot_write_reads_the_same_without_it(tmp_path: Path) -> None:
    """`verify` on a line whose pull is still running: one scan, the same items."""
    async with _deferred(tmp_path, 25, "audited") as (_, _, entries, authors):
        pass  # closed: read as `verify` would, by another connection
    wanted = [e.id for e in entries[::3]]
    uri = f"file:{tmp_path / 'ledger.db'}?mode=ro"
    with sqlite3.connect(uri, uri=True) as conn:
        without = items_about(conn, "attestations", "author", wanted)
    conn.close()
    with sqlite3.connect(tmp_path / "ledger.db") as conn:
        conn.execute(
            "CREATE INDEX attestations_subject_key ON attestations(role, substr(subject, 1, 16))"
        )
        plan = " ".join(
            str(r)
            for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT item FROM attestations WHERE role = 'author'"
                " AND substr(subject, 1, 16) IN ('a')"
            )
        )
        assert SUBJECT_INDEX in plan  # the declared index is the one the queries use
        with_index = items_about(conn, "attestations", "author", wanted)
    conn.close()
    assert sorted(without) == sorted(with_index)
    assert {item for _, item in without} == {a.item for a in authors[::3]}
