"""Each signed entry against its first witness, for a streaming audit (``audit.py``).

The same findings as :func:`lifeline_mesh.notary.rules.window_findings` over
:func:`lifeline_mesh.notary.witnessing.first_witnesses`, without holding the line: the
line is walked from children to parents a page at a time; an entry's own marks (the
receipts naming it, looked up for the page; the state and summary tips, few, held) join
the marks its children handed down when it is visited, and are dropped once handed to its
parents. Only the walk's frontier and the findings are held. The line is read through its
:class:`~lifeline_mesh.notary.audit_reads.AuditReads` (a line file's or a hub's line's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable

from lifeline.errors import InvalidEntry
from lifeline_mesh.notary.audit_items import AttestationIndex
from lifeline_mesh.notary.audit_reads import AuditReads, Cursor
from lifeline_mesh.notary.rules import Finding, Policy, window_findings
from lifeline_mesh.notary.statement import Attestation, Role, decode
from lifeline_mesh.notary.witnessing import Mark, hand_down, marks_of, rank, ranked

__all__ = ["witness_windows"]


async def witness_windows(
    reads: AuditReads, index: AttestationIndex, evidence: list[Attestation], policy: Policy
) -> dict[str, list[Finding]]:
    """Entry id → its window findings (only the entries that have some)."""
    receipts = _Receipts(reads, index) if Role.WITNESS in index.roles else None
    best: dict[str, list[Mark]] = ranked(marks_of(evidence))
    if not best and receipts is None:
        return {}
    out: dict[str, list[Finding]] = {}
    before: Cursor | None = None
    while True:
        rows, before = await reads.reverse_page(before)
        own = await receipts.marks([e.id for e in rows]) if receipts else {}
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


class _Receipts:
    """The valid receipts by known signers that name entries of a page, each decoded once
    while the walk is within the entries it names (a receipt names a batch of neighbours)."""

    def __init__(self, reads: AuditReads, index: AttestationIndex) -> None:
        self.reads, self.index = reads, index
        self.held: dict[Hashable, tuple[Mark, frozenset[str]] | None] = {}

    async def marks(self, ids: list[str]) -> dict[str, list[Mark]]:
        known = set(self.held)
        seqs, items = await self.reads.receipts_of(ids, known)
        for seq, item in items:
            self.held[seq] = self._judge(item)
        wanted = set(ids)
        out: dict[str, list[Mark]] = {}
        for seq in seqs:
            held = self.held.get(seq)
            if held is None:
                continue
            mark, named = held
            for entry_id in wanted & named:
                out.setdefault(entry_id, []).append(mark)
        for seq in list(self.held):  # keep only the receipts of this page's neighbourhood
            if seq not in seqs:
                del self.held[seq]
        return out

    def _judge(self, item: bytes) -> tuple[Mark, frozenset[str]] | None:
        if hashlib.sha256(item).digest() in self.index.invalid:
            return None
        try:
            att = decode(item)
        except InvalidEntry:
            return None
        if att.role is not Role.WITNESS or not self.index.trusted(att):
            return None
        return (att.ts, att.node_id), frozenset(att.extras)
