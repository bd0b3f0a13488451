"""Drives ``lifeline-mesh verify`` for one line: the ledger's audit plus the notary's rules.

Reads the line (entries, attestations) through the store, runs
:func:`lifeline.audit.verify_store` (ids, closure, bad rows) and
:func:`lifeline_mesh.notary.rules.check_attestations`, and merges both into one report.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from lifeline.audit import verify_store
from lifeline.errors import BadSignature
from lifeline.store.tiers import SqlLine
from lifeline_mesh.notary.enrollment import LearningSigners
from lifeline_mesh.notary.rules import (
    Checked,
    Finding,
    Policy,
    Verdict,
    check_attestations,
    verify_items,
)
from lifeline_mesh.notary.signers import KnownSigners
from lifeline_mesh.notary.statement import Role
from lifeline_mesh.notary.storage import NotaryStore

__all__ = ["LineReport", "audit_line"]


@dataclass(slots=True)
class LineReport:
    line: str
    verdict: Verdict
    findings: list[Finding] = field(default_factory=list)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "fail"]

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        counts = self.verdict.to_dict()
        counts.pop("findings")
        return {
            "line": self.line,
            "ok": self.ok,
            **counts,
            "failures": len(self.failures),
            "findings": [asdict(f) for f in self.findings],
        }


async def audit_line(
    store: SqlLine,
    line: str,
    signers: KnownSigners,
    policy: Policy,
    *,
    external_exists: Callable[[str, str], Awaitable[bool]] | None = None,
) -> LineReport:
    notary = await NotaryStore.attach(store)
    items = await notary.items() + await notary.statements().items()
    # Signature checks are CPU-bound and libsodium releases the GIL: verify slices in
    # threads, one per core, while the ledger's own audit reads the line.
    workers = max(1, min(os.cpu_count() or 1, 8))
    size = -(-len(items) // workers) or 1
    slices = [items[i : i + size] for i in range(0, len(items), size)]
    pending = asyncio.gather(*(asyncio.to_thread(verify_items, s) for s in slices))
    base = await verify_store(store, line, external_exists=external_exists)
    entries = [e async for e in store.stream()]
    checked = Checked()
    for part in await pending:
        checked = checked.merge(part)
    enrollment = _learn_runners(checked, signers)
    verdict = await asyncio.to_thread(check_attestations, entries, checked, signers, policy)
    verdict.findings[:0] = enrollment
    findings = [Finding(f.check, f.entry_id, f.detail) for f in base.findings]
    findings.extend(verdict.findings)
    return LineReport(line, verdict, findings)


def _learn_runners(checked: Checked, signers: KnownSigners) -> list[Finding]:
    """Resolve the line's runners from their ``enrolled`` statements (decision 0024); one
    whose certificate is not this mesh's CA's is a failure (and its runner stays unknown)."""
    out = []
    for att in checked.valid:
        if att.role is not Role.ENROLLED:
            continue
        if not isinstance(signers, LearningSigners):
            break  # no mesh CA here to check them: runners stay unknown signers
        try:
            signers.learn(att)
        except BadSignature as exc:
            out.append(Finding("bad-enrollment", att.id.hex(), str(exc)))
    return out
