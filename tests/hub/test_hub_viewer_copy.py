"""The viewer's copy of a hub's line (lifeline_mesh/ui/hub_copy.py) is brought up to date by
the rows past the last one it copied, not by comparing every id: the first page copies the
line batch by batch, a page after writes reads only the new rows, a page after none reads
one row of totals, and only an entry changed in place (its ts lowered) costs a full pass,
once. While a line's first copy is made, a page waits a few seconds at most, then says how
far the copy is and reloads itself, and other pages are not held. Real PostgreSQL, a real
hub root, the copy a real line file, a real `lifeline-mesh ui`."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from lifeline.entry import Entry
from lifeline.store.port import Store
from lifeline.store.summary import SetTotals
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.ui.hub_copy import HubCopy
from tests.support.hub_roots import hub_root, page, viewer
from tests.support.pg_locks import HeldTransaction
from tests.support.pg_server import fresh_database
from tests.support.recon_helpers import chain
from tests.support.ui_server import fetch

N = 4_500  # more than two of the copy's batches


def test_a_copy_follows_the_hub_by_row_number(pg_server: str, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(pg_server))
    root = tmp_path / "hub"
    hub_root(root, url)
    asyncio.run(_follow(NodeHome(root)))


async def _follow(home: NodeHome) -> None:
    entries = chain(N + 20, "n")
    copy_of = HubCopy(home)
    try:
        async with home.open_line("ledger") as hub:
            await hub.declare_external("ab" * 32, "other")
            await hub.append_many(entries[:N])
            copy = await copy_of.open("ledger")  # the first page: the whole line, by rows
            try:
                assert copy_of.progress["ledger"] == (N, N)
                assert await copy.entry_totals() == await _totals(hub)
                assert await copy.externals() == {"ab" * 32: "other"}
                assert await copy.count() == await hub.count() and copy_of.full_passes == 0

                await hub.append_many(entries[N:])  # writes since: only they are read
                assert await copy_of.refresh("ledger", copy) == 20
                assert await copy.entry_totals() == await _totals(hub)
                assert await copy_of.refresh("ledger", copy) == 0  # nothing new: one row read
                assert copy_of.full_passes == 0

                # an entry's ts lowered in place moves no row number: one full pass, and
                # no more while nothing else is written
                first = entries[0]
                earlier = Entry.from_json(first.to_json(), check=False).with_ts(
                    "2020-01-01T00:00:00Z"
                )
                await hub.append_many([earlier])
                await copy_of.refresh("ledger", copy)
                assert copy_of.full_passes == 1
                assert await copy_of.refresh("ledger", copy) == 0
                assert copy_of.full_passes == 1
            finally:
                await copy.close()
    finally:
        copy_of.close()


async def _totals(hub: Store) -> SetTotals:
    return await hub.entry_totals()  # type: ignore[attr-defined,no-any-return]  # a PgStore


def test_a_page_says_how_far_the_first_copy_is(pg_server: str, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(pg_server))
    root = tmp_path / "hub"
    hub_root(root, url)
    asyncio.run(_fill(NodeHome(root), chain(50, "p")))
    # the entries table held exclusively, as a database busy with something long would:
    # the viewer's copy cannot read a row (taken before the viewer starts its warm-up)
    locked = HeldTransaction(url, "LOCK TABLE entries IN ACCESS EXCLUSIVE MODE").__enter__()
    try:
        with viewer(root) as base:
            started = time.monotonic()
            status, body, headers = fetch(f"{base}lines/ledger/")
            waited = time.monotonic() - started
            assert status == 503, body[:300]
            assert "Preparing line ledger" in body and "copying line &#39;ledger&#39;" in body
            assert '<meta http-equiv="refresh" content="2">' in body
            assert headers["retry-after"] == "2"
            assert waited < 20, waited  # PATIENCE (3 s), not the whole copy
            # another page is not held behind the copy either
            assert fetch(f"{base}lines/ledger/history")[0] == 503
            locked.release()  # the database free again: the copy ends, the page is the line's
            deadline = time.monotonic() + 60
            while (status := fetch(f"{base}lines/ledger/")[0]) == 503:
                assert time.monotonic() < deadline, "the copy never ended"
                time.sleep(0.5)
            assert status == 200
            assert "p-49" in page(f"{base}lines/ledger/history")  # the whole line copied
    finally:
        locked.release()


async def _fill(home: NodeHome, entries: list[Entry]) -> None:
    async with home.open_line("ledger") as hub:
        await hub.append_many(entries)
