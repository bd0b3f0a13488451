"""A node's line object carries what its backend has (decision 0076): a line file hands its
sessions the SQL tables the notary keeps beside the entries, and its sets the snapshots it
keeps; a hub line says in one line that work done in a line file's SQL (a shallow snapshot,
a push, rows announced) is not for it, and keeps its snapshots by bucket sums."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifeline.errors import StoreError
from lifeline_mesh.notary.schema import NOTARY_COMPONENT
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.sync.pg_snapshots import BucketSnapshots
from lifeline_mesh.sync.snapshot_cache import KeptSnapshots
from tests.support.pg_server import fresh_database
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import make_node, write


async def test_a_line_file_hands_over_its_tables_and_kept_snapshots(tmp_path: Path) -> None:
    node = make_node(tmp_path / "n")
    await write(node, chain(5, "file"))
    async with node.lines.open("ledger") as line:
        sql = line.sql_tables("a push")
        assert sql is line.store and NOTARY_COMPONENT in sql.schema
        assert not await line.shallow() and await line.mark() == 5
        entries = line.entries(EntryCodec())
        assert isinstance(entries.snapshots, KeptSnapshots)
        assert entries.snapshots.cache is node.snapshots
        assert len(await entries.snapshot()) == 5
    await node.close()


async def test_a_hub_line_refuses_line_file_work_with_one_line(
    pg_server: str, tmp_path: Path
) -> None:
    node = make_node(tmp_path / "hub", store_url=await fresh_database(pg_server))
    await write(node, chain(5, "hub"))
    async with node.lines.open("ledger") as line:
        with pytest.raises(StoreError, match=r"^a push works on a line file, .* sync it in full"):
            line.sql_tables("a push")
        assert not await line.shallow() and await line.mark() is None
        entries = line.entries(EntryCodec())
        assert isinstance(entries.snapshots, BucketSnapshots)
        assert entries.snapshots.cache is node.snapshots
        assert len(await entries.snapshot()) == 5
    await node.close()


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


async def test_the_claims_read_back_are_kept_by_the_lines_opener(tmp_path: Path) -> None:
    """Each claim is verified once for the node's life, whichever session reads it: the
    memory is the opener's, shared by every notary it hands out; a second node (or a
    notary made alone) has its own."""
    node, other = make_node(tmp_path / "n"), make_node(tmp_path / "o")
    kept = []
    for opener in (node, node, other):
        async with opener.lines.open("ledger") as line:
            notary = line.notary(None, lambda: "2026-03-01T12:00:00.000000Z", None)
            kept += [notary.claims, notary.statements().claims]
    assert kept[0] is kept[1] is kept[2] is kept[3] is node.lines.claims
    assert kept[4] is kept[5] is other.lines.claims and kept[4] is not kept[0]
    await node.close()
    await other.close()
