"""A hub relays an author signature that reaches it after the entry it signs, within seconds,
whichever hub process took it in (decision 0139, on PostgreSQL).

A hub's processes hear of each other's writes through LISTEN/NOTIFY, sent by entry writes.
A signature stored for an entry the hub already holds sent nothing, so a node watching
another hub process got it only at the next periodic check of its link (60 s). Real
processes over mutual TLS, a real PostgreSQL: C's entry reaches the hub unsigned (as a
session cut short leaves it) and goes on, unsigned, to the watcher W, connected to hub
process B; then C syncs with hub process A, which takes the signature in.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.store.pg_notify import LineListener
from lifeline.store.postgres import PgDatabase
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary.pg_schema import PG_NOTARY
from lifeline_mesh.notary.sign import AuthorHook, notary_of
from lifeline_mesh.notary.statement import Role, sign
from lifeline_mesh.peering.schedule import PERIODIC_SYNC_S
from tests.support.mesh_procs import (
    author_signed,
    cli,
    join_mesh,
    log_note,
    serve,
    shared_node,
    until,
    wait_for_entry,
    wait_watching,
)
from tests.support.pg_server import fresh_database, hub

pytestmark = pytest.mark.slow

WITHIN_S = 15.0  # well under the periodic check (PERIODIC_SYNC_S)


async def _copy_unsigned(source: Path, url: str, entry_id: str) -> None:
    """C's entry stored on the hub without its signature."""
    async with await SqliteStore.open(source, create=False) as store:
        (entry,) = await store.get_many([entry_id])
    db = await PgDatabase.connect(url)
    try:
        line = await db.line("ledger")
        assert (await line.append_many([entry])).added == (entry_id,)
    finally:
        await db.close()


@pytest.mark.timeout(600)
def test_a_late_signature_taken_by_one_hub_process_reaches_a_watcher_of_the_other(
    pg_server: str, tmp_path: Path
) -> None:
    assert WITHIN_S < PERIODIC_SYNC_S / 2
    url = asyncio.run(fresh_database(pg_server))
    c, hub_a, hub_b, w = roots = [tmp_path / n for n in ("c", "hub-a", "hub-b", "w")]
    files = {root: shared_node(root) for root in roots}
    join_mesh(c, [hub_a, hub_b, w])
    entry_id = log_note(c, "written on C, signed there")
    asyncio.run(_copy_unsigned(files[c], url, entry_id))
    with (
        hub(hub_a, url, insecure=False) as (_a, address_a),
        hub(hub_b, url, insecure=False) as (_b, address_b),
        serve(w, "--listen", "127.0.0.1:0", "--peer", address_b, "--no-discovery"),
    ):
        wait_watching(w)
        wait_for_entry(files[w], entry_id)  # relayed by hub process B, unsigned
        time.sleep(2)  # the first sessions of the W-B link are over
        assert not author_signed(files[w], entry_id)

        cli("lifeline_mesh", c, "sync", address_a)  # hub process A takes the signature
        took = time.monotonic()
        while not author_signed(files[w], entry_id):
            assert time.monotonic() - took < WITHIN_S, "the signature stayed on the hub"
            time.sleep(0.25)


async def test_a_signature_notifies_only_when_it_comes_after_its_entry(pg_server: str) -> None:
    """One notification per local write signed in its own transaction (not one more for
    its signature), one for a late signature, none for a signature ahead of its entry."""
    url = await fresh_database(pg_server)
    db = await PgDatabase.connect(url, migrations=PG_NOTARY)
    heard: list[list[str]] = []
    listener = LineListener(url, heard.append)
    task = asyncio.create_task(listener.run())
    identity = NodeIdentity.generate()
    try:
        line = await db.line("ledger")
        await notary_of(line)
        await asyncio.wait_for(listener.listening.wait(), 30)
        written = Entry.create(ts="2026-03-01T10:00:00Z", kind="note", summary="local")
        hook = AuthorHook(identity)
        await line.append_hooked([written], hook.in_transaction)  # a local write, signed
        await until(lambda: listener.notified == 1)

        relayed, ahead = (
            Entry.create(ts=f"2026-03-01T10:00:0{k}Z", kind="note", summary=f"e{k}") for k in (1, 2)
        )
        await line.append_many([relayed])  # held unsigned, announced
        await until(lambda: listener.notified == 2)
        notary = await notary_of(line)
        await notary.add([sign(identity, Role.AUTHOR, ahead.id, ahead.ts)])  # not held: quiet
        await notary.add([sign(identity, Role.AUTHOR, relayed.id, relayed.ts)])  # late
        await until(lambda: listener.notified == 3)
        await asyncio.sleep(0.5)
        assert listener.notified == 3 and heard == [["ledger"]] * 3
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await db.close()
