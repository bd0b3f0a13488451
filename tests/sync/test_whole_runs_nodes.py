"""A line sent whole to a node that holds none of it, read in key order with no snapshot
(decision 0144): real nodes over gRPC on loopback, real line files, signed entries."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest

from lifeline_mesh.node.root import Node
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.sync.entry_set import ENTRY_ROWS
from lifeline_mesh.sync.port import RunKey, RunKeys
from lifeline_mesh.sync.snapshot_cache import KeptSnapshots, SnapshotCache
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import history, make_node, serving, signature_ids, write_signed

# Small chunks: 300 entries and their signatures take several reads each.
LIMITS = SessionLimits(fetch_chunk=64, max_frame_bytes=8 << 20)


def _node(root: Path) -> Node:
    return make_node(root, limits=LIMITS)


class _Reads:
    """Counts the chunks each set's run reads, calling ``between`` after each."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by_set: dict[str, int] = {}
        self.between: Callable[[str, int], Awaitable[None]] | None = None
        original = KeptSnapshots.run

        async def run(kept: KeptSnapshots, after: RunKey | None, limit: int) -> RunKeys:
            got = await original(kept, after, limit)
            name = kept.spec.name
            self.by_set[name] = self.by_set.get(name, 0) + 1
            if self.between is not None:
                await self.between(name, self.by_set[name])
            return got

        monkeypatch.setattr(KeptSnapshots, "run", run)


async def test_a_pull_into_an_empty_node_is_served_in_runs_with_no_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _Reads(monkeypatch)
    by_id: list[int] = []
    fetch = NotaryStore.fetch

    async def counted(notary: NotaryStore, ids: Sequence[bytes]) -> list[bytes]:
        by_id.append(len(ids))
        return await fetch(notary, ids)

    monkeypatch.setattr(NotaryStore, "fetch", counted)
    a, b = _node(tmp_path / "a"), _node(tmp_path / "b")
    await write_signed(a, tmp_path / "a", chain(250, "pulled") + chain(50, "beside"))
    async with serving(a) as (server, address):
        [report] = await b.sync(address, ["ledger"])
        assert report.entries_added == 300 and report.error is None
        assert by_id == []  # the signatures were read with their keys, not again by id
        [served] = server.reports
        assert served.snapshots == 0  # the serving side sorted nothing
        assert served.entries_sent == 300
        assert served.signatures_sent == 300 + 1  # and the seal over them (decision 0149)
        # 300 entries, 64 a chunk: 4 full reads and the last; the same for the signatures
        assert reads.by_set == {"entries": 5, "attestations": 5}
        assert await history(b) == await history(a)
        assert signature_ids(tmp_path / "b") == signature_ids(tmp_path / "a")
        [again] = await b.sync(address, ["ledger"])
        assert again.entries_added == 0 and again.round_trips == 1
        assert server.reports[-1].snapshots == 0  # in sync: no snapshot either


async def test_a_push_to_an_empty_serving_node_is_sent_in_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = _Reads(monkeypatch)
    a, b = _node(tmp_path / "a"), _node(tmp_path / "b")
    await write_signed(a, tmp_path / "a", chain(200, "pushed"))
    async with serving(b) as (_server, address):
        [report] = await a.sync(address, ["ledger"])
        assert report.entries_sent == 200
        assert report.signatures_sent == 200 + 1  # and the seal over them (decision 0149)
        assert report.snapshots == 0  # the sending side sorted nothing
        assert reads.by_set == {"entries": 4, "attestations": 4}
        assert await history(b) == await history(a)
        assert signature_ids(tmp_path / "b") == signature_ids(tmp_path / "a")


async def test_an_entry_written_during_a_run_arrives_signed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry (and its signature) stored on the serving node after its signatures were
    read, while its entries are being read: the entry is above where the run has read,
    so it goes in this session, its signature ahead of it (decision 0106)."""
    reads = _Reads(monkeypatch)
    a, b = _node(tmp_path / "a"), _node(tmp_path / "b")
    line = chain(201, "grown")
    await write_signed(a, tmp_path / "a", line[:200])

    async def write_one(name: str, count: int) -> None:
        if name == "entries" and count == 2:
            await write_signed(a, tmp_path / "a", line[200:])

    reads.between = write_one
    async with serving(a) as (server, address):
        [report] = await b.sync(address, ["ledger"])
        assert report.entries_added == 201 and report.error is None
        assert server.reports[0].snapshots == 0
    assert await history(b) == await history(a)
    assert signature_ids(tmp_path / "b") == signature_ids(tmp_path / "a")


async def test_a_row_with_a_damaged_id_is_left_out_of_a_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a = _node(tmp_path / "a")
    await write_signed(a, tmp_path / "a", chain(5, "damaged"))
    async with a.open_line("ledger") as store:
        kept = SnapshotCache().of(store, ENTRY_ROWS)  # type: ignore[arg-type]
        ids = (await kept.run(None, 10)).ids
        assert len(ids) == 5
        await store.run_write(
            lambda c: c.execute("UPDATE entries SET id = 'not hex' WHERE id = ?", (ids[2].hex(),))
        )
        with caplog.at_level(logging.WARNING):
            left = await kept.run(None, 10)
    assert left.ids == ids[:2] + ids[3:] and left.after is None and left.items is None
    assert "a row of entries has no valid id ('not hex'): not sent" in caplog.text
