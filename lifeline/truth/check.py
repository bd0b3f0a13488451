"""The truth tables checked against the entries they are derived from (``verify``; issue 32).

The tables (:mod:`lifeline.truth.table`) are a cache of the fold that ``context`` reads as
it is: a row edited in the file (a summary, a role, a row added or removed) would reach
every context. ``verify`` therefore derives, from each entry up to the tables' mark, the
rows the fold gives it — its tracked item, its thread mark, its correction and targets,
with the same reducers (:func:`~lifeline.truth.reducers.facts_of`) — and looks each one up
by key, a page at a time, field by field (:class:`RowCheck`, run over ranges of rows, in
any order: in the ledger audit's worker processes, on its serial stream, or in one scan
by row number, :func:`scan`). The rows of each table
are counted, so that equal counts and every derived row found leave no row that no entry
gives. The small accumulators (count, digest, counters, newest, pins, rewordings,
integrity) are folded per range and merged; roles, what is superseded and the threads
ended are derived again from the stored corrections (:func:`~lifeline.truth.table.
derive_roles`) and compared (:func:`read_stored`). Values are compared with their SQLite
type, so a value of another type (or text that is not UTF-8) differs too.

Reading only: what differs is returned as findings ``(check, subject, detail)``;
``lifeline.audit.line`` rebuilds the tables from the entries when there are any.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lifeline.entry import Entry
from lifeline.store.sqlite_group import read_transaction
from lifeline.truth.reducers import NO_FACTS as _NO_FACTS
from lifeline.truth.reducers import contributor, facts_of, id_value, integrity_of, keep_recent
from lifeline.truth.state import RECENT_KEEP, State
from lifeline.truth.table import (
    CORE_FIELDS,
    ROLE_OF_KIND,
    core_of,
    derive_roles,
    merge_core,
    targets_text,
)

__all__ = [
    "PAGE",
    "RowCheck",
    "Stored",
    "TruthFinding",
    "Typed",
    "derived_keys",
    "extra_rows",
    "judge",
    "read_stored",
    "scan",
    "stored_of",
]

PAGE = 2_000  # derived rows looked up at a time
_TRIM = 20_000  # newest entries held before they are cut down to RECENT_KEEP
_MOD = 2**256
TruthFinding = tuple[str, str, str]  # check, subject (an entry id, or "-"), detail
ROW, STATE = "truth-row", "truth-state"
# The tables whose rows each entry derives, the columns compared and their key columns.
_COLUMNS = {
    "truth_items": (("id",), ("kind", "ts", "summary", "why", "thread")),
    "truth_marks": (("thread", "ts", "id"), ("cp",)),
    "truth_corrections": (("id",), ("targets",)),
    "truth_targets": (("target", "cid"), ()),
}
Typed = tuple[str, bytes]  # a value as SQLite holds it: typeof(), CAST(... AS BLOB)


def _typed(value: str | int) -> Typed:
    if isinstance(value, int):
        return ("integer", str(value).encode())
    return ("text", value.encode("utf-8", "surrogatepass"))


def _shown(value: Typed | None) -> str:
    if value is None:
        return "nothing"
    kind, raw = value
    try:
        text, note = raw.decode("utf-8"), ""
    except UnicodeDecodeError:
        text, note = raw.decode("utf-8", "replace"), " (text that is not UTF-8)"
    text = text if len(text) <= 60 else text[:59] + "…"
    if kind not in ("text", "integer"):
        note = f" (a {kind} value)"
    return f"{text!r}{note}"


class RowCheck:
    """The rows of the entries seen, looked up in the tables :data:`PAGE` at a time; the
    small accumulators folded (``core``); the rows derived counted (``counts``). Without a
    connection, the caller flushes (:meth:`flush`) on a connection of its own."""

    def __init__(self, conn: sqlite3.Connection | None) -> None:
        self.conn = conn
        self.core = State()
        self.counts = dict.fromkeys(_COLUMNS, 0)
        self.findings: list[TruthFinding] = []
        self._pending: dict[str, list[tuple[Any, ...]]] = {t: [] for t in _COLUMNS}
        self._size = 0
        self._recent: list[tuple[str, str]] = []  # newest entries, trimmed to RECENT_KEEP
        # the intact entries' accumulators, kept in the cheapest form until result()
        self._intact = 0
        self._sum = 0  # of their ids, taken mod 2**256 at the end
        self._who: dict[tuple[str, str, str], int] = {}  # (kind, provider, model) -> n

    def undecoded(self) -> None:
        """A row that does not decode: counted, as the fold counts it."""
        self.core.count += 1

    def entry(self, entry: Entry) -> None:
        """A decoded entry, intact or not (its id checked here)."""
        expected = integrity_of(entry)
        if expected is None:
            self.intact(entry.id, entry.ts, entry.kind, entry.provider, entry.model,
                        entry.summary, entry.body, entry.parents)  # fmt: skip
        else:
            self.damaged(entry.id, expected)

    def damaged(self, eid: str, expected: str) -> None:
        """An entry whose id does not match its content (``expected``): integrity only."""
        core = self.core
        core.count += 1
        core.digest = (core.digest + id_value(eid)) % _MOD
        core.integrity[eid] = expected

    def intact(
        self,
        eid: str,
        ts: str,
        kind: str,
        provider: str,
        model: str,
        summary: str,
        body: str,
        parents: Sequence[str],
    ) -> None:
        """An entry whose id matches its content, as :func:`~lifeline.truth.reducers.fold`
        takes it: its accumulators, and the rows it derives."""
        self._intact += 1
        self._sum += int(eid, 16)  # the hex of a sha256: its content matched it
        who = self._who
        key = (kind, provider, model)
        who[key] = who.get(key, 0) + 1
        recent = self._recent
        recent.append((ts, eid))
        if len(recent) >= _TRIM:
            self._recent = sorted(recent)[-RECENT_KEEP:]
        facts = facts_of(kind, ts, summary, body, parents)
        if facts is _NO_FACTS:
            return
        if facts.thread:
            self._want("truth_marks", (facts.thread, ts, eid, int(facts.checkpoint)))
        if facts.pinned is not None:
            self.core.pins[eid] = facts.pinned
        if facts.targets is not None:
            self._want("truth_corrections", (eid, targets_text(facts.targets)))
            for target in facts.targets:
                self._want("truth_targets", (target, eid))
            if facts.reword:
                self.core.rewords.append(eid)
        if facts.item is not None:
            self._want("truth_items", (eid, *facts.item))

    def _want(self, table: str, row: tuple[Any, ...]) -> None:
        self.counts[table] += 1
        self._pending[table].append(row)
        self._size += 1
        if self._size >= PAGE and self.conn is not None:
            self.flush(self.conn)

    def flush(self, conn: sqlite3.Connection) -> None:
        """Compare the rows derived since the last flush with the stored ones."""
        for table, rows in self.take().items():
            odd = {tuple(k) for k in _differing(conn, table, rows)}
            if odd:
                self.compare(table, rows, odd, _stored_rows(conn, table, sorted(odd)))

    def take(self) -> dict[str, list[tuple[Any, ...]]]:
        """The rows derived since the last flush, by table (key columns, then compared
        columns), to be compared (:meth:`compare`) with the stored ones; forgotten here."""
        out = {table: list(rows) for table, rows in self._pending.items() if rows}
        for rows in self._pending.values():
            rows.clear()
        self._size = 0
        return out

    def compare(
        self,
        table: str,
        rows: list[tuple[Any, ...]],
        odd: set[tuple[str, ...]],
        found: dict[tuple[str, ...], tuple[Typed, ...]],
    ) -> None:
        """Findings for the rows of ``table`` whose keys are ``odd`` (missing or held
        otherwise), given the stored rows ``found`` with those keys (typed values)."""
        keys, columns = _COLUMNS[table]
        width = len(keys)
        subject_at = keys.index("cid" if table == "truth_targets" else "id")
        wanted = {r[:width]: tuple(_typed(v) for v in r[width:]) for r in rows if r[:width] in odd}
        for key, values in wanted.items():
            subject = key[subject_at]
            stored = found.get(key)
            if stored is None:
                where = ", ".join(f"{k} {v!r}" for k, v in zip(keys, key, strict=True))
                self.findings.append(
                    (ROW, subject, f"{table} has no row ({where}) where the entry gives one")
                )
                continue
            for column, mine, theirs in zip(columns, values, stored, strict=True):
                if mine != theirs:
                    self.findings.append(
                        (ROW, subject, f"{table}.{column} holds {_shown(theirs)}; "
                         f"the entry gives {_shown(mine)}")
                    )  # fmt: skip

    def result(self) -> tuple[Any, ...]:
        """What a range found, as plain values (``marshal``-able; :func:`judge` reads it);
        call after the last :meth:`flush` when the check has no connection."""
        if self.conn is not None:
            self.flush(self.conn)
        core = self.core
        core.count += self._intact
        core.digest = (core.digest + self._sum) % _MOD
        for (kind, provider, model), n in self._who.items():
            who = contributor(provider, model)
            core.contributors[who] = core.contributors.get(who, 0) + n
            core.kinds[kind] = core.kinds.get(kind, 0) + n
        self._intact, self._sum, self._who = 0, 0, {}
        for ts, eid in self._recent:
            keep_recent(core.recent, [ts, eid])
        self._recent = []
        small = (core.count, core.digest, core.contributors, core.kinds, core.recent,
                 core.integrity, core.pins, core.rewords)  # fmt: skip
        return small, self.counts, self.findings


def _differing(
    conn: sqlite3.Connection, table: str, rows: list[tuple[object, ...]]
) -> list[tuple[str, ...]]:
    """The keys of ``rows`` (key columns, then compared columns) that ``table`` lacks or
    holds otherwise. SQLite compares: values of two storage classes are never equal, text
    is compared byte for byte, and no value is decoded here."""
    key_cols, columns = _COLUMNS[table]
    every = (*key_cols, *columns)
    names = ", ".join(f"k{i}" for i in range(len(every)))
    on = " AND ".join(f"t.{c} = k.k{i}" for i, c in enumerate(key_cols))
    differ = " OR ".join(
        [f"t.{key_cols[0]} IS NULL"]
        + [f"t.{c} IS NOT k.k{len(key_cols) + i}" for i, c in enumerate(columns)]
    )
    row = "(" + ",".join("?" * len(every)) + ")"
    keys = ", ".join(f"k.k{i}" for i in range(len(key_cols)))
    out: list[tuple[str, ...]] = []
    step = max(1, 900 // len(every))
    for start in range(0, len(rows), step):
        part = rows[start : start + step]
        # a join with the rows as a table: SQLite seeks each in the primary key
        sql = (
            f"WITH k({names}) AS (VALUES {','.join([row] * len(part))})"
            f" SELECT {keys} FROM k LEFT JOIN {table} t ON {on} WHERE {differ}"
        )
        out += [tuple(r) for r in conn.execute(sql, [v for r in part for v in r])]
    return out


def _stored_rows(
    conn: sqlite3.Connection, table: str, keys: list[tuple[str, ...]]
) -> dict[tuple[str, ...], tuple[Typed, ...]]:
    """The stored rows with these keys (a few: those that differ), their compared columns
    with their SQLite types."""
    key_cols, columns = _COLUMNS[table]
    typed = "".join(f", typeof({c}), CAST({c} AS BLOB)" for c in columns)
    where = " AND ".join(f"{c} = ?" for c in key_cols)
    out: dict[tuple[str, ...], tuple[Typed, ...]] = {}
    for key in keys:
        found = conn.execute(f"SELECT 1{typed} FROM {table} WHERE {where}", key).fetchone()
        if found is not None:
            rest = found[1:]
            out[key] = tuple((rest[i], bytes(rest[i + 1])) for i in range(0, len(rest), 2))
    return out


def scan(conn: sqlite3.Connection, mark: int) -> tuple[Any, ...]:
    """:class:`RowCheck` over every row up to ``mark`` in one pass (a line too small for
    the worker processes); its :meth:`RowCheck.result`."""
    from lifeline.store.rows import decode_row
    from lifeline.store.sqlite_reads import COLUMNS

    check = RowCheck(conn)
    last = 0
    while True:
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM entries WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT 2000",
            (last, mark),
        ).fetchall()
        if not rows:
            return check.result()
        for row in rows:
            try:
                entry = decode_row(row)
            except (ValueError, TypeError):
                check.undecoded()
                continue
            check.entry(entry)
        last = int(rows[-1][0])


@dataclass(slots=True)
class Stored:
    """What the tables held when ``verify`` began: the mark, the small accumulators, the
    row counts, and what was found wrong with roles, supersession and threads ended."""

    mark: int
    core: State
    counts: dict[str, int]
    findings: list[TruthFinding] = field(default_factory=list)


def read_stored(conn: sqlite3.Connection) -> Stored | None:
    """The tables as they are (one read transaction); None when there are none to check
    (never folded, another version, or dropped by a trigger: the next read folds them)."""
    with read_transaction(conn):  # the group's own, inside a grouped pull
        try:
            return _read_stored(conn)
        except (sqlite3.Error, ValueError, TypeError, KeyError) as exc:
            return Stored(-1, State(), {}, [(STATE, "-", f"the truth tables do not read: {exc}")])


def _read_stored(conn: sqlite3.Connection) -> Stored | None:
    row = conn.execute(
        "SELECT last_seq, count, digest, ended, CAST(state AS BLOB) FROM truth_core"
    ).fetchone()
    if row is None:
        return None
    core = core_of(int(row[1]), str(row[2]), bytes(row[4]))
    if core is None:
        return None
    counts = {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in _COLUMNS}
    role_of_kind = " ".join(f"WHEN '{k}' THEN '{r}'" for k, r in ROLE_OF_KIND.items())
    odd = conn.execute(
        "SELECT id, kind, CAST(role AS BLOB) FROM truth_items"
        f" WHERE role IS NOT (CASE kind {role_of_kind} ELSE '' END)"
    ).fetchall()
    return stored_of(
        Stored(int(row[0]), core, counts),
        derive_roles(conn, list(core.rewords)),
        {str(i): (str(k), bytes(r or b"").decode("utf-8", "replace")) for i, k, r in odd},
        {str(i): str(b) for i, b in conn.execute("SELECT id, by FROM truth_superseded")},
        json.loads(row[3]),
    )


def stored_of(
    stored: Stored,
    derived: tuple[dict[str, str], dict[str, str], dict[str, str], list[str]],
    odd: dict[str, tuple[str, str]],
    held: dict[str, str],
    stored_ended: object,
) -> Stored:
    """``stored`` with the findings about roles, supersession and threads ended, whatever
    the database: ``derived`` is :func:`~lifeline.truth.table.derive_roles`' answer, ``odd``
    the items whose role is not their kind's ``id -> (kind, role)``, ``held`` the stored
    ``truth_superseded``, ``stored_ended`` the threads ``truth_core`` says ended."""
    wanted, roles, superseded, ended = derived
    seen = {i: role for i, (_kind, role) in odd.items()}
    seen.update({i: r for i, r in roles.items() if r != wanted[i]})
    for i in sorted(seen):
        should = wanted.get(i)
        if should is None:
            should = ROLE_OF_KIND.get(odd[i][0], "")
        if seen[i] != should:
            stored.findings.append(
                (ROW, i, f"truth_items.role holds {seen[i]!r}; the entries give {should!r}")
            )
    for i in sorted(set(held) | set(superseded)):
        if held.get(i) != superseded.get(i):
            stored.findings.append(
                (ROW, i, f"truth_superseded says {held.get(i)!r}; "
                 f"the entries give {superseded.get(i)!r}")
            )  # fmt: skip
    if stored_ended != ended:
        stored.findings.append(
            (STATE, "-", f"truth_core.ended holds {_clip(stored_ended)}; the entries give "
             f"{_clip(ended)}")
        )  # fmt: skip
    return stored


def _clip(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 80 else text[:79] + "…"


def judge(
    stored: Stored, results: Iterable[tuple[Any, ...]]
) -> tuple[list[TruthFinding], list[str]]:
    """Every difference between the tables and what the ranges' results derive, sorted;
    and the tables holding more rows than the entries derive (:func:`extra_rows`)."""
    core = State()
    counts = dict.fromkeys(_COLUMNS, 0)
    findings = list(stored.findings)
    for small, part_counts, part_findings in results:
        delta = State(*small[:2])
        (delta.contributors, delta.kinds, delta.recent, delta.integrity, delta.pins,
         delta.rewords) = small[2:]  # fmt: skip
        delta.recent = sorted(delta.recent)[-RECENT_KEEP:]
        merge_core(core, delta)
        for table, n in part_counts.items():
            counts[table] += n
        findings += [tuple(f) for f in part_findings]
    for name in ("count", "digest", *CORE_FIELDS):
        findings += _core_differences(name, getattr(stored.core, name), getattr(core, name))
    over = []
    for table, n in counts.items():
        if stored.counts.get(table) != n:
            findings.append(
                (STATE, "-", f"{table} holds {stored.counts.get(table)} rows; the entries "
                 f"give {n}")
            )  # fmt: skip
            if stored.counts.get(table, 0) > n:
                over.append(table)
    return sorted(set(findings)), over


def extra_rows(conn: sqlite3.Connection, table: str, mark: int) -> list[TruthFinding]:
    """The rows of ``table`` that no entry up to ``mark`` derives (a table holding more
    rows than the entries give): each row's entry read and its facts derived again."""
    from lifeline.store.rows import decode_row
    from lifeline.store.sqlite_reads import COLUMNS

    keys, _columns = _COLUMNS[table]
    subject = keys.index("cid" if table == "truth_targets" else "id")
    width = len(keys)
    joined = ", ".join(f"e.{c}" for c in COLUMNS.split(", "))
    sql = (
        f"SELECT {', '.join(f't.{k}' for k in keys)}, e.seq IS NULL, {joined} FROM {table} t"
        f" LEFT JOIN entries e ON e.id = t.{keys[subject]} AND e.seq <= ?"
    )
    out: list[TruthFinding] = []
    for row in conn.execute(sql, (mark,)):
        key, missing = tuple(row[:width]), row[width]
        where = ", ".join(f"{k} {v!r}" for k, v in zip(keys, key, strict=True))
        if not missing:
            try:
                entry = decode_row(row[width + 1 :])
            except (ValueError, TypeError):
                entry = None
            if entry is not None and key in derived_keys(table, entry):
                continue
        out.append((ROW, str(key[subject]), f"{table} has a row ({where}) no entry gives"))
    return out


def derived_keys(table: str, entry: Entry) -> set[tuple[str, ...]]:
    if integrity_of(entry) is not None:
        return set()
    facts = facts_of(entry.kind, entry.ts, entry.summary, entry.body, entry.parents)
    eid = entry.id
    if table == "truth_items":
        return {(eid,)} if facts.item is not None else set()
    if table == "truth_marks":
        return {(facts.thread, entry.ts, eid)} if facts.thread else set()
    if table == "truth_corrections":
        return {(eid,)} if facts.targets is not None else set()
    return {(t, eid) for t in facts.targets or ()}


def _core_differences(name: str, theirs: object, mine: object) -> list[TruthFinding]:
    """How a field of ``truth_core`` differs: key by key for a map (at most 5 keys)."""
    if mine == theirs:
        return []
    if isinstance(mine, dict) and isinstance(theirs, dict):
        keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        subject = "-" if name != "pins" and name != "integrity" else None
        return [
            (STATE, subject or str(k), f"truth_core.{name}[{json.dumps(k)}] holds "
             f"{_clip(theirs.get(k))}; the entries give {_clip(mine.get(k))}")
            for k in keys[:5]
        ]  # fmt: skip
    return [
        (STATE, "-", f"truth_core.{name} holds {_clip(_plain(theirs))}; the entries give "
         f"{_clip(_plain(mine))}")
    ]  # fmt: skip


def _plain(value: object) -> object:
    return f"{value:064x}"[:16] if isinstance(value, int) and value >= 2**64 else value
