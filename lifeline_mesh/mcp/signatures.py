"""The node signatures on one entry, checked now: author (or import) attestations, witness
receipts, and each node's first state statement that witnesses it.

Reads the notary's tables in the line's file by entry id (indexed lookups; the states are
found by a walk down from their tips that stops at the entry's height, so it visits only
entries written after this one, within a budget), decodes each item with the notary's own
:func:`~lifeline_mesh.notary.statement.decode`, verifies it, and says whether its signer is
a known member, unknown, or revoked (:class:`~lifeline_mesh.notary.signers.FileSigners`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from lifeline.errors import InvalidEntry
from lifeline.store.backend import FileOrEntries, on_backend
from lifeline.store.port import Store
from lifeline.store.tiers import SqlLine
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.port import Notary
from lifeline_mesh.notary.sign import notary_of
from lifeline_mesh.notary.signers import FileSigners
from lifeline_mesh.notary.statement import Role, decode
from lifeline_mesh.notary.states import covering_states
from lifeline_mesh.notary.storage import SUBJECT_KEY, NotaryStore, receipts_naming

__all__ = ["entry_signatures"]


def _items_about(conn: sqlite3.Connection, entry_id: str) -> list[bytes]:
    authored = [
        (item,)
        for subject, item in conn.execute(
            f"SELECT subject, item FROM attestations WHERE role = 'author' AND {SUBJECT_KEY} = ?"
            " ORDER BY sort_key",
            (entry_id[:16],),
        )
        if subject == entry_id  # compared here: see NotaryStore's summary lookup
    ]
    imported = [
        bytes(item)
        for subject, item in conn.execute(
            f"SELECT subject, item FROM statements WHERE role = 'imported' AND {SUBJECT_KEY} = ?"
            " ORDER BY sort_key",
            (entry_id[:16],),
        )
        if subject == entry_id
    ]
    witnessed = receipts_naming(conn, [entry_id]).get(entry_id, [])
    states = covering_states(conn, entry_id)
    return [
        *(bytes(r[0]) for r in authored),
        *imported,
        *(r.item for r in witnessed),
        *(s.item for s in states),
    ]


async def _subject_items(notary: Notary, entry_id: str) -> list[bytes]:
    out: list[bytes] = []
    for item in [*await notary.items(), *await notary.statements().items()]:
        try:
            att = decode(item)
        except InvalidEntry:
            continue
        if att.role in (Role.AUTHOR, Role.IMPORTED) and att.subject == entry_id:
            out.append(item)
    return out


def _describe(item: bytes, signers: FileSigners, entry_ts: str) -> dict[str, Any]:
    try:
        att = decode(item)
    except InvalidEntry as exc:
        return {"valid": False, "problem": str(exc)}
    out: dict[str, Any] = {"role": att.role.value, "node_id": att.node_id, "ts": att.ts}
    try:
        att.verify()
        out["valid"] = True
    except InvalidEntry as exc:
        out["valid"] = False
        out["problem"] = str(exc)
    status = signers.status(att.node_id)
    out["signer"] = status.state.value
    if status.revoked_at is not None:
        out["signer_revoked_at"] = status.revoked_at
    if att.role is Role.AUTHOR and att.ts != entry_ts:
        out["note"] = f"signed ts {att.ts} differs from the entry's ts {entry_ts}"
    return out


async def entry_signatures(
    home: NodeHome, store: Store, entry_id: str, entry_ts: str, local_node_id: str | None
) -> dict[str, Any]:
    """``{"signed": bool, "items": [...]}``: signed means a valid author signature exists."""

    async def in_file(sql: SqlLine) -> list[bytes]:
        await NotaryStore.attach(sql)  # the notary's tables exist even in a line it never saw
        return await sql.run_read(lambda conn: _items_about(conn, entry_id))

    async def elsewhere(other: Store) -> list[bytes]:  # a hub's: its statements, by subject
        return await _subject_items(await notary_of(other), entry_id)

    items = await on_backend(store, FileOrEntries(file=in_file, entries=elsewhere))
    signers = FileSigners.load(home, local_node_id)
    described = [_describe(item, signers, entry_ts) for item in items]
    signed = any(d.get("role") == "author" and d["valid"] for d in described)
    return {"signed": signed, "items": described}
