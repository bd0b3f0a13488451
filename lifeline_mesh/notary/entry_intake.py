"""Received entries against the author signatures a SQLite line holds (DESIGN §5, §6).

:func:`take_entries` splits a received batch into what may be stored and the copies
refused because their author did not sign their ts, because the import attestations held
fix another (decision 0119), or because they are dated before a parent
(notary/provenance.py); :func:`intake_rows` names the sender of what was refused or stored
unsigned. Functions of a ``sqlite3.Connection`` inside the caller's transaction.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections import defaultdict
from collections.abc import Mapping, Sequence

from lifeline.entry import Entry
from lifeline.store.deferred_ids import rows_by_id
from lifeline.store.port import AppendResult
from lifeline_mesh.notary.admission import future_dated, parent_fault
from lifeline_mesh.notary.import_times import fixed_times
from lifeline_mesh.notary.provenance import (
    Intake,
    Outcome,
    SourceRow,
    imported_times,
    split_refused,
    stored_ts,
)
from lifeline_mesh.notary.row_writes import ensure_subject_index
from lifeline_mesh.notary.signed_times import SignedTimes

__all__ = ["import_fixed", "intake_rows", "signed_and_known", "take_entries"]

log = logging.getLogger(__name__)

_CHUNK = 500
_KEY = 16  # characters of an entry id in the indexed subject key (storage.SUBJECT_KEY)
UNSIGNED_DETAIL = "stored without an author signature; this node sent it"


def _chunks(items: Sequence[str]) -> list[list[str]]:
    return [list(items[k : k + _CHUNK]) for k in range(0, len(items), _CHUNK)]


def signed_and_known(
    conn: sqlite3.Connection,
    entries: Sequence[Entry],
    remembered: SignedTimes | None,
) -> tuple[dict[str, set[str]], dict[str, str]]:
    """Each entry's author-signed ts held (an entry signed as dated maps to its own ts
    alone), and the ts of the batch's stored parents and of the batch itself.
    ``remembered``: the author signatures stored earlier in the session."""
    own = {e.id: e.ts for e in entries}
    outside = sorted({p for e in entries for p in e.parents} - own.keys())
    # Only entries no held signature dates as they are dated can fail the check; when
    # the batch names an id twice, every id is checked against all its signatures.
    unique = len(own) == len(entries)
    matched: set[str] = set()
    if unique and remembered:  # signed as dated by a signature stored in this session
        matched = {i for i, ts in own.items() if remembered.holds(i, ts)}
    signed: dict[str, set[str]] = defaultdict(set)
    keys = sorted({i[:_KEY] for i in own if i not in matched})
    if keys:  # a pull into an empty line may have dropped the index (decision 0150)
        ensure_subject_index(conn)
    for chunk in _chunks(keys):
        marks = ",".join("?" * len(chunk))
        # One row per chunk, not one per attestation: fetching a row gives up the
        # interpreter lock, which a busy event loop then holds for up to 5 ms.
        (pairs,) = conn.execute(
            f"SELECT json_group_array(json_array(subject, ts)) FROM attestations"
            f" WHERE role = 'author' AND substr(subject, 1, {_KEY}) IN ({marks})",
            chunk,
        ).fetchone()
        for subject, ts in json.loads(pairs):
            mine = own.get(subject)
            if mine is None:
                continue
            if unique and mine == ts:
                matched.add(subject)  # the usual case: signed as dated
            else:
                signed[subject].add(ts)
    known: dict[str, str] = dict(rows_by_id(conn, "id, ts", outside))
    known.update(own)
    for entry_id in matched:
        signed[entry_id] = {own[entry_id]}  # one signature names its ts: the check passes
    return dict(signed), known


def import_fixed(
    conn: sqlite3.Connection, entries: Sequence[Entry], signed: Mapping[str, set[str]]
) -> dict[str, set[str]]:
    """The ts the import attestations held fix for the batch's entries that no author
    signature held signs (``signed``: :func:`signed_and_known`'s): import_times.py."""
    attested = imported_times(conn, sorted({e.id for e in entries} - signed.keys()))
    if not attested:
        return {}  # most lines hold no import attestation
    return fixed_times(attested, stored_ts(conn, sorted(attested)))


def take_entries(
    conn: sqlite3.Connection,
    entries: Sequence[Entry],
    remembered: SignedTimes | None,
    blocked: set[str],
    skew_s: float,
    now: str | None = None,
    refused_signed: Mapping[str, str] | None = None,
) -> Intake:
    """The batch split by the signature rule (author signatures, else import attestations),
    with ``now`` the future rule, and the parent rule (``blocked``: the session's refused
    ids not held, updated; ``refused_signed``: the entries whose author signature the
    session refused). Each copy a rule refuses is refused alone, its descendants in the
    batch with it (decision 0112)."""
    signed, known = signed_and_known(conn, entries, remembered)

    def stored(ids: list[str]) -> set[str]:
        return {i for (i,) in rows_by_id(conn, "id", ids)}

    future = None if now is None else (lambda ts: future_dated(ts, now, skew_s))
    return split_refused(
        entries, signed, blocked, stored, future, refused_signed,
        lambda entry: parent_fault(entry, known, skew_s), import_fixed(conn, entries, signed),
    )  # fmt: skip


def intake_rows(
    intake: Intake, result: AppendResult, source: str | None, at: str
) -> list[SourceRow]:
    """Rows naming ``source`` as the sender of each refused copy and of each entry the
    batch stored (or re-dated) with no author signature held; logged when any is refused."""
    if intake.refused:
        entry, why = intake.refused[0]
        log.warning(
            "refused %d received cop%s of entries from %s (first %s: %s)",
            len(intake.refused),
            "y" if len(intake.refused) == 1 else "ies",
            source or "a peer",
            entry.id[:12],
            why,
        )
    if source is None:
        return []
    rows = [SourceRow(e.id, e.ts, source, Outcome.REFUSED, at, why) for e, why in intake.refused]
    if intake.unsigned:
        new = set(result.added) | set(result.ts_lowered)
        rows += [
            SourceRow(e.id, e.ts, source, Outcome.UNSIGNED, at, UNSIGNED_DETAIL)
            for e in intake.kept
            if e.id in intake.unsigned and e.id in new
        ]
    return rows
