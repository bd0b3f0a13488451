"""What an ingest did: per file (:class:`FileResult`) and in all (:class:`IngestReport`)."""

from __future__ import annotations

import traceback
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from lifeline.sessions.adapters.port import SourceFile

__all__ = ["FileResult", "IngestReport", "why_unreadable"]

_HOME = Path(__file__).resolve().parents[3]  # the folder holding the lifeline package
_OURS = str(_HOME / "lifeline")


@dataclass
class FileResult:
    source: SourceFile
    outcome: str  # unchanged | empty | read | resumed | rewritten | failed
    session: str = ""
    turns: int = 0
    items: int = 0
    lines: int = 0
    entries: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    opaque: Counter[str] = field(default_factory=Counter)
    redactions: Counter[str] = field(default_factory=Counter)
    error: str = ""

    def add(
        self,
        turns: int,
        items: int,
        lines: int,
        entries: int,
        skipped: Counter[str],
        opaque: Counter[str],
        redactions: Counter[str],
    ) -> None:
        """One more pass over the file (a big file is read in slices)."""
        self.turns += turns
        self.items += items
        self.lines += lines
        self.entries += entries
        self.skipped.update(skipped)
        self.opaque.update(opaque)
        self.redactions.update(redactions)

    def warning(self) -> str:
        """The one line that says a source was skipped, and why."""
        key = f"#{self.source.key}" if self.source.key else ""
        return f"skipped {self.source.path}{key}: {self.error}"


def why_unreadable(exc: BaseException) -> str:
    """Why a source could not be ingested, in one line: the exception's type and where in
    lifeline it was raised, never its message (it may quote the transcript, a secret too)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(_OURS)]
    where = (
        f" at {Path(frames[-1].filename).relative_to(_HOME)}:{frames[-1].lineno}" if frames else ""
    )
    return f"this version cannot read it ({type(exc).__name__}{where}); the other sources go on"


@dataclass
class IngestReport:
    files: int = 0
    sessions: int = 0  # files with something new
    unchanged: int = 0
    empty: int = 0
    out_of_scope: int = 0
    failed: int = 0  # sources skipped: unreadable, or a content this version cannot take
    turns: int = 0
    items: int = 0
    lines: int = 0
    entries: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    opaque: Counter[str] = field(default_factory=Counter)
    redactions: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def add(self, result: FileResult) -> None:
        self.files += 1
        if result.outcome == "unchanged":
            self.unchanged += 1
        elif result.outcome == "empty":
            self.empty += 1
        elif result.outcome == "failed":
            self.failed += 1
            self.failures.append(f"{result.source.path}: {result.error}")
        else:
            self.sessions += 1
        self.turns += result.turns
        self.items += result.items
        self.lines += result.lines
        self.entries += result.entries
        self.skipped.update(result.skipped)
        self.opaque.update(result.opaque)
        self.redactions.update(result.redactions)

    def as_json(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: dict(v) if isinstance(v, Counter) else v for k, v in values.items()}
