"""A change's rows over the Watch calls (decision 0046): read here for the peers that watch
this node, and remembered so that the same rows coming back from another peer cost no store
access.

The announcing side reads a line's new rows once per change (``read_rows``): the entries
whose row numbers the line watcher saw appear, parents first, with the author attestations
of those entries (and the enrollments of runners among their signers, as a session sends
them). The taking side admits them through the same sets and checks as a session's items
(``Node.take_rows``); :class:`HeldIds` is what both sides know to be stored here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from lifeline.errors import LifelineError
from lifeline.home import Home
from lifeline.store.tiers import require_tables
from lifeline_mesh.notary.schema import NOTARY_COMPONENT
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.sync.attestation_set import AttestationSet
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.transport.announce import MAX_CHANGE_ITEMS, ChangeItems

__all__ = ["HELD_IDS_PER_LINE", "HeldIds", "read_rows"]

HELD_IDS_PER_LINE = 8192  # recent entry ids remembered per line (a few minutes of writes)


class HeldIds:
    """Entry ids recently read or admitted here, per line, the oldest forgotten first."""

    def __init__(self, per_line: int = HELD_IDS_PER_LINE) -> None:
        self._per_line = per_line
        self._lines: dict[str, dict[str, None]] = {}

    def add(self, line: str, ids: Iterable[str]) -> None:
        held = self._lines.setdefault(line, {})
        for entry_id in ids:
            held.pop(entry_id, None)
            held[entry_id] = None
        while len(held) > self._per_line:
            del held[next(iter(held))]

    def holds(self, line: str, ids: Iterable[str]) -> bool:
        held = self._lines.get(line, {})
        return all(entry_id in held for entry_id in ids)


def _new_ids(conn: sqlite3.Connection, after: int, upto: int) -> list[str]:
    sql = "SELECT id FROM entries WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
    return [row[0] for row in conn.execute(sql, (after, upto, MAX_CHANGE_ITEMS + 1))]


async def read_rows(
    home: Home, line: str, after: int, upto: int
) -> tuple[ChangeItems, list[str]] | None:
    """Line ``line``'s rows ``after < seq <= upto`` to announce, with their entry ids; None
    when there are none, too many, or the line has no notary tables (never synced)."""
    async with home.open_line(line) as store:
        try:
            sql_line = require_tables(store, NOTARY_COMPONENT, "announcing its rows")
        except LifelineError:
            return None
        ids = await store.run_read(lambda conn: _new_ids(conn, after, upto))
        if not ids or len(ids) > MAX_CHANGE_ITEMS:
            return None
        entries = await EntrySet(store, EntryCodec(home.limits())).fetch(
            [bytes.fromhex(i) for i in ids]
        )
        notary = NotaryStore(sql_line)
        signed = await AttestationSet(notary).fetch(await notary.author_ids(ids))
    rows = ChangeItems(line, tuple(signed.raws), tuple(entries.raws), tuple(entries.externals))
    return (rows, ids) if rows.fits() else None
