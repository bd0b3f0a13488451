"""The item pass of a streaming audit (``audit.py``), and the lookups it leaves behind.

:class:`ItemPass` reads every item of a line a page at a time, in the order a report lists
them, decodes and verifies each page in threads, and records the findings about items and
their signers; it keeps only what the rest of the audit needs across the line: the
evidence (receipts, summaries, states), the ids of invalid items, the entries signed for
that the store does not hold, and the rare row whose columns disagree with its item.
:class:`AttestationIndex` then answers "the valid author (imported) statements about these
entries" for one page of entries at a time, from the store. Both read through the line's
:class:`~lifeline_mesh.notary.audit_reads.AuditReads`: a line file's or a hub's line's.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import defaultdict
from collections.abc import Sequence

from lifeline.errors import BadSignature, InvalidEntry
from lifeline_mesh.notary.audit_reads import TABLES, AuditReads, Cursor, DamagedRow, ItemRow
from lifeline_mesh.notary.findings_log import FindingLog
from lifeline_mesh.notary.intake import table_of
from lifeline_mesh.notary.rules import Finding, Policy, signer_findings
from lifeline_mesh.notary.signers import KnownSigners, SignerState
from lifeline_mesh.notary.statement import Attestation, Role, decode

__all__ = ["AttestationIndex", "ItemPass"]

# Kept for the whole audit: statements of a whole line's state (a few per sync). Receipts,
# which name every entry in the first wave, are looked up a page at a time instead.
EVIDENCE = frozenset({Role.SUMMARY, Role.STATE})
Checked = Attestation | Finding


def check_items(items: Sequence[bytes]) -> list[Checked]:
    """Each item decoded and verified, or its finding (as rules.verify_items names them)."""
    out: list[Checked] = []
    for item in items:
        try:
            att = decode(item)
            att.verify()
        except BadSignature as exc:
            check = "signer-mismatch" if "re-signed" in str(exc) else "bad-signature"
            out.append(Finding(check, hashlib.sha256(item).hexdigest(), str(exc)))
            continue
        except InvalidEntry as exc:
            out.append(Finding("malformed-attestation", hashlib.sha256(item).hexdigest(), str(exc)))
            continue
        out.append(att)
    return out


def _damaged(row: DamagedRow) -> Finding:
    """A row of the notary's tables that was not written by the notary: left out."""
    return Finding(
        "damaged-attestation",
        row.subject or f"{row.table}:{row.seq}",
        f"{row.table} row {row.seq}: {row.wrong} (the notary never writes that: the row "
        "was edited outside lifeline-mesh); left out of the audit",
    )


class AttestationIndex:
    """The valid author and imported statements about given entries, read from the store."""

    def __init__(self, reads: AuditReads, signers: KnownSigners) -> None:
        self.reads = reads
        self.signers = signers
        self.roles: set[Role] = set()  # the kinds a valid item of the line has
        self.invalid: set[bytes] = set()  # sha256 of the items that failed
        self.odd: dict[str, list[Attestation]] = defaultdict(list)  # columns disagree

    def trusted(self, att: Attestation) -> bool:
        return self.signers.status(att.node_id).state is not SignerState.UNKNOWN

    async def about(
        self, role: Role, ids: Sequence[str], *, trusted_only: bool = False
    ) -> dict[str, list[Attestation]]:
        if role not in self.roles or not ids:
            return {}
        wanted = set(ids)
        table = table_of(role)
        rows = await self.reads.items_about(table, role.value, ids)
        found: dict[str, dict[bytes, Attestation]] = defaultdict(dict)
        for digest, item in rows:
            if digest in self.invalid:
                continue
            try:
                att = decode(item)
            except InvalidEntry:
                continue
            if att.role is role and att.subject in wanted:
                found[att.subject][digest] = att
        for entry_id in wanted.intersection(self.odd):
            for att in self.odd[entry_id]:
                if att.role is role:
                    found[entry_id][att.id] = att
        out: dict[str, list[Attestation]] = {}
        for entry_id, atts in found.items():
            listed = [a for a in atts.values() if not trusted_only or self.trusted(a)]
            if len(listed) > 1:
                listed.sort(key=lambda a: (a.sort_key, a.id))
            if listed:
                out[entry_id] = listed
        return out


class ItemPass:
    """Every item of a line, once: findings about items and signers, and what is kept."""

    def __init__(
        self,
        reads: AuditReads,
        signers: KnownSigners,
        policy: Policy,
        log: FindingLog,
        workers: int,
    ) -> None:
        self.reads, self.signers, self.policy, self.log = reads, signers, policy, log
        self.workers = workers
        self.count = 0
        self.evidence: list[Attestation] = []
        self.missing: dict[str, bool] = {}  # entry id → signed for by this node
        self.index = AttestationIndex(reads, signers)

    def trusted_evidence(self) -> list[Attestation]:
        return [a for a in self.evidence if self.index.trusted(a)]

    async def held_tips(self) -> set[str]:
        tips = [t for a in self.evidence for t in a.summary_tips]
        return await self.reads.held_ids(tips) if tips else set()

    async def run(self) -> None:
        for table in TABLES:
            pending = asyncio.ensure_future(self._page(table, None))
            while True:
                rows, damaged, after = await pending
                if after is None:
                    break
                pending = asyncio.ensure_future(self._page(table, after))
                for row in damaged:
                    self.log.add(_damaged(row), "items")
                    self.index.invalid.add(row.digest)
                if rows:
                    await self._judge(rows)

    async def _page(
        self, table: str, after: Cursor | None
    ) -> tuple[list[ItemRow], list[DamagedRow], Cursor | None]:
        return await self.reads.item_page(table, after)

    async def _judge(self, rows: list[ItemRow]) -> None:
        self.count += len(rows)
        size = -(-len(rows) // self.workers)
        parts = [[r[4] for r in rows[i : i + size]] for i in range(0, len(rows), size)]
        results = await asyncio.gather(*(asyncio.to_thread(check_items, p) for p in parts))
        valid: list[Attestation] = []
        index = self.index
        for row, result in zip(rows, (r for part in results for r in part), strict=True):
            if isinstance(result, Finding):
                self.log.add(result, "items")
                index.invalid.add(bytes.fromhex(result.subject))
                continue
            valid.append(result)
            index.roles.add(result.role)
            if result.role in EVIDENCE:
                self.evidence.append(result)
            elif result.role is Role.WITNESS:
                pass
            elif (result.role.value, result.subject) != (row[2], row[3]):
                index.odd[result.subject].append(result)
        self.log.extend(signer_findings(valid, self.signers), "signers")
        await self._note_missing(valid)

    async def _note_missing(self, valid: list[Attestation]) -> None:
        named = [(a, entry_id) for a in valid for entry_id in a.entry_ids()]
        if not named:
            return
        ids = [entry_id for _a, entry_id in named]
        held = await self.reads.held_ids(ids)
        local = self.policy.local_node_id
        for att, entry_id in named:
            if entry_id not in held:
                self.missing[entry_id] = self.missing.get(entry_id, False) or (att.node_id == local)
