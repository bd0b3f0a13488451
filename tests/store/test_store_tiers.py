"""The storage tiers are asked for by name: what each store offers, and a node that cannot
keep a line's notary refuses the line instead of syncing it unchecked (decision 0029)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifeline.errors import StoreError
from lifeline.store import MemoryStore, SqliteStore
from lifeline.store.pg_lines import PgLines
from lifeline.store.schema import LEDGER, line_schema
from lifeline.store.tiers import SqlLine, Summarized
from lifeline.truth.pg_view import PgTruth
from lifeline.truth.snapshot import SqliteTruth, truth_source
from lifeline.truth.source import FoldedTruth
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.notary.storage import NotaryStore
from tests.support.entries import make_entry
from tests.support.pg_server import line_name, open_test_store
from tests.support.sync_helpers import make_node


async def test_each_store_offers_its_tiers(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    memory = MemoryStore()
    sqlite = await SqliteStore.open(tmp_path / "line.db")
    pg = await open_test_store(request, "postgres", tmp_path)
    try:
        assert not isinstance(memory, Summarized) and not isinstance(memory, SqlLine)
        assert isinstance(sqlite, SqlLine) and isinstance(sqlite, Summarized)
        assert isinstance(pg, Summarized) and not isinstance(pg, SqlLine)
        for store in (sqlite, pg):  # the whole-line fingerprint, kept by each write
            assert isinstance(store, Summarized)
            await store.append_many([make_entry("a"), make_entry("b")])
            totals = await store.entry_totals()
            assert totals.count == 2 and totals.total != 0
        assert (await sqlite.entry_totals()) == (await pg.entry_totals())
        assert sorted(line_schema()) == ["ledger", "notary", "recall", "truth"]
        # each line's truth follows the backend it was opened on (decision 0088)
        assert (
            type(truth_source(sqlite)) is SqliteTruth and type(truth_source(memory)) is FoldedTruth
        )
        assert type(truth_source(pg)) is FoldedTruth  # opened without the truth's component
        hub = PgLines(request.getfixturevalue("pg_server"))  # as a hub root opens its lines
        try:
            async with hub.open(line_name(), create=True) as line:
                assert type(truth_source(line)) is PgTruth
        finally:
            await hub.close()
    finally:
        await sqlite.close()
        await pg.close()


async def test_a_line_opened_without_the_notary_tables_says_so(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "bare.db", schema=LEDGER) as bare:
        assert type(truth_source(bare)) is FoldedTruth  # no tables: truth folds in memory
        with pytest.raises(StoreError, match="without the notary's tables"):
            await NotaryStore.attach(bare)
        tables = await bare.run_read(
            lambda c: {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
        )
        assert "attestations" not in tables and "entries" in tables


async def test_a_node_refuses_to_sync_a_line_it_cannot_notarize(tmp_path: Path) -> None:
    node = make_node(tmp_path / "n")
    from lifeline_mesh.home.identity import NodeIdentity

    identity = NodeIdentity.generate()
    with pytest.raises(StoreError, match="which a MemoryStore does not have"):
        await sign_entries(MemoryStore(), identity, [make_entry("x")])
    async with node.session("ledger") as session:  # its lines come with their notary
        names = [s.name for s in session.sets]
    assert names[-1] == "entries" and len(names) == 3
