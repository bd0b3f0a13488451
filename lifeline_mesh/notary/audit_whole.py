"""``lifeline-mesh verify`` on a line whose store keeps no notary tables of SQLite: a hub's
line in PostgreSQL, its attestations in the notary's PostgreSQL twin.

The same rules as the streaming audit (:func:`lifeline_mesh.notary.audit.audit_line`), by
:func:`~lifeline_mesh.notary.rules.check_attestations` over the line's entries and items:
the ledger's own audit first (every entry's id checked against its content, parents,
truth), then the runners' enrollments, the items and their signers, each entry against its
author's signature and its first witness, and the line-wide states.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from lifeline.audit.line import verify_store
from lifeline.store.port import Store
from lifeline_mesh.notary.findings_log import FindingLog
from lifeline_mesh.notary.port import Notary
from lifeline_mesh.notary.rules import Finding, Policy, check_attestations, verify_items
from lifeline_mesh.notary.signers import KnownSigners

__all__ = ["audit_whole_line"]


async def audit_whole_line(
    store: Store,
    notary: Notary,
    line: str,
    signers: KnownSigners,
    policy: Policy,
    *,
    sections: tuple[str, ...],
    learn_runners: Callable[[list[object], KnownSigners], list[Finding]],
    external_exists: Callable[[str, str], Awaitable[bool]] | None = None,
    advance: Callable[[int], None] = lambda _n: None,
) -> tuple[object, FindingLog]:
    """The verdict and findings of ``line`` (see the module docstring)."""
    log = FindingLog(sections)
    base = await verify_store(store, line, external_exists=external_exists, advance=advance)
    log.extend((Finding(f.check, f.entry_id, f.detail) for f in base.findings), "ledger")
    items = [*await notary.items(), *await notary.statements().items()]
    checked = verify_items(items)
    log.extend(learn_runners(list(checked.valid), signers), "enrolled")
    entries = [e async for e in store.stream()]
    verdict = check_attestations(entries, checked, signers, policy)
    verdict.entries = base.entries
    log.extend(verdict.findings, "entries")
    verdict.findings = []
    return verdict, log
