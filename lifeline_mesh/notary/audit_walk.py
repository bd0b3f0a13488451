"""Each signed entry against its first witness, for a streaming audit (``audit.py``).

The same findings as :func:`lifeline_mesh.notary.rules.window_findings` over
:func:`lifeline_mesh.notary.witnessing.first_witnesses`, without holding the line: the
line is walked from children to parents a page at a time; an entry's own marks (the
receipts naming it, looked up for the page; the state and summary tips, few, held) join
the marks its children handed down when it is visited, and are dropped once handed to its
parents. Only the walk's frontier and the findings are held.
"""

from __future__ import annotations

from functools import partial

from lifeline.store.tiers import SqlLine
from lifeline_mesh.notary.audit_items import AttestationIndex
from lifeline_mesh.notary.audit_reads import reverse_page
from lifeline_mesh.notary.rules import Finding, Policy, window_findings
from lifeline_mesh.notary.statement import Attestation, Role
from lifeline_mesh.notary.storage import receipts_naming
from lifeline_mesh.notary.witnessing import Mark, hand_down, marks_of, rank, ranked

__all__ = ["witness_windows"]


async def witness_windows(
    store: SqlLine, index: AttestationIndex, evidence: list[Attestation], policy: Policy
) -> dict[str, list[Finding]]:
    """Entry id → its window findings (only the entries that have some)."""
    receipts = Role.WITNESS in index.roles
    best: dict[str, list[Mark]] = ranked(marks_of(evidence))
    if not best and not receipts:
        return {}
    out: dict[str, list[Finding]] = {}
    before: tuple[int, str, str] | None = None
    while True:
        rows, before = await store.run_read(partial(reverse_page, before=before))
        own = await _receipt_marks(store, index, [e.id for e in rows]) if receipts else {}
        visited = []
        for entry in rows:
            mine = best.pop(entry.id, None)
            named = own.get(entry.id)
            if named:
                mine = rank([*(mine or ()), *named])
            if mine:
                hand_down(best, mine, entry.parents)
                visited.append((entry, mine))
        signed = await index.about(Role.AUTHOR, [e.id for e, _m in visited])
        for entry, mine in visited:
            authors = signed.get(entry.id)
            if authors:
                found = window_findings(entry, authors, {entry.id: mine}, policy)
                if found:
                    out[entry.id] = found
        if before is None:
            return out


async def _receipt_marks(
    store: SqlLine, index: AttestationIndex, ids: list[str]
) -> dict[str, list[Mark]]:
    """(ts, node) of the valid receipts by known signers that name each of ``ids``."""
    found = await store.run_read(lambda c: receipts_naming(c, ids))
    out: dict[str, list[Mark]] = {}
    for entry_id, atts in found.items():
        marks = [(a.ts, a.node_id) for a in atts if a.id not in index.invalid and index.trusted(a)]
        if marks:
            out[entry_id] = marks
    return out
