"""A line file, tampered or not, copied row for row into a hub's line (PostgreSQL), so that
the same data can be audited on both backends (tests/hub/test_hub_verify_stream.py).

Not ``lifeline-mesh migrate-store``: that checks each item's signature and leaves a forged
one out, and recomputes heights; here every row goes over as it is, forged items, edited
entries and the heights the line file stored included, as someone with SQL access to both
databases would copy them.
"""

from __future__ import annotations

import sqlite3

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.store.postgres import PgStore
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.notary.statement import Role, decode

__all__ = ["copy_to_hub"]

_ITEM_COLUMNS = "id, sort_key, role, subject, node_id, ts, item"
_SOURCE_COLUMNS = "entry_id, ts, source, outcome, at, detail"


def _rows(conn: sqlite3.Connection) -> dict[str, list[tuple[object, ...]]]:
    out: dict[str, list[tuple[object, ...]]] = {}
    for table in ("attestations", "statements"):
        out[table] = conn.execute(f"SELECT {_ITEM_COLUMNS} FROM {table} ORDER BY seq").fetchall()
    out["heights"] = conn.execute("SELECT id, height FROM entries").fetchall()
    out["sources"] = conn.execute(f"SELECT {_SOURCE_COLUMNS} FROM entry_sources").fetchall()
    keys = conn.execute(
        "SELECT a.id, a.item FROM attestations a WHERE a.seq IN"
        " (SELECT att_seq FROM witnessed_keys)"
    ).fetchall()
    out["receipts"] = keys
    return out


def _named(receipts: list[tuple[object, ...]]) -> list[tuple[str, bytes]]:
    """(entry id, receipt id) of every receipt the line file indexes, as the hub's
    ``witnessed`` table keeps them."""
    pairs: list[tuple[str, bytes]] = []
    for att_id, item in receipts:
        assert isinstance(att_id, bytes) and isinstance(item, bytes)
        try:
            att = decode(item)
        except InvalidEntry:
            continue
        if att.role is Role.WITNESS:
            pairs += [(entry_id, att_id) for entry_id in att.extras]
    return pairs


async def copy_to_hub(source: SqliteStore, hub: PgStore) -> None:
    """Every entry, attestation, statement, receipt index row and source row of
    ``source`` into ``hub`` (an empty line of a database with the notary's tables)."""
    entries: list[Entry] = [e async for e in source.stream()]
    await hub.append_many(entries)
    rows = await source.run_read(_rows)
    async with hub.transaction() as conn:
        line = hub.line_id
        await conn.execute(
            "UPDATE entries e SET height = v.height FROM unnest($2::bytea[], $3::int[])"
            " AS v(id, height) WHERE e.line_id = $1 AND e.id = v.id",
            line,
            [bytes.fromhex(str(i)) for i, _h in rows["heights"]],
            [int(str(h)) for _i, h in rows["heights"]],
        )
        for table in ("attestations", "statements"):
            await conn.executemany(
                f"INSERT INTO {table} (line_id, {_ITEM_COLUMNS})"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                [(line, *row) for row in rows[table]],
            )
        await conn.executemany(
            "INSERT INTO witnessed (line_id, entry_id, att_id) VALUES ($1, $2, $3)"
            " ON CONFLICT DO NOTHING",
            [(line, e, a) for e, a in _named(rows["receipts"])],
        )
        await conn.executemany(
            f"INSERT INTO entry_sources (line_id, {_SOURCE_COLUMNS})"
            " VALUES ($1, $2, $3, $4, $5, $6, $7)",
            [(line, *row) for row in rows["sources"]],
        )
