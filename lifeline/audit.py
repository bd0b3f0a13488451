"""Integrity audit of one line: ids recomputed, parents closed, bad rows listed.

The checks are the ledger's part of ``lifeline verify``; ``lifeline-mesh verify`` adds the
signature checks on top.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lifeline.entry import Entry
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


def _key(entry_id: str) -> int | str:
    """What ``seen`` keeps of an id: the integer of its first 128 bits (44 bytes against a
    64-character string's 113, so a million ids fit in ~75 MB); an id that is not hex is
    kept whole."""
    try:
        return int(entry_id[:32], 16) if len(entry_id) == 64 else entry_id
    except ValueError:
        return entry_id


async def verify_store(
    store: Store,
    line: str,
    *,
    external_exists: Callable[[str, str], Awaitable[bool]] | None = None,
    advance: Callable[[int], None] = lambda _n: None,
    each_page: Callable[[Sequence[Entry]], Awaitable[None]] | None = None,
) -> Report:
    """Audit every row of ``store``. ``external_exists(line, id)`` checks cross-line parents;
    ``advance(n)`` is told of every ``n`` entries read (a progress bar); ``each_page`` is
    given the entries read, in stream order, 2,000 at a time (so that a caller's own checks
    share this one read of the line).

    Memory does not grow with the entries' text: the stream is in height order, so an
    entry's stored parents were read before it and are looked up as they come; only the
    links to parents not read yet (cross-line, missing, or a damaged height) are kept for
    the end.
    """
    report = Report(line=line)
    problems: list[RowProblem] = []
    seen: set[int | str] = set()
    later: list[tuple[str, str]] = []  # (entry id, parent id) in stream order
    page: list[Entry] = []
    async for entry in store.stream(problems=problems):
        report.entries += 1
        if not report.entries % 2_000:
            advance(2_000)
        if each_page is not None:
            page.append(entry)
            if len(page) >= 2_000:
                await each_page(page)
                page = []
        seen.add(_key(entry.id))
        for parent in entry.parents:
            if _key(parent) not in seen:
                later.append((entry.id, parent))
        try:
            entry.verify()
        except InvalidEntry as exc:
            check = "id-mismatch" if "does not match" in str(exc) else "invalid-text"
            report.findings.append(Finding(check, entry.id, str(exc)))
    advance(report.entries % 2_000)
    if page and each_page is not None:
        await each_page(page)
    for problem in problems:
        report.findings.append(
            Finding("corrupt-row", problem.entry_id, f"row {problem.rowid}: {problem.reason}")
        )
    externals = await store.externals()
    for entry_id, parent in later:
        if _key(parent) in seen:
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
