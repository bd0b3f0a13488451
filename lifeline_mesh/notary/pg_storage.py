"""The notary's storage on PostgreSQL: the twin of lifeline_mesh/notary/storage.py for a
line of a :class:`~lifeline.store.postgres.PgDatabase` (a hub, issue 22).

Same rules, same pure checks (lifeline_mesh/notary/admission.py, intake.py); only the
reads and writes differ. Every write is one transaction that first takes the line's lock
(its ``lines`` row), so a received batch's checks against what is held and its insert see
one state, also with several hub processes writing the line; received entries are checked
against the author signatures held and appended in the same transaction
(:meth:`PgNotaryStore.admit_entries`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.store.pg_notify import notify_sql
from lifeline.store.pg_schema import Conn
from lifeline.store.pg_writes import (
    append_locked,
    declare_locked,
    id_bytes,
    lock_line,
)
from lifeline.store.port import AppendResult
from lifeline.store.postgres import PgStore
from lifeline.store.summary import SetTotals
from lifeline_mesh.notary.admission import (
    StoredContext,
    future_dated,
    parent_fault,
)
from lifeline_mesh.notary.claims import Claims
from lifeline_mesh.notary.entry_intake import intake_rows
from lifeline_mesh.notary.import_times import fixed_times
from lifeline_mesh.notary.intake import (
    ATTESTATIONS_TABLE,
    STATEMENTS_TABLE,
    NotarySet,
    Refusal,
    held_rules,
    table_of,
)
from lifeline_mesh.notary.pg_provenance import (
    entry_ts,
    imported_times,
    record,
    replace_unsigned,
)
from lifeline_mesh.notary.provenance import Intake, Outcome, SourceRow, split_refused
from lifeline_mesh.notary.seals import Seal, span_bounds
from lifeline_mesh.notary.statement import Attestation, Role, decode
from lifeline_mesh.notary.states import StateOf, sum_fingerprint

__all__ = ["PgNotaryStore", "keep_seals_pg"]

_MOD = 1 << 256
# New author signatures of one insert looked up for entries already held, as the line
# watcher's LATE_SIGNATURES_CHECKED (peering/changes.py): more is a sync's signatures sent
# ahead of their entries (decision 0106), and the first ones say enough
LATE_SIGNATURES_LOOKED_UP = 512


class PgNotaryStore(NotarySet[PgStore]):
    """The attestations (or statements) of one line in PostgreSQL."""

    _blocked: set[str] | None = None  # ids refused this session: their children wait too

    @property
    def _line(self) -> int:
        return self.store.line_id

    # -- the opaque set --------------------------------------------------------------

    async def keys(self) -> list[tuple[int, bytes]]:
        rows = await self.store.fetch_line(
            f"SELECT sort_key, id FROM {self.table} WHERE line_id = $1 ORDER BY sort_key, id"
        )
        return [(int(k), bytes(i)) for k, i in rows]

    async def totals(self) -> SetTotals:
        rows = await self.store.fetch_line(
            "SELECT n, token_sum FROM notary_totals WHERE line_id = $1 AND name = $2",
            self.table,
        )
        if not rows:
            return SetTotals(0, 0)
        return SetTotals(int(rows[0][0]), int.from_bytes(rows[0][1], "little"))

    async def fetch(self, ids: Sequence[bytes]) -> list[bytes]:
        rows = await self.store.fetch_line(
            f"SELECT id, item FROM {self.table} WHERE line_id = $1 AND id = ANY($2::bytea[])",
            list(ids),
        )
        found = {bytes(i): bytes(b) for i, b in rows}
        return [found[i] for i in ids if i in found]

    async def items(self) -> list[bytes]:
        rows = await self.store.fetch_line(
            f"SELECT item FROM {self.table} WHERE line_id = $1 ORDER BY sort_key, id"
        )
        return [bytes(r[0]) for r in rows]

    async def count(self) -> int:
        return (await self.totals()).count

    # -- admission -------------------------------------------------------------------

    async def _commit(
        self, atts: Sequence[Attestation], *, each: bool
    ) -> tuple[int, list[Refusal]]:
        skew, window = self.skew_s, self.backdate_window_s
        batch_seals = self._take_held_seals()
        async with self.store.transaction() as conn:
            await lock_line(conn, self._line)
            ctx = await _context(conn, self._line, atts, self.claims)
            kept, refused = held_rules(atts, ctx, skew, window, each=each)
            added = await insert(conn, self._line, kept)
            if batch_seals:
                await keep_seals_pg(conn, self._line, batch_seals)
            # An entry held at a ts no author signed takes its author's signed ts (an
            # import attestation moves nothing: decision 0122)
            now = self._clock()
            await record(conn, self._line, await replace_unsigned(conn, self._line, kept, now))
            return added, refused

    # -- seals (decision 0149) ------------------------------------------------------

    async def keep_seals(self, seals: Sequence[Seal]) -> None:
        """Store seals this node just made (its own write, beside its signatures)."""
        if seals:
            async with self.store.transaction() as conn:
                await keep_seals_pg(conn, self._line, seals)

    async def held_seals(self) -> list[tuple[Attestation, int, int]]:
        """Every seal held, with its span (a line copied elsewhere takes them along)."""
        rows = await self.store.fetch_line(
            "SELECT item, first_key, last_key FROM seals WHERE line_id = $1 ORDER BY first_key, id"
        )
        return [(decode(bytes(item)), int(lo), int(hi)) for item, lo, hi in rows]

    async def seals_covering(self, lo: int | None, hi: int | None) -> list[tuple[bytes, bytes]]:
        """``(id, item)`` of the seals held whose span meets the sort keys ``lo``…``hi``."""
        low, high = span_bounds(lo, hi)
        rows = await self.store.fetch_line(
            "SELECT id, item FROM seals WHERE line_id = $1 AND first_key <= $2"
            " AND last_key >= $3 ORDER BY first_key, id",
            high,
            low,
        )
        return [(bytes(i), bytes(item)) for i, item in rows]

    async def add(self, atts: Sequence[Attestation]) -> int:
        """Store attestations this node just signed (no peer input, no checks needed)."""
        async with self.store.transaction() as conn:
            await lock_line(conn, self._line)
            return await insert(conn, self._line, atts)

    async def admit_entries(
        self, entries: Sequence[Entry], externals: Sequence[tuple[str, str]]
    ) -> AppendResult:
        """Received entries checked against the author signatures held, declared and
        appended: one transaction under the line's lock. A copy whose ts its author did not
        sign is refused and recorded with its sender, not stored (notary/provenance.py)."""
        async with self.store.transaction() as conn:
            await lock_line(conn, self._line)
            intake = await self._intake(conn, entries)
            if externals:
                await declare_locked(conn, self._line, externals)
            result = await append_locked(
                conn, self._line, intake.kept, self.store.db.after_append, received=True
            )
            rows = intake_rows(intake, result, self.source, self._clock())
            await record(conn, self._line, rows)
            return replace(result, refused=tuple(intake.faults)) if intake.faults else result

    async def sources(self) -> list[SourceRow]:
        """Who sent which copy of an entry, and what became of it (provenance.py)."""
        rows = await self.store.fetch_line(
            "SELECT entry_id, ts, source, outcome, at, detail FROM entry_sources"
            " WHERE line_id = $1 ORDER BY entry_id, at, source"
        )
        return [SourceRow(e, t, s, Outcome(o), a, d) for e, t, s, o, a, d in rows]

    async def _intake(self, conn: Conn, entries: Sequence[Entry]) -> Intake:
        own = {e.id: e.ts for e in entries}
        outside = sorted({p for e in entries for p in e.parents} - own.keys())
        signed: dict[str, set[str]] = defaultdict(set)
        for subject, ts in await conn.fetch(
            "SELECT subject, ts FROM attestations WHERE line_id = $1 AND role = 'author'"
            " AND subject = ANY($2::text[])",
            self._line,
            sorted(own),
        ):
            signed[subject].add(ts)
        odd = sorted(e.id for e in entries if signed.get(e.id) and e.ts not in signed[e.id])
        attested = await imported_times(conn, self._line, own.keys() - signed.keys())
        fixed = fixed_times(attested, await entry_ts(conn, self._line, sorted(attested)))
        odd += [e.id for e in entries if e.id in fixed and e.ts not in fixed[e.id]]
        held = set(await entry_ts(conn, self._line, odd)) if odd else set()
        if self._blocked is None:
            self._blocked = set()
        now, skew = self._clock(), self.skew_s
        known = await entry_ts(conn, self._line, outside)
        known.update(own)
        return split_refused(
            entries,
            dict(signed),
            self._blocked,
            lambda ids: held & set(ids),
            lambda ts: future_dated(ts, now, skew),
            self.refused_signatures,
            lambda entry: parent_fault(entry, known, skew),
            fixed,
        )

    async def held_enrollments(self) -> list[Attestation]:
        rows = await self.store.fetch_line(
            "SELECT item FROM attestations WHERE line_id = $1 AND role = 'enrolled'"
        )
        return _decoded(bytes(r[0]) for r in rows)

    async def enrollments_of(self, node_ids: Sequence[str]) -> dict[str, bytes]:
        rows = await self.store.fetch_line(
            "SELECT item FROM attestations WHERE line_id = $1 AND role = 'enrolled'"
            " AND node_id = ANY($2::text[]) ORDER BY sort_key, id",
            list(node_ids),
        )
        found: dict[str, bytes] = {}
        for (item,) in rows:
            found.setdefault(decode(bytes(item)).node_id, bytes(item))
        return found

    # -- this node's state statements -------------------------------------------------

    async def sign_state(
        self,
        node_id: str,
        line: str,
        make: Callable[[StateOf, Attestation | None], list[Attestation]],
    ) -> list[Attestation]:
        """Under the line's lock: the line's state now and ``node_id``'s newest state
        statement about it, given to ``make``; what it returns is stored."""
        async with self.store.transaction() as conn:
            await lock_line(conn, self._line)
            row = await conn.fetchrow("SELECT n, id_sum FROM lines WHERE line_id = $1", self._line)
            assert row is not None  # the lock above found it
            count, total = int(row[0]), int.from_bytes(row[1], "big")
            tips = tuple(
                bytes(r[0]).hex()
                for r in await conn.fetch(
                    "SELECT id FROM tips WHERE line_id = $1 ORDER BY id", self._line
                )
            )
            state = StateOf(count, sum_fingerprint(total, count), tips)
            last = None
            for (item,) in await conn.fetch(
                "SELECT item FROM statements WHERE line_id = $1 AND role = 'state'"
                " AND node_id = $2 ORDER BY sort_key DESC LIMIT 8",
                self._line,
                node_id,
            ):
                found = _decoded([bytes(item)])
                if found and found[0].subject == line:
                    last = found[0]
                    break
            atts = make(state, last)
            await insert(conn, self._line, atts)
            return atts


async def keep_seals_pg(conn: Conn, line_id: int, seals: Sequence[Seal]) -> None:
    """Store ``seals`` inside a transaction; one held already has its span widened."""
    await conn.execute(
        "INSERT INTO seals (line_id, id, node_id, first_key, last_key, item)"
        " SELECT $1, * FROM unnest($2::bytea[], $3::text[], $4::bigint[], $5::bigint[],"
        " $6::bytea[]) ON CONFLICT (line_id, id) DO UPDATE SET"
        " first_key = least(seals.first_key, excluded.first_key),"
        " last_key = greatest(seals.last_key, excluded.last_key)",
        line_id,
        [s.id for s, _, _ in seals],
        [s.node_id for s, _, _ in seals],
        [lo for _, lo, _ in seals],
        [hi for _, _, hi in seals],
        [s.item for s, _, _ in seals],
    )


async def insert(
    conn: Conn, line_id: int, atts: Sequence[Attestation], *, with_entries: bool = False
) -> int:
    """Store ``atts`` (inside a transaction holding the line's lock), keeping each set's
    totals and the receipts' index; returns how many were new. ``with_entries``: they sign
    entries written in the same transaction, announced with them (not late ones)."""
    if any(a.role is Role.SEALED for a in atts):  # kept apart, with spans (notary/seals.py)
        raise ValueError("a seal is no member of a set: store it with keep_seals_pg")
    added = 0
    for table in (ATTESTATIONS_TABLE, STATEMENTS_TABLE):
        mine = [a for a in atts if table_of(a.role) == table]
        if not mine:
            continue
        new = await conn.fetch(
            f"INSERT INTO {table} (line_id, id, sort_key, role, subject, node_id, ts, item)"
            " SELECT $1, * FROM unnest($2::bytea[], $3::bigint[], $4::text[], $5::text[],"
            " $6::text[], $7::text[], $8::bytea[]) ON CONFLICT DO NOTHING RETURNING id",
            line_id,
            [a.id for a in mine],
            [a.sort_key for a in mine],
            [a.role.value for a in mine],
            [a.subject for a in mine],
            [a.node_id for a in mine],
            [a.ts for a in mine],
            [a.item for a in mine],
        )
        if new:
            added += len(new)
            await _bump(conn, line_id, table, [bytes(r[0]) for r in new])
            if table == ATTESTATIONS_TABLE and not with_entries:
                await _announce_late(conn, line_id, mine, {bytes(r[0]) for r in new})
    receipts = [a for a in atts if a.role is Role.WITNESS]
    if receipts:
        pairs = [(e, a.id) for a in receipts for e in a.extras]
        await conn.execute(
            "INSERT INTO witnessed (line_id, entry_id, att_id)"
            " SELECT $1, * FROM unnest($2::text[], $3::bytea[]) ON CONFLICT DO NOTHING",
            line_id,
            [e for e, _ in pairs],
            [i for _, i in pairs],
        )
    return added


async def _announce_late(
    conn: Conn, line_id: int, atts: Sequence[Attestation], new: set[bytes]
) -> None:
    """Announce the line to every hub process (NOTIFY, at commit) when a new author
    signature signs an entry the line already holds: only entry writes notify, so the
    peers the entry went to unsigned would otherwise get it at their next periodic check
    (decision 0139, the line watcher's twin). At most ``LATE_SIGNATURES_LOOKED_UP`` are
    looked up: a sync sends signatures ahead of their entries by the thousand."""
    subjects = [a.subject for a in atts if a.role is Role.AUTHOR and a.id in new]
    if not subjects:
        return
    held = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM entries WHERE line_id = $1 AND id = ANY($2::bytea[]))",
        line_id,
        [id_bytes(s) for s in subjects[:LATE_SIGNATURES_LOOKED_UP]],
    )
    if held:
        await conn.execute(
            notify_sql("UPDATE lines SET version = version + 1 WHERE line_id = $1"), line_id
        )


async def _bump(conn: Conn, line_id: int, table: str, ids: list[bytes]) -> None:
    row = await conn.fetchrow(
        "SELECT n, token_sum FROM notary_totals WHERE line_id = $1 AND name = $2",
        line_id,
        table,
    )
    count, total = (0, 0) if row is None else (int(row[0]), int.from_bytes(row[1], "little"))
    count += len(ids)
    total = (total + sum(int.from_bytes(i, "little") for i in ids)) % _MOD
    await conn.execute(
        "INSERT INTO notary_totals (line_id, name, n, token_sum) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (line_id, name) DO UPDATE SET n = excluded.n, token_sum = excluded.token_sum",
        line_id,
        table,
        count,
        total.to_bytes(32, "little"),
    )


async def _context(
    conn: Conn, line_id: int, atts: Sequence[Attestation], claims: Claims
) -> StoredContext:
    """What is held that bears on ``atts``: the subjects' parents and their ts, earlier
    claims by the same nodes about the same lines, and receipts naming the subjects."""
    subjects = sorted({a.subject for a in atts if a.role is Role.AUTHOR and len(a.subject) == 64})
    parents: dict[str, tuple[str, ...]] = {}
    child_ts: dict[str, str] = {}
    if subjects:
        stored = await entry_ts(conn, line_id, subjects)
        named: dict[str, list[str]] = {s: [] for s in stored}
        for child, parent in await conn.fetch(
            "SELECT child, parent FROM links WHERE line_id = $1 AND child = ANY($2::bytea[])",
            line_id,
            [id_bytes(s) for s in stored],
        ):
            named[bytes(child).hex()].append(bytes(parent).hex())
        parents = {s: tuple(sorted(ps)) for s, ps in named.items()}
        for parent, ts in await conn.fetch(  # the subjects held: their earliest child
            "SELECT l.parent, min(e.ts) FROM links l JOIN entries e ON e.line_id = l.line_id"
            " AND e.id = l.child WHERE l.line_id = $1 AND l.parent = ANY($2::bytea[])"
            " GROUP BY l.parent",
            line_id,
            [id_bytes(s) for s in stored],
        ):
            child_ts[bytes(parent).hex()] = ts
    parent_ts = await entry_ts(conn, line_id, sorted({p for ps in parents.values() for p in ps}))
    summaries: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    kinds = (Role.SUMMARY, Role.STATE)
    for a in atts:
        if a.role in kinds:
            summaries[(a.node_id, a.subject)].append((a.ts, a.summary_count))
    for role, node_id, line in sorted({(a.role.value, a.node_id, a.subject) for a in atts
                                       if a.role in kinds}):  # fmt: skip
        for (item,) in await conn.fetch(
            f"SELECT item FROM {table_of(Role(role))} WHERE line_id = $1 AND role = $2"
            " AND subject = $3 AND node_id = $4",
            line_id,
            role,
            line,
            node_id,
        ):
            claim = claims.stored(bytes(item))
            if claim is not None:
                summaries[(node_id, line)].append(claim)
    witnessed: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for a in atts:
        if a.role is Role.WITNESS:
            for entry_id in a.extras:
                witnessed[entry_id].append((a.ts, a.node_id))
    if subjects:
        for entry_id, item in await conn.fetch(
            "SELECT w.entry_id, a.item FROM witnessed w JOIN attestations a"
            " ON a.line_id = w.line_id AND a.id = w.att_id"
            " WHERE w.line_id = $1 AND w.entry_id = ANY($2::text[]) ORDER BY a.sort_key, a.id",
            line_id,
            subjects,
        ):
            for receipt in _decoded([bytes(item)]):
                if receipt.role is Role.WITNESS:
                    witnessed[entry_id].append((receipt.ts, receipt.node_id))
    return StoredContext(parent_ts, parents, summaries, witnessed, child_ts)


def _decoded(items: Iterable[bytes]) -> list[Attestation]:
    """The items that decode (a damaged row is skipped: ``verify`` reports it)."""
    out: list[Attestation] = []
    for item in items:
        try:
            out.append(decode(item))
        except InvalidEntry:
            continue
    return out
