"""Who sent which copy of an entry, and what became of it (DESIGN §5, §6; decision 0048).

An entry's ``author`` is free text outside any key, so a copy that arrives without its
author signature cannot be attributed to its writer — only to the node that sent it. These
rules keep a member from rewriting someone else's entry through the earliest-ts merge, and
a copy's time honest:

* a copy whose ts none of the held author signatures names is **refused**: not stored, the
  session goes on, and the copy is recorded with the node that sent it;
* a copy stored with no author signature held is stored **provisionally**, recorded with
  the node that sent it (its attributable source);
* when an author signature arrives for an entry held at a ts nobody signed, the entry
  takes the earliest signed ts (**replaced**), and the unsigned copy's senders are named;
* a copy dated after this node's clock plus the skew tolerance (its author's clock is
  ahead) is **refused** the same way, alone: held back until a later session finds it
  within the tolerance (decision 0084);
* a copy dated before one of its parents (its writer's clock went back) is **refused**
  alone, its descendants with it, and the session goes on (decision 0112);
* a copy of an entry no author signed, held at a ts an import attestation names, dated
  otherwise (notary/import_times.py), is **refused** the same way (decision 0119); an
  import attestation never refuses a copy of an entry not held, nor moves one held
  (decision 0122).

Rows live in ``entry_sources`` (notary migration 8), local to the node: they say what this
node received from whom, and ``lifeline-mesh verify`` reports them. Functions of a
``sqlite3.Connection`` inside the caller's write transaction; no I/O of their own.
"""

from __future__ import annotations

import enum
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from lifeline.entry import Entry
from lifeline.store.deferred_ids import rows_by_id
from lifeline.store.sqlite_writes import insert_rows
from lifeline.store.summary import ENTRIES_SET, bump_totals, entry_token, totals_for_update
from lifeline_mesh.notary.import_times import import_refusal
from lifeline_mesh.notary.row_writes import ensure_subject_index
from lifeline_mesh.notary.rules import Finding
from lifeline_mesh.notary.statement import IMPORTED_TS_FIELD, Attestation, Role, imported_ts

__all__ = [
    "FUTURE_DETAIL",
    "NOT_RECORDED",
    "Intake",
    "Outcome",
    "SourceRow",
    "imported_times",
    "read_sources",
    "record",
    "refusal_detail",
    "replaced_detail",
    "signed_times_replace",
    "source_findings",
    "sources_found",
    "split_refused",
    "stored_ts",
]

_CHUNK = 500
_SUBJECT_KEY = "substr(subject, 1, 16)"  # the indexed expression (storage.SUBJECT_KEY)


class Outcome(enum.Enum):
    UNSIGNED = "unsigned"  # stored with no author signature held: the sender is its source
    REFUSED = "refused"  # a ts its author did not sign (or a child of such a copy)
    REPLACED = "replaced"  # an unsigned copy's ts replaced by its author's signed ts


@dataclass(frozen=True, slots=True)
class SourceRow:
    entry_id: str
    ts: str  # the ts the copy carried
    source: str  # the node id that sent it (or the address of an unauthenticated peer)
    outcome: Outcome
    at: str  # when this node received it (its clock)
    detail: str


@dataclass(slots=True)
class Intake:
    """A received batch after the signature rule: what may be stored, what was refused."""

    kept: list[Entry]
    refused: list[tuple[Entry, str]] = field(default_factory=list)  # (copy, why)
    unsigned: set[str] = field(default_factory=set)  # ids with no author signature held
    # why each entry refused by a rule of the notary was, when it is left out for good: a
    # time before its parent's (decision 0112); the session counts and reports them
    faults: list[str] = field(default_factory=list)


FUTURE_DETAIL = (
    "dated after this node's clock plus the skew tolerance (its author's clock is ahead): "
    "held back, taken once it is within the tolerance"
)
NOT_RECORDED = "(not recorded: held before senders were recorded, or written here)"


def replaced_detail(old: str, signed: str) -> str:
    return f"held at {old}, a time no author signed; its author signed {signed}, which replaced it"


def refusal_detail(entry: Entry, signed: Iterable[str]) -> str:
    return (
        f"a copy dated {entry.ts}, which its author did not sign (signed: "
        f"{', '.join(sorted(signed))}); refused, the signed copy stands"
    )


def split_refused(
    entries: Sequence[Entry],
    signed: dict[str, set[str]],
    blocked: set[str],
    stored: Callable[[list[str]], set[str]],
    future: Callable[[str], bool] | None = None,
    refused_signed: Mapping[str, str] | None = None,
    dated_before: Callable[[Entry], str | None] | None = None,
    attested: Mapping[str, set[str]] | None = None,
) -> Intake:
    """Refuse each entry whose ts none of its held author signatures names, each entry
    dated in this node's future (``future(ts)``: after its clock plus the skew tolerance —
    its author's clock is ahead; held back until it is not, decision 0084), and each entry
    whose parent was refused and is not held (in this batch or earlier in the session:
    ``blocked``, updated). ``signed`` maps an id to every author-signed ts held;
    ``stored(ids)`` says which of ``ids`` the line holds. ``refused_signed``: the entries
    whose author signature the session refused, with why (decision 0111): a copy of one
    with no good signature held is refused too, not stored as an unsigned copy.
    ``dated_before(entry)``: why an entry dated before its parent is refused (None when it
    is not; decision 0112), applied to the copies the rules above keep. ``attested``: the
    ts the import attestations held fix for entries no author signed (import_times.py,
    decision 0119): a copy dated otherwise is refused."""
    kept: list[Entry] = []
    intake = Intake(kept)
    for entry in entries:
        if future is not None and future(entry.ts):
            intake.refused.append((entry, FUTURE_DETAIL))
            continue
        dated = signed.get(entry.id)
        if not dated and refused_signed and entry.id in refused_signed:
            why = refused_signed[entry.id]
            intake.refused.append((entry, f"its author signature was refused: {why}"))
            continue
        if dated and entry.ts not in dated:
            intake.refused.append((entry, refusal_detail(entry, dated)))
            continue
        fixed = None if dated or attested is None else attested.get(entry.id)
        if fixed and entry.ts not in fixed:
            intake.refused.append((entry, import_refusal(entry, fixed)))
            continue
        early = None if dated_before is None else dated_before(entry)
        if early is not None:
            intake.refused.append((entry, early))
            intake.faults.append(f"an inadmissible entry: {early}")
            continue
        if not dated:
            intake.unsigned.add(entry.id)
        kept.append(entry)
    blocked.difference_update(e.id for e in kept)  # an honest copy arrived since
    if intake.refused:
        refused = sorted({e.id for e, _ in intake.refused})
        blocked.update(set(refused) - stored(refused))
    if not blocked:
        return intake
    # A child of a copy refused and not held cannot be stored without it (closure): it is
    # refused too, until an honest peer sends the signed copy. Batches are parents-first.
    for entry in list(kept):
        if any(p in blocked for p in entry.parents):
            kept.remove(entry)
            blocked.add(entry.id)
            intake.refused.append((entry, "a child of a refused copy; refused with it"))
            intake.unsigned.discard(entry.id)
    return intake


def record(conn: sqlite3.Connection, rows: Sequence[SourceRow]) -> None:
    """Keep ``rows`` (a copy already recorded from the same node is kept once)."""
    insert_rows(
        conn,
        "INSERT OR IGNORE INTO entry_sources (entry_id, ts, source, outcome, at, detail)",
        [(r.entry_id, r.ts, r.source, r.outcome.value, r.at, r.detail) for r in rows],
    )


def read_sources(
    conn: sqlite3.Connection, outcomes: Sequence[Outcome] = tuple(Outcome)
) -> list[SourceRow]:
    """Every recorded row of ``outcomes``, by entry and time of receipt."""
    marks = ",".join("?" * len(outcomes))
    rows = conn.execute(
        "SELECT entry_id, ts, source, outcome, at, detail FROM entry_sources"
        f" WHERE outcome IN ({marks}) ORDER BY entry_id, at, source",
        [o.value for o in outcomes],
    )
    return [SourceRow(e, t, s, Outcome(o), a, d) for e, t, s, o, a, d in rows]


def signed_times_replace(
    conn: sqlite3.Connection, atts: Sequence[Attestation], at: str
) -> list[SourceRow]:
    """After author signatures are stored: every entry they sign that is held at a ts no
    author signature names takes the earliest signed ts (the entries set's fingerprint kept
    in the same transaction); returns the rows naming who sent the unsigned copy."""
    new: dict[str, set[str]] = defaultdict(set)
    for att in atts:
        if att.role is Role.AUTHOR:
            new[att.subject].add(att.ts)
    if not new or conn.execute("SELECT 1 FROM entries LIMIT 1").fetchone() is None:
        return []
    stored = stored_ts(conn, sorted(new))
    odd = {i: ts for i, ts in stored.items() if ts not in new[i]}
    if not odd:
        return []  # the usual case: each signature names the ts held
    changes: list[tuple[str, str, str]] = []  # (id, old ts, signed ts)
    ensure_subject_index(conn)  # a pull may have dropped it (decision 0150)
    for entry_id, ts in sorted(odd.items()):
        held = {
            t
            for s, t in conn.execute(
                f"SELECT subject, ts FROM attestations WHERE role = 'author' AND {_SUBJECT_KEY}"
                " = ?",
                (entry_id[:16],),
            )
            if s == entry_id
        }
        if ts not in held:
            changes.append((entry_id, ts, min(held | new[entry_id])))
    return _retime(conn, changes, at, replaced_detail)


def imported_times(conn: sqlite3.Connection, ids: Iterable[str]) -> dict[str, set[str]]:
    """The ts the import attestations held attest, for each of ``ids`` that has any (each
    read at its place in the item: statement.imported_ts)."""
    wanted = set(ids)
    keys = sorted({i[:16] for i in wanted})
    if not keys or _no_imports(conn):
        return {}
    at, size = IMPORTED_TS_FIELD
    out: dict[str, set[str]] = defaultdict(set)
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for subject, tail in conn.execute(
            f"SELECT subject, substr(item, -{at}, {size}) FROM statements"
            f" WHERE role = 'imported' AND {_SUBJECT_KEY} IN ({marks})",
            chunk,
        ):
            ts = imported_ts(bytes(tail))
            if subject in wanted and ts is not None:
                out[subject].add(ts)
    return dict(out)


def _no_imports(conn: sqlite3.Connection) -> bool:
    """Whether the line holds no import attestation (most lines: nothing to look up)."""
    found = "SELECT 1 FROM statements WHERE role = 'imported' LIMIT 1"
    return conn.execute(found).fetchone() is None


def stored_ts(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, str]:
    """The stored ts of each of ``ids`` the line holds."""
    return dict(rows_by_id(conn, "id, ts", ids))


def _retime(
    conn: sqlite3.Connection,
    changes: Sequence[tuple[str, str, str]],
    at: str,
    why: Callable[[str, str], str],
) -> list[SourceRow]:
    """Give each entry of ``changes`` (id, old ts, new ts) its new ts, the entries set's
    fingerprint kept; the rows naming who sent each copy at the old ts (``why``: old, new)."""
    if not changes:
        return []
    totals = totals_for_update(conn, ENTRIES_SET, "entries")
    conn.executemany("UPDATE entries SET ts = ? WHERE id = ?", [(t, i) for i, _, t in changes])
    bump_totals(
        conn,
        ENTRIES_SET,
        totals,
        mark=None,
        added=[entry_token(i, t) for i, _, t in changes],
        removed=[entry_token(i, old) for i, old, _ in changes],
    )
    out: list[SourceRow] = []
    for entry_id, old, new in changes:
        senders = [
            s
            for (s,) in conn.execute(
                "SELECT DISTINCT source FROM entry_sources WHERE entry_id = ? AND ts = ?"
                " AND outcome = 'unsigned'",
                (entry_id, old),
            )
        ] or [NOT_RECORDED]
        detail = why(old, new)
        out += [SourceRow(entry_id, old, s, Outcome.REPLACED, at, detail) for s in senders]
    return out


def source_findings(conn: sqlite3.Connection) -> list[Finding]:
    """What ``verify`` reports of who sent what (notes: they name a sender, this node's
    store holds the signed copy): each refused or replaced copy with its sender, and per
    sender how many of the entries it sent without an author signature still have none
    (it is their attributable source; the table names each one). A signature that came
    later, as it does when a store took an entry and its signature between two reads of
    one session (a hub's other process writing), makes its author the source again."""
    found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'entry_sources'"
    if conn.execute(found).fetchone() is None:
        return []  # a line file opened read-only before its migration 8
    unsigned = conn.execute(
        "SELECT source, count(*), min(entry_id), min(at) FROM entry_sources s"
        " WHERE outcome = 'unsigned' AND NOT EXISTS (SELECT 1 FROM attestations a"
        " WHERE a.role = 'author' AND substr(a.subject, 1, 16) = substr(s.entry_id, 1, 16)"
        " AND a.subject = s.entry_id) GROUP BY source ORDER BY source"
    )
    return sources_found(read_sources(conn, (Outcome.REFUSED, Outcome.REPLACED)), unsigned)


def sources_found(
    kept: Iterable[SourceRow], unsigned: Iterable[tuple[str, int, str, str]]
) -> list[Finding]:
    """The findings of :func:`source_findings` from what a store read: the refused and
    replaced rows, by entry and time of receipt; per sender (in order), how many entries
    it sent unsigned still have no author signature, the least entry id and first time
    (one wording for a line file and a hub's line)."""
    out: list[Finding] = []
    for row in kept:
        check = "refused-copy" if row.outcome is Outcome.REFUSED else "replaced-copy"
        detail = f"{row.source} sent it at {row.at}: {row.detail}"
        out.append(Finding(check, row.entry_id, detail, "note"))
    for source, count, first, first_at in unsigned:
        detail = (
            f"{count} entr{'y' if count == 1 else 'ies'} arrived without an author signature "
            f"from this node and still have none (first at {first_at}; e.g. {first[:12]}): "
            "it is their attributable source"
        )
        out.append(Finding("unsigned-source", source, detail, "note"))
    return out
