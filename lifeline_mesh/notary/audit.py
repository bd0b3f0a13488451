"""Drives ``lifeline-mesh verify`` for one line: the ledger's audit plus the notary's rules.

Reads the line (entries, attestations) through the store, runs
:func:`lifeline.audit.verify_store` (ids, closure, bad rows) and
:func:`lifeline_mesh.notary.rules.check_attestations`, and merges both into one report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from lifeline.audit import verify_store
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.notary.rules import Finding, Policy, Verdict, check_attestations
from lifeline_mesh.notary.signers import KnownSigners
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
    store: SqliteStore,
    line: str,
    signers: KnownSigners,
    policy: Policy,
    *,
    external_exists: Callable[[str, str], Awaitable[bool]] | None = None,
) -> LineReport:
    base = await verify_store(store, line, external_exists=external_exists)
    entries = [e async for e in store.stream()]
    items = await (await NotaryStore.attach(store)).items()
    # Signature checks are CPU-bound: keep them off the event loop.
    verdict = await asyncio.to_thread(check_attestations, entries, items, signers, policy)
    findings = [Finding(f.check, f.entry_id, f.detail) for f in base.findings]
    findings.extend(verdict.findings)
    return LineReport(line, verdict, findings)
