"""Integrity audit of one line: ids recomputed, parents closed, bad rows listed.

The checks are the ledger's part of ``lifeline verify``; ``lifeline-mesh verify`` adds the
signature checks on top.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from lifeline.errors import InvalidEntry
from lifeline.lines import EXTERNAL_ANCHOR
from lifeline.store.port import RowProblem, Store

__all__ = ["Finding", "Report", "verify_store"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: ``check`` names the rule, ``entry_id`` the entry (or row)."""

    check: str  # id-mismatch | invalid-text | missing-parent | external-missing | corrupt-row
    entry_id: str
    detail: str


@dataclass(slots=True)
class Report:
    line: str
    entries: int = 0
    findings: list[Finding] = field(default_factory=list)
    anchors: int = 0  # parents declared external anchors (known by id only), not checked

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "entries": self.entries,
            "anchors": self.anchors,
            "ok": self.ok,
            "findings": [asdict(f) for f in self.findings],
        }


async def verify_store(
    store: Store,
    line: str,
    *,
    external_exists: Callable[[str, str], Awaitable[bool]] | None = None,
) -> Report:
    """Audit every row of ``store``. ``external_exists(line, id)`` checks cross-line parents."""
    report = Report(line=line)
    problems: list[RowProblem] = []
    seen: set[str] = set()
    parents_of: dict[str, tuple[str, ...]] = {}
    async for entry in store.stream(problems=problems):
        report.entries += 1
        seen.add(entry.id)
        parents_of[entry.id] = entry.parents
        try:
            entry.verify()
        except InvalidEntry as exc:
            check = "id-mismatch" if "does not match" in str(exc) else "invalid-text"
            report.findings.append(Finding(check, entry.id, str(exc)))
    for problem in problems:
        report.findings.append(
            Finding("corrupt-row", problem.entry_id, f"row {problem.rowid}: {problem.reason}")
        )
    externals = await store.externals()
    for entry_id, parents in parents_of.items():
        for parent in parents:
            if parent in seen:
                continue
            if parent in externals:
                other = externals[parent]
                if other == EXTERNAL_ANCHOR:  # known by id only, in no line: nothing to look up
                    report.anchors += 1
                    continue
                if external_exists is not None and not await external_exists(other, parent):
                    report.findings.append(
                        Finding(
                            "external-missing",
                            entry_id,
                            f"parent {parent[:12]} should be in line {other!r} but is not there",
                        )
                    )
                continue
            report.findings.append(
                Finding("missing-parent", entry_id, f"parent {parent[:12]} is not stored")
            )
    return report
