"""A rogue member's hand edits of its own line file (issue 32, decision 0048): what its
code then sends is what any node sends of its store."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
from pathlib import Path

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.row_writes import insert_attestations
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.notary.statement import Role, sign
from lifeline_mesh.notary.storage import NotaryStore

__all__ = [
    "STORED_FORM",
    "backdated_child",
    "entry_ts",
    "forge_author",
    "forge_import",
    "strip_and_backdate",
]

STORED_FORM = "%Y-%m-%dT%H:%M:%S.%fZ"


def entry_ts(line_file: Path, entry_id: str) -> str:
    """The stored ts of ``entry_id`` ("" when the line does not hold it)."""
    with sqlite3.connect(line_file) as conn:
        row = conn.execute("SELECT ts FROM entries WHERE id = ?", (entry_id,)).fetchone()
    return str(row[0]) if row else ""


def strip_and_backdate(line_file: Path, entry_id: str, seconds: float = 60) -> str:
    """Delete the entry's author signatures and move its ts ``seconds`` earlier (within the
    skew of its parents' ts, so only the signature rule can catch it). Returns the new ts."""
    when = dt.datetime.strptime(entry_ts(line_file, entry_id), STORED_FORM)
    early = (when - dt.timedelta(seconds=seconds)).strftime(STORED_FORM)
    with sqlite3.connect(line_file) as conn:
        conn.execute("DELETE FROM attestations WHERE role = 'author' AND subject = ?", (entry_id,))
        conn.execute("UPDATE entries SET ts = ? WHERE id = ?", (early, entry_id))
        # the sets' kept fingerprints are recomputed from the rows, as after any damage
        conn.execute("DELETE FROM set_summaries WHERE name IN ('attestations', 'entries')")
    return early


def backdated_child(root: Path, seconds: float = 7200) -> str:
    """What a node wrote, before its ledger dated a write no earlier than its parents
    (decision 0112), once its clock had gone back: a note dated ``seconds`` before the
    newest of its line's tips, a child of them, signed with the node's key. Returns its id."""
    return asyncio.run(_backdated_child(root, seconds))


async def _backdated_child(root: Path, seconds: float) -> str:
    identity, _ = NodeIdentity.load_or_create(NodeHome(root))
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        tips = sorted(await store.tips())
        newest = max(e.ts for e in await store.get_many(tips))
        when = dt.datetime.strptime(newest, STORED_FORM) - dt.timedelta(seconds=seconds)
        entry = Entry.create(
            ts=when.strftime(STORED_FORM), kind="note", summary="clock back", parents=tuple(tips)
        )
        await store.append(entry)
        await sign_entries(store, identity, [entry])
    return entry.id


def forge_import(root: Path, entry_id: str, ts: str, signed_at: str) -> None:
    """The node's own `imported` statement that it held ``entry_id`` dated ``ts``, signed
    with its key as dated ``signed_at`` and stored beside its line's other statements:
    what a member sends to make another ts of an entry nobody signed look attested."""
    asyncio.run(_forge_import(root, entry_id, ts, signed_at))


async def _forge_import(root: Path, entry_id: str, ts: str, signed_at: str) -> None:
    identity, _ = NodeIdentity.load_or_create(NodeHome(root))
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        notary = await NotaryStore.attach(store)
        await notary.statements().add([sign(identity, Role.IMPORTED, entry_id, signed_at, ts)])


def forge_author(root: Path, entry_id: str, ts: str) -> None:
    """The node's own author signature of ``entry_id`` dated ``ts``, written into its line
    file beside the others by hand (its own rules would refuse it): what a member sends to
    claim an entry nobody signed, at a ts of its choosing."""
    asyncio.run(_forge_author(root, entry_id, ts))


async def _forge_author(root: Path, entry_id: str, ts: str) -> None:
    identity, _ = NodeIdentity.load_or_create(NodeHome(root))
    forged = sign(identity, Role.AUTHOR, entry_id, ts)
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        await NotaryStore.attach(store)
        await store.run_write(lambda conn: insert_attestations(conn, [forged]))
