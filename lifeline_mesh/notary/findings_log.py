"""A report's findings in order, in bounded memory whatever their number.

An unsigned line of a million entries has a million ``unsigned`` notes: held as objects
they alone took ~200 MB. :class:`FindingLog` keeps counts and the first few subjects of
each kind of note in memory, and the findings themselves in a temporary file past
:data:`IN_MEMORY` (pickled in batches), read back in order for a full report. A report is
written in sections (the ledger's audit, the runners' enrollments, the items, ...) that
are filled in any order and read in section order.
"""

from __future__ import annotations

import pickle
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import IO

from lifeline_mesh.notary.rules import Finding

__all__ = ["EXAMPLES", "IN_MEMORY", "FindingLog"]

IN_MEMORY = 4_096  # findings kept as objects per section before it spills to its file
EXAMPLES = 3  # subjects remembered per kind of note (a text report names a few)

Row = tuple[str, str, str, str]
# Findings of one kind in a row (a run of unsigned entries), kept as their subjects alone:
# (check, detail, severity, subjects).
Run = tuple[str, str, str, list[str]]


class _Section:
    __slots__ = ("batch", "file", "held", "spilled")

    def __init__(self) -> None:
        self.batch: list[Row | Run] = []
        self.held = 0  # findings in batch
        self.file: IO[bytes] | None = None
        self.spilled = 0

    def add(self, row: Row) -> None:
        self.batch.append(row)
        self.held += 1
        if self.held >= IN_MEMORY:
            self.spill()

    def add_run(self, run: Run) -> None:
        self.batch.append(run)
        self.held += len(run[3])
        if self.held >= IN_MEMORY:
            self.spill()

    def spill(self) -> None:
        if self.batch:
            if self.file is None:
                # closed by close(), or with the process: it has no name to clean up
                self.file = tempfile.TemporaryFile(prefix="lifeline-findings-")  # noqa: SIM115
            pickle.dump(self.batch, self.file, pickle.HIGHEST_PROTOCOL)
            self.spilled += 1
            self.batch, self.held = [], 0

    def rows(self) -> Iterator[Row]:
        if self.file is not None:
            self.file.seek(0)
            for _ in range(self.spilled):
                yield from _expand(pickle.load(self.file))
            self.file.seek(0, 2)
        yield from _expand(self.batch)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def _expand(batch: list[Row | Run]) -> Iterator[Row]:
    for item in batch:
        if type(item[3]) is list:
            check, detail, severity, subjects = item
            for subject in subjects:
                yield (check, subject, detail, severity)
        else:
            yield item  # type: ignore[misc]


class FindingLog:
    """Findings of one report in ``sections`` (read in that order)."""

    def __init__(self, sections: Iterable[str] = ("all",)) -> None:
        self._sections = {name: _Section() for name in sections}
        self.count = 0
        self.fails = 0
        self.notes: Counter[str] = Counter()
        self._examples: dict[tuple[str, str], list[str]] = {}

    def add(self, finding: Finding, section: str = "all") -> None:
        self.count += 1
        if finding.severity == "fail":
            self.fails += 1
        else:
            self.notes[finding.check] += 1
            shown = self._examples.setdefault((section, finding.check), [])
            if len(shown) < EXAMPLES:
                shown.append(finding.subject)
        self._sections[section].add(
            (finding.check, finding.subject, finding.detail, finding.severity)
        )

    def extend_same(
        self, check: str, detail: str, severity: str, subjects: list[str], section: str = "all"
    ) -> None:
        """One finding per subject, all of the same kind (a run of unsigned entries); the
        log keeps ``subjects`` (the caller does not change it after)."""
        if not subjects:
            return
        self.count += len(subjects)
        if severity == "fail":
            self.fails += len(subjects)
        else:
            self.notes[check] += len(subjects)
            shown = self._examples.setdefault((section, check), [])
            shown.extend(subjects[: max(0, EXAMPLES - len(shown))])
        self._sections[section].add_run((check, detail, severity, subjects))

    def extend(self, findings: Iterable[Finding], section: str = "all") -> None:
        for finding in findings:
            self.add(finding, section)

    def examples(self, check: str) -> list[str]:
        """The first :data:`EXAMPLES` subjects of the notes of ``check``, in report order."""
        out = [s for name in self._sections for s in self._examples.get((name, check), [])]
        return out[:EXAMPLES]

    def __iter__(self) -> Iterator[Finding]:
        for section in self._sections.values():
            for row in section.rows():
                yield Finding(*row)

    def failures(self) -> Iterator[Finding]:
        return (f for f in self if f.severity == "fail") if self.fails else iter(())

    def close(self) -> None:
        for section in self._sections.values():
            section.close()
