"""Who sent which copy of an entry, and what became of it, on PostgreSQL: the twin of the
reads and writes of lifeline_mesh/notary/provenance.py for a hub's line (decisions 0048,
0119). Functions of a connection inside a transaction that holds the line's lock."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from lifeline.store.pg_schema import Conn
from lifeline.store.pg_writes import id_bytes, retime_locked
from lifeline_mesh.notary.provenance import NOT_RECORDED, Outcome, SourceRow, replaced_detail
from lifeline_mesh.notary.statement import IMPORTED_TS_FIELD, Attestation, Role, imported_ts

__all__ = [
    "entry_ts",
    "imported_times",
    "record",
    "replace_unsigned",
]


async def entry_ts(conn: Conn, line_id: int, ids: Sequence[str]) -> dict[str, str]:
    """The stored ts of each of ``ids`` the line holds."""
    wanted = [id_bytes(i) for i in ids if len(i) == 64]
    if not wanted:
        return {}
    rows = await conn.fetch(
        "SELECT id, ts FROM entries WHERE line_id = $1 AND id = ANY($2::bytea[])",
        line_id,
        wanted,
    )
    return {bytes(i).hex(): ts for i, ts in rows}


async def record(conn: Conn, line_id: int, rows: Sequence[SourceRow]) -> None:
    if not rows:
        return
    await conn.execute(
        "INSERT INTO entry_sources (line_id, entry_id, ts, source, outcome, at, detail)"
        " SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[],"
        " $6::text[], $7::text[]) ON CONFLICT DO NOTHING",
        line_id,
        [r.entry_id for r in rows],
        [r.ts for r in rows],
        [r.source for r in rows],
        [r.outcome.value for r in rows],
        [r.at for r in rows],
        [r.detail for r in rows],
    )


async def _author_times(conn: Conn, line_id: int, ids: Sequence[str]) -> dict[str, set[str]]:
    held: dict[str, set[str]] = defaultdict(set)
    for subject, ts in await conn.fetch(
        "SELECT subject, ts FROM attestations WHERE line_id = $1 AND role = 'author'"
        " AND subject = ANY($2::text[])",
        line_id,
        sorted(ids),
    ):
        held[subject].add(ts)
    return held


async def imported_times(conn: Conn, line_id: int, ids: Iterable[str]) -> dict[str, set[str]]:
    """The ts the import attestations held attest, for each of ``ids`` that has any (read
    at its place in the item: statement.imported_ts)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    at, size = IMPORTED_TS_FIELD
    out: dict[str, set[str]] = defaultdict(set)
    for subject, tail in await conn.fetch(
        f"SELECT subject, substring(item from length(item) - {at - 1} for {size})"
        " FROM statements WHERE line_id = $1 AND role = 'imported' AND subject = ANY($2::text[])",
        line_id,
        wanted,
    ):
        ts = imported_ts(bytes(tail))
        if ts is not None:
            out[subject].add(ts)
    return dict(out)


async def replace_unsigned(
    conn: Conn, line_id: int, atts: Sequence[Attestation], at: str
) -> list[SourceRow]:
    """provenance.signed_times_replace on PostgreSQL: each entry held at a ts no author
    signed takes the earliest signed ts; the rows name who sent the unsigned copy."""
    new: dict[str, set[str]] = defaultdict(set)
    for att in atts:
        if att.role is Role.AUTHOR and len(att.subject) == 64:
            new[att.subject].add(att.ts)
    stored = await entry_ts(conn, line_id, sorted(new)) if new else {}
    odd = {i: ts for i, ts in stored.items() if ts not in new[i]}
    if not odd:
        return []
    held = await _author_times(conn, line_id, sorted(odd))
    changes = {i: (ts, min(held[i] | new[i])) for i, ts in odd.items() if ts not in held[i]}
    return await _retime(conn, line_id, changes, at, replaced_detail)


async def _retime(
    conn: Conn,
    line_id: int,
    changes: dict[str, tuple[str, str]],
    at: str,
    why: Callable[[str, str], str],
) -> list[SourceRow]:
    """Give each entry of ``changes`` (id -> (old ts, new ts)) its new ts; the rows naming
    who sent each copy at the old ts (``why``: old, new)."""
    if not changes:
        return []
    await retime_locked(conn, line_id, changes)
    out: list[SourceRow] = []
    for entry_id, (old, new) in sorted(changes.items()):
        senders = [
            str(r[0])
            for r in await conn.fetch(
                "SELECT DISTINCT source FROM entry_sources WHERE line_id = $1 AND entry_id = $2"
                " AND ts = $3 AND outcome = 'unsigned'",
                line_id,
                entry_id,
                old,
            )
        ] or [NOT_RECORDED]
        detail = why(old, new)
        out += [SourceRow(entry_id, old, s, Outcome.REPLACED, at, detail) for s in senders]
    return out
