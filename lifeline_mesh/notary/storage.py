"""Attestation storage beside the entries, and the sync adapter for the attestation set.

Attestations live in the ``attestations`` table of the line's own SQLite file (component
``notary`` of the line's schema), written through the second storage tier
(:class:`~lifeline.store.tiers.SqlLine` ``run_write``) so a batch of attestations commits in
one transaction, alone or together with the entries it came with.

For reconciliation the set is opaque: :meth:`NotaryStore.keys` gives ``(sort key, id)``
sorted, :meth:`fetch` the items' bytes, :meth:`admit` verifies and stores a received batch
(all or nothing).
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry, StoreError
from lifeline.ledger import utc_now
from lifeline.store import deferred_ids
from lifeline.store.deferred_ids import rows_by_id
from lifeline.store.port import AppendResult
from lifeline.store.summary import (
    SetTotals,
    compute_totals,
    read_totals,
)
from lifeline.store.tiers import SqlLine
from lifeline_mesh.notary.admission import StoredContext, check_entry_times
from lifeline_mesh.notary.claims import Claims
from lifeline_mesh.notary.deferred_index import (
    build_deferred_index,
    defer_id_index,
    deferred_pending,
)
from lifeline_mesh.notary.enrollment import enrollments_of, held_enrollments
from lifeline_mesh.notary.entry_intake import (
    import_fixed,
    intake_rows,
    signed_and_known,
    take_entries,
)
from lifeline_mesh.notary.intake import (
    ATTESTATIONS_TABLE,
    STATEMENTS_TABLE,
    NotarySet,
    Refusal,
    held_rules,
    table_of,
)
from lifeline_mesh.notary.provenance import (
    SourceRow,
    read_sources,
    record,
    signed_times_replace,
)
from lifeline_mesh.notary.row_writes import (
    ENTRY_KEY_CHARS,
    chunks,
    ensure_subject_index,
    has_subject_index,
    insert_attestations,
    is_empty,
)
from lifeline_mesh.notary.rules import DEFAULT_BACKDATE_WINDOW_S, DEFAULT_SKEW_S
from lifeline_mesh.notary.schema import NOTARY_COMPONENT
from lifeline_mesh.notary.seals import Seal, covering, keep_seals
from lifeline_mesh.notary.signed_times import SignedTimes
from lifeline_mesh.notary.signers import KnownSigners
from lifeline_mesh.notary.statement import Attestation, Role, decode
from lifeline_mesh.notary.states import IdSums, StateOf, last_state, state_of

__all__ = [
    "ATTESTATIONS_TABLE",
    "STATEMENTS_TABLE",
    "SUBJECT_KEY",
    "NotaryStore",
    "receipts_naming",
    "table_of",
]

# Each table's row in set_summaries (lifeline/store/summary.py) is named after it; its
# tokens are the items' ids.

# The indexed expression of migration 3, as every query must spell it.
SUBJECT_KEY = "substr(subject, 1, 16)"


# Rows (attestations and the ids they index) a node's own signatures may write in place
# when the line is idle (SqliteStore.run_short_write): a local write's own signature, a
# small receipt, a summary; larger ones go to the worker thread.
SHORT_WRITE = 64


def receipts_naming(
    conn: sqlite3.Connection, entry_ids: Iterable[str]
) -> dict[str, list[Attestation]]:
    """The stored witness receipts that name each of ``entry_ids`` (in sort-key order).

    Rows whose item does not decode are left out (``verify`` reports them); so are
    receipts that share only the 16-character key with an entry.
    """
    if is_empty(conn, "witnessed_keys"):  # receipts are the first wave's: most lines have none
        return {}
    wanted = set(entry_ids)
    rows: list[tuple[str, int, bytes]] = []
    for chunk in chunks(sorted({i[:ENTRY_KEY_CHARS] for i in wanted})):
        marks = ",".join("?" * len(chunk))
        sql = (
            "SELECT w.entry_key, a.seq, a.item FROM witnessed_keys w"
            " JOIN attestations a ON a.seq = w.att_seq"
            f" WHERE w.entry_key IN ({marks}) ORDER BY a.sort_key, a.id"
        )
        rows += conn.execute(sql, chunk).fetchall()
    if not rows:  # e.g. every subject of a batch received in an initial sync
        return {}
    by_key: dict[str, list[str]] = defaultdict(list)
    for entry_id in wanted:
        by_key[entry_id[:ENTRY_KEY_CHARS]].append(entry_id)
    decoded: dict[int, tuple[Attestation, frozenset[str]] | None] = {}
    found: dict[str, list[Attestation]] = defaultdict(list)
    for key, seq, item in rows:
        if seq not in decoded:
            try:
                att = decode(bytes(item))
                decoded[seq] = (att, frozenset(att.extras))
            except InvalidEntry:
                decoded[seq] = None
        held = decoded[seq]
        if held is None or held[0].role is not Role.WITNESS:
            continue
        for entry_id in by_key[key]:
            if entry_id in held[1]:
                found[entry_id].append(held[0])
    return found


class NotaryStore(NotarySet[SqlLine]):
    """The attestations of one line. Create with :meth:`attach` on a line of the SQL tier.

    One is made per session by the node's line object (lifeline_mesh/node/lines.py): what it
    remembers of the signatures it stored lasts as long as the session; what it verified of
    earlier claims (``claims``) and the line's id sums are the line opener's."""

    # The author signatures this object stored, so that the entries they sign, arriving
    # later in the session, are checked without a lookup (signed_times.py, decision 0105)
    _remembered: SignedTimes | None = None
    id_sums: IdSums | None = None  # the line opener's, kept across sessions (states.py)
    _blocked: set[str] | None = None  # ids refused this session: their children wait too
    # Whether a first large batch into an empty table may defer the id index (decision
    # 0143): a session of a line file's, whose end builds it (node/lines.py, FileLine.finish)
    may_defer = False
    may_defer_entries = False  # the same for the entries' id index (decision 0147)

    @classmethod
    async def attach(
        cls,
        store: SqlLine,
        *,
        signers: KnownSigners | None = None,
        clock: Callable[[], str] = utc_now,
        skew_s: float = DEFAULT_SKEW_S,
        backdate_window_s: float = DEFAULT_BACKDATE_WINDOW_S,
        table: str = ATTESTATIONS_TABLE,
    ) -> NotaryStore:
        if NOTARY_COMPONENT not in store.schema:  # the tables are made when the line opens
            raise StoreError(
                f"{store.path.name} was opened without the notary's tables; open it with "
                "the line schema (lifeline.store.schema.line_schema), which includes them"
            )
        return cls(
            store,
            signers=signers,
            clock=clock,
            skew_s=skew_s,
            backdate_window_s=backdate_window_s,
            table=table,
        )

    # -- the opaque set --------------------------------------------------------------

    async def keys(self) -> list[tuple[int, bytes]]:
        sql = f"SELECT sort_key, id FROM {self.table} ORDER BY sort_key, id"
        rows = await self.store.run_read(lambda c: c.execute(sql).fetchall())
        return [(int(k), bytes(i)) for k, i in rows]

    async def totals(self) -> SetTotals:
        """Count and sum of the ids of every item of this set's table (sync's whole-set
        fingerprint): one row kept by every insert; computed from the rows once when absent
        or stale."""
        table = self.table
        found = await self.store.run_read(lambda c: read_totals(c, table, table))
        if found is not None:
            return found

        def compute(conn: sqlite3.Connection) -> SetTotals:
            rows = conn.execute(f"SELECT id FROM {table}")
            ids = (int.from_bytes(r[0], "little") for r in rows)
            return compute_totals(conn, table, table, ids)

        return await self.store.run_write(compute)

    async def fetch(self, ids: Sequence[bytes]) -> list[bytes]:
        """The items among ``ids`` that are stored, in the order asked (by the id index: one
        a pull deferred is built first, decision 0143)."""

        table = self.table

        def read(conn: sqlite3.Connection) -> list[bytes]:
            found: dict[bytes, bytes] = {}
            for chunk in chunks(ids):
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT id, item FROM {table} WHERE id IN ({marks})"
                found.update((bytes(i), bytes(b)) for i, b in conn.execute(sql, chunk))
            return [found[i] for i in ids if i in found]

        if table != ATTESTATIONS_TABLE:
            return await self.store.run_read(read)
        return await self._read_indexed(deferred_pending, read)

    async def _read_indexed(
        self,
        missing: Callable[[sqlite3.Connection], bool],
        read: Callable[[sqlite3.Connection], list[bytes]],
    ) -> list[bytes]:
        """``read``, for a peer: when ``missing`` says a pull into this line deferred the
        index it needs (decisions 0143, 0150), every deferred index is built first, as each
        chunk would scan the table. Should that build fail (logged), read as the line is."""
        found = await self.store.run_read(lambda conn: None if missing(conn) else read(conn))
        if found is None:
            await build_deferred_index(self.store)
            found = await self.store.run_read(read)
        return found

    async def held_enrollments(self) -> list[Attestation]:
        """Every well-formed ``enrolled`` statement the line holds."""
        return await self.store.run_read(held_enrollments)

    async def enrollments_of(self, node_ids: Sequence[str]) -> dict[str, bytes]:
        """The ``enrolled`` statement held for each of ``node_ids`` that has one."""
        return await self.store.run_read(lambda c: enrollments_of(c, node_ids))

    async def _commit(
        self, atts: Sequence[Attestation], *, each: bool
    ) -> tuple[int, list[Refusal]]:
        skew, window, claims = self.skew_s, self.backdate_window_s, self.claims
        now = self._clock()
        batch_seals = self._take_held_seals()

        def tx(conn: sqlite3.Connection) -> tuple[int, list[Attestation], list[Refusal]]:
            deferred_ids.settle(conn)  # no scans by id while a pull defers (decision 0147)
            ctx = _context(conn, atts, claims)
            kept, refused = held_rules(atts, ctx, skew, window, each=each)
            if self.may_defer and kept:  # the session's first stored batch decides
                self.may_defer = False
                defer_id_index(conn, len(kept))
            added = insert_attestations(conn, kept)
            if batch_seals:
                keep_seals(conn, batch_seals)
            # An entry held at a ts no author signed takes its author's signed ts (an
            # import attestation moves nothing: decision 0122)
            record(conn, signed_times_replace(conn, kept, now))
            return added, kept, refused

        added, kept, refused = await self.store.run_write(tx)
        self._remember(kept)  # committed: held from now on (attestations are never deleted)
        return added, refused

    def _remember(self, atts: Sequence[Attestation]) -> None:
        if self._remembered is None:
            self._remembered = SignedTimes()
        self._remembered.add((a.subject, a.ts) for a in atts if a.role is Role.AUTHOR)

    async def add(self, atts: Sequence[Attestation]) -> int:
        """Store attestations this node just signed (no peer input, no checks needed)."""
        rows = len(atts) + sum(len(a.extras) for a in atts)  # a receipt indexes each id
        write = self.store.run_short_write if rows <= SHORT_WRITE else self.store.run_write
        return await write(lambda conn: insert_attestations(conn, atts))

    # -- seals (decision 0149) ------------------------------------------------------

    async def keep_seals(self, seals: Sequence[Seal]) -> None:
        """Store seals this node just made (its own write, beside its signatures)."""
        if seals:
            await self.store.run_write(lambda conn: keep_seals(conn, seals))

    async def held_seals(self) -> list[tuple[Attestation, int, int]]:
        """Every seal held, with its span (a line copied elsewhere takes them along)."""
        sql = "SELECT item, first_key, last_key FROM seals ORDER BY first_key, id"
        rows = await self.store.run_read(lambda conn: conn.execute(sql).fetchall())
        return [(decode(bytes(item)), int(lo), int(hi)) for item, lo, hi in rows]

    async def seals_covering(self, lo: int | None, hi: int | None) -> list[tuple[bytes, bytes]]:
        """``(id, item)`` of the seals held whose span meets the sort keys ``lo``…``hi``."""
        return await self.store.run_read(lambda conn: covering(conn, lo, hi))

    async def items(self) -> list[bytes]:
        sql = f"SELECT item FROM {self.table} ORDER BY sort_key, id"
        rows = await self.store.run_read(lambda c: c.execute(sql).fetchall())
        return [bytes(r[0]) for r in rows]

    async def count(self) -> int:
        sql = f"SELECT count(*) FROM {self.table}"
        row = await self.store.run_read(lambda c: c.execute(sql).fetchone())
        return int(row[0])

    async def author_ids(self, entry_ids: Sequence[str]) -> list[bytes]:
        """The ids of the author attestations of ``entry_ids`` (in the order of the ids)."""
        wanted = {e: n for n, e in enumerate(entry_ids)}

        def read(conn: sqlite3.Connection) -> list[bytes]:
            found: list[tuple[int, bytes]] = []
            for chunk in chunks(sorted({i[:ENTRY_KEY_CHARS] for i in wanted})):
                marks = ",".join("?" * len(chunk))
                sql = (
                    "SELECT subject, id FROM attestations"
                    f" WHERE role = 'author' AND {SUBJECT_KEY} IN ({marks})"
                )
                found += [(wanted[s], bytes(i)) for s, i in conn.execute(sql, chunk) if s in wanted]
            return [i for _, i in sorted(found)]

        return await self._read_indexed(lambda conn: not has_subject_index(conn), read)

    async def admit_entries(
        self, entries: Sequence[Entry], externals: Sequence[tuple[str, str]]
    ) -> AppendResult:
        """Received entries checked against the attestations held and stored, in one
        transaction (with their cross-line declarations ``(id, line)``). A copy whose ts
        its author did not sign is refused and recorded with its sender, not stored; the
        rest of the batch is (notary/provenance.py)."""
        store = self.store

        def tx(conn: sqlite3.Connection) -> AppendResult:
            if self._blocked is None:
                self._blocked = set()
            if self.may_defer_entries:  # the session's first batch decides (decision 0147)
                self.may_defer_entries = False
                deferred_ids.defer(conn, len(entries))
            deferred_ids.settle(conn)
            intake = take_entries(
                conn, entries, self._remembered, self._blocked, self.skew_s, self._clock(),
                self.refused_signatures,
            )  # fmt: skip
            result = store.append_in(conn, intake.kept, externals, received=True)
            record(conn, intake_rows(intake, result, self.source, self._clock()))
            return replace(result, refused=tuple(intake.faults)) if intake.faults else result

        return await store.run_write(tx)

    async def sources(self) -> list[SourceRow]:
        """Who sent which copy of an entry, and what became of it (provenance.py)."""
        return await self.store.run_read(read_sources)

    async def check_entries(self, entries: Sequence[Entry]) -> None:
        """Admission check for received entries against the attestations already held:
        raises for the first copy whose ts its author did not sign (or, for an entry no
        author signed, the import attestations held do not fix)."""
        await self.store.run_read(lambda conn: self.check_entries_in(conn, entries))

    def check_entries_in(self, conn: sqlite3.Connection, entries: Sequence[Entry]) -> None:
        """:meth:`check_entries` on ``conn``, e.g. inside a transaction."""
        signed, known = signed_and_known(conn, entries, self._remembered)
        fixed = import_fixed(conn, entries, signed)
        check_entry_times(entries, signed, known, self.skew_s, fixed)

    @staticmethod
    def insert_in(conn: sqlite3.Connection, atts: Sequence[Attestation]) -> int:
        """Store this node's own attestations inside a transaction of ``run_write``."""
        return insert_attestations(conn, atts)

    async def sign_state(
        self,
        node_id: str,
        line: str,
        make: Callable[[StateOf, Attestation | None], list[Attestation]],
    ) -> list[Attestation]:
        # A state reads entries by id: an index a pull deferred is built first, its sort
        # spilled to a file (decisions 0143, 0147)
        await build_deferred_index(self.store)

        def tx(conn: sqlite3.Connection) -> list[Attestation]:
            deferred_ids.ensure_index(conn)  # should that build have failed
            atts = make(state_of(conn, self.id_sums), last_state(conn, node_id, line))
            insert_attestations(conn, atts)
            return atts

        return await self.store.run_write(tx)


def _context(
    conn: sqlite3.Connection, atts: Sequence[Attestation], claims: Claims
) -> StoredContext:
    subjects = (
        []
        if is_empty(conn, "entries")
        else sorted({a.subject for a in atts if a.role is Role.AUTHOR})
    )
    parents: dict[str, tuple[str, ...]] = {}
    seqs: list[int] = []
    for eid, plist, seq in rows_by_id(conn, "id, parents, seq", subjects):
        parents[eid] = tuple(json.loads(plist))
        seqs.append(seq)
    wanted = sorted({p for ps in parents.values() for p in ps})
    entry_ts: dict[str, str] = dict(rows_by_id(conn, "id, ts", wanted))
    child_ts: dict[str, str] = {}
    for chunk in chunks(sorted(seqs)):  # the subjects held: their earliest child
        marks = ",".join("?" * len(chunk))
        child_ts.update(
            conn.execute(
                "SELECT p.id, min(c.ts) FROM entries p JOIN links l ON l.parent_seq = p.seq"
                f" JOIN entries c ON c.seq = l.child_seq WHERE p.seq IN ({marks}) GROUP BY p.id",
                chunk,
            )
        )
    summaries = _summaries(conn, atts, claims)
    return StoredContext(entry_ts, parents, summaries, _witnessed(conn, atts), child_ts)


def _summaries(
    conn: sqlite3.Connection, atts: Sequence[Attestation], claims: Claims
) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """Earlier (ts, count) claims by the same node about the same line that could refuse
    one of ``atts``: summaries and state statements alike (each claims how many entries the
    node held). When every claim of the batch counts at least the node's highest stored
    claim, no stored claim can (``claims.ClaimMarks``) and none is read."""
    out: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    kinds = (Role.SUMMARY, Role.STATE)
    lowest: dict[tuple[str, str], int] = {}
    for a in atts:
        if a.role in kinds:
            out[(a.node_id, a.subject)].append((a.ts, a.summary_count))
            key = (a.node_id, a.subject)
            lowest[key] = min(a.summary_count, lowest.get(key, a.summary_count))
    keys = {(a.role, a.node_id, a.subject) for a in atts if a.role in kinds}
    for role, node_id, line in sorted(keys, key=lambda k: (k[0].value, k[1], k[2])):
        # the whole subject is compared here, not in SQL: `subject = ?` beside the key
        # would make SQLite rewrite the key expression and miss the index
        table = table_of(role)
        if table != STATEMENTS_TABLE:  # a pull may have dropped it (decision 0150)
            ensure_subject_index(conn)
        by_signer = (
            f"SELECT seq, subject, item FROM {table} WHERE role = ? AND node_id = ? AND seq > ?"
            if table == STATEMENTS_TABLE  # index statements_signer
            else f"SELECT seq, subject, item FROM {table} WHERE role = ? AND {SUBJECT_KEY} = ?"
            " AND node_id = ? AND seq > ?"
        )
        params = (
            (role.value, node_id)
            if table == STATEMENTS_TABLE
            else (role.value, line[:ENTRY_KEY_CHARS], node_id)
        )
        top = claims.marks.highest(conn, table, role.value, node_id, line, by_signer, params)
        if top <= lowest[(node_id, line)]:
            continue  # no stored claim counts more than any of the batch's
        for subject, item in conn.execute(
            f"SELECT subject, item FROM {table} WHERE role = ? AND {SUBJECT_KEY} = ?"
            " AND node_id = ?",
            (role.value, line[:ENTRY_KEY_CHARS], node_id),
        ):
            if subject != line:
                continue
            claim = claims.stored(bytes(item))  # verified once per owner
            if claim is not None:
                out[(node_id, line)].append(claim)
    return out


def _witnessed(
    conn: sqlite3.Connection, atts: Sequence[Attestation]
) -> dict[str, list[tuple[str, str]]]:
    seen: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for a in atts:
        if a.role is Role.WITNESS:
            for entry_id in a.extras:
                seen[entry_id].append((a.ts, a.node_id))
    subjects = {a.subject for a in atts if a.role is Role.AUTHOR}
    for entry_id, receipts in receipts_naming(conn, subjects).items():
        seen[entry_id].extend((r.ts, r.node_id) for r in receipts)
    return seen
