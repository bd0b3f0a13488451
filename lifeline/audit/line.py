"""Integrity audit of one line: ids recomputed, parents closed, bad rows listed, times
checked (``lifeline/audit/times.py``).

The checks are the ledger's part of ``lifeline verify``; ``lifeline-mesh verify`` adds the
signature checks on top.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Protocol

from lifeline.audit import parallel as audit_parallel
from lifeline.audit.times import (
    ParentTimes,
    damaged_heights,
    dated_before_parents,
    invalid_ts,
)
from lifeline.audit.worker import row_key
from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.lines import EXTERNAL_ANCHOR
from lifeline.store.backend import FileOrEntries, on_backend
from lifeline.store.port import RowProblem, Store
from lifeline.store.shallow import boundary_heights
from lifeline.store.tiers import SqlLine
from lifeline.truth.audit import TruthAudit
from lifeline.truth.check import RowCheck
from lifeline.truth.reducers import integrity_of

__all__ = ["Finding", "Linked", "Report", "verify_store"]


class Linked(Protocol):
    """What a caller's page checks are given of each entry: an Entry (serial audit) or
    its :class:`~lifeline.store.rows.Links` (an audit in worker processes)."""

    @property
    def id(self) -> str: ...
    @property
    def ts(self) -> str: ...
    @property
    def parents(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: ``check`` names the rule, ``entry_id`` the entry (or row)."""

    # id-mismatch | invalid-text | invalid-ts | missing-parent | external-missing |
    # corrupt-row | truth-row | truth-state | truth-rebuilt (the truth tables against the
    # entries); as a note: ts-before-parent
    check: str
    entry_id: str
    detail: str


@dataclass(slots=True)
class Report:
    line: str
    entries: int = 0
    findings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)  # reported; the line still verifies
    anchors: int = 0  # parents declared external anchors (known by id only), not checked
    # Those links, (child, parent): a signed child of one is judged by the notary's audit
    anchored: list[tuple[str, str]] = field(default_factory=list)
    shallow: int = 0  # parents on the shallow boundary: older history not here, not checked

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
            "notes": [asdict(f) for f in self.notes],
            "shallow": self.shallow,
        }


# What ``seen`` keeps of an id: the integer of its first 128 bits (44 bytes against a
# 64-character string's 113, so a million ids fit in ~75 MB); an id that is not hex is
# kept whole. One definition, shared with the worker processes.
_key = row_key


async def verify_store(
    store: Store,
    line: str,
    *,
    external_exists: Callable[[str, str], Awaitable[bool]] | None = None,
    advance: Callable[[int], None] = lambda _n: None,
    each_page: Callable[[Sequence[Linked]], Awaitable[None]] | None = None,
    parallel_from: int | None = None,
    rebuild: bool = True,
    parent_times: bool = True,
) -> Report:
    """Audit every row of ``store``. ``external_exists(line, id)`` checks cross-line parents;
    ``advance(n)`` is told of every ``n`` entries read (a progress bar); ``each_page`` is
    given the entries read, in stream order, 2,000 at a time (so that a caller's own checks
    share this one read of the line).

    A SQLite line of at least ``parallel_from`` entries (default
    :func:`lifeline.audit.parallel.parallel_min`) is checked in one worker process per
    core (``lifeline/audit/parallel.py``): the same report, finding for finding.

    A line that keeps the truth tables has them checked against its entries
    (:mod:`lifeline.truth.check`: what ``context`` reads), and rebuilt from the entries
    when they differ, unless ``rebuild`` is False or the file cannot be written.

    Each row's ts and height are checked, and with ``parent_times`` each entry's time
    against its parents' (notes; ``lifeline-mesh verify`` has its own rule, with the
    signatures): :mod:`lifeline.audit.times`.

    Memory does not grow with the entries' text: the stream is in height order, so an
    entry's stored parents were read before it and are looked up as they come; only the
    links to parents not read yet (cross-line, missing, or a damaged height) are kept for
    the end.
    """
    truth = await TruthAudit.start(store)
    mark = truth.mark if truth is not None else None
    report: Report | None = None
    results: list[tuple[Any, ...]] | None = None
    least = audit_parallel.parallel_min() if parallel_from is None else parallel_from
    workers = partial(  # a line file: worker processes open it by its path
        _in_workers,
        line=line,
        least=least,
        mark=mark,
        advance=advance,
        each_page=each_page,
        external_exists=external_exists,
    )
    split = await on_backend(store, FileOrEntries(file=workers, entries=_serial))
    if split is not None:
        report, results = split
    in_sql = on_backend(store, FileOrEntries(file=lambda _s: True, entries=lambda _s: False))
    if report is None:
        rows = _StreamTruth(truth) if truth is not None and mark is not None else None
        if rows is not None:
            await rows.begin()
        times = ParentTimes() if parent_times and not in_sql else None
        report = await _verify_stream(store, line, external_exists, advance, each_page, rows, times)
        if rows is not None:
            results = await rows.end()
        if times is not None:
            report.notes += [Finding(*note) for note in await times.finish(store)]
    if in_sql:
        await _in_sql(store, report, parent_times)
    if truth is not None:
        found = await truth.finish(results, rebuild_tables=rebuild)
        report.findings += [Finding(c, s, d) for c, s, d in found]
    return report


async def _serial(store: Store) -> None:
    return None  # a line of another backend: read once, in this process, below


async def _in_sql(store: Store, report: Report, parent_times: bool) -> None:
    """A line file's heights, and its entries dated before a parent, read in its SQL."""

    async def read(sql: SqlLine) -> None:
        found = await sql.run_read(damaged_heights)
        report.findings += [Finding(*f) for f in found]
        if parent_times:
            notes = await sql.run_read(dated_before_parents)
            report.notes += [Finding(*note) for note in notes]

    async def nothing(_other: Store) -> None:
        return None

    await on_backend(store, FileOrEntries(file=read, entries=nothing))


async def _in_workers(
    store: SqlLine,
    *,
    line: str,
    least: int,
    mark: int | None,
    advance: Callable[[int], None],
    each_page: Callable[[Sequence[Linked]], Awaitable[None]] | None,
    external_exists: Callable[[str, str], Awaitable[bool]] | None,
) -> tuple[Report, list[tuple[Any, ...]] | None] | None:
    """A line file of at least ``least`` entries, checked in one worker process per core
    (each opens the file by its path); None: too small, or one core."""
    count = audit_parallel.workers()
    if count <= 1 or await _size(store) < least:
        return None
    merged = await audit_parallel.check_in_workers(
        store, count, advance=advance, each_page=each_page, truth_mark=mark
    )
    report = Report(line=line, entries=merged.entries)
    report.findings += [Finding(c, e, d) for _pos, c, e, d in merged.ids]
    report.findings += [Finding("corrupt-row", e, d) for _pos, e, d in merged.rows]
    later = [(e, p) for _pos, e, p in merged.parents]
    await _resolve(store, report, later, set(), external_exists)
    return report, merged.truth


async def _size(store: SqlLine) -> int:
    """The span of the line's row numbers: its entries, read without counting them."""
    row = await store.run_read(
        lambda conn: conn.execute("SELECT max(seq) - min(seq) + 1 FROM entries").fetchone()
    )
    return int(row[0] or 0)


class _StreamTruth:
    """The truth tables checked on the serial stream's entries (each already decoded and
    verified there): the rows past the tables' mark, read before the stream, are left out.
    When rows were written past the mark while the stream ran (it may have read them),
    the line is scanned by row number instead (:meth:`TruthAudit.finish` without results)."""

    def __init__(self, truth: TruthAudit) -> None:
        self.truth = truth
        self.check = RowCheck(None)
        self.skip: set[str] = set()

    async def begin(self) -> None:
        self.skip = await self.truth.entries_after()

    def entry(self, entry: Entry, problem: str | None) -> None:
        if entry.id in self.skip:
            return
        if problem is None:
            self.check.intact(entry.id, entry.ts, entry.kind, entry.provider, entry.model,
                              entry.summary, entry.body, entry.parents)  # fmt: skip
        else:
            self.check.damaged(entry.id, integrity_of(entry) or problem)

    def undecoded(self, rowid: int) -> None:
        mark = self.truth.mark
        if mark is not None and rowid <= mark:
            self.check.undecoded()

    async def flush(self) -> None:
        await self.truth.flush(self.check)

    async def end(self) -> list[tuple[Any, ...]] | None:
        if await self.truth.entries_after() - self.skip:
            return None
        await self.flush()
        return [self.check.result()]


async def _verify_stream(
    store: Store,
    line: str,
    external_exists: Callable[[str, str], Awaitable[bool]] | None,
    advance: Callable[[int], None],
    each_page: Callable[[Sequence[Linked]], Awaitable[None]] | None,
    truth: _StreamTruth | None = None,
    times: ParentTimes | None = None,
) -> Report:
    report = Report(line=line)
    problems: list[RowProblem] = []
    seen: set[int | str] = set()
    later: list[tuple[str, str]] = []  # (entry id, parent id) in stream order
    page: list[Linked] = []
    async for entry in store.stream(problems=problems):
        report.entries += 1
        if not report.entries % 2_000:
            advance(2_000)
            if truth is not None:
                await truth.flush()
        if each_page is not None:
            page.append(entry)
            if len(page) >= 2_000:
                await each_page(page)
                page = []
        seen.add(_key(entry.id))
        for parent in entry.parents:
            if _key(parent) not in seen:
                later.append((entry.id, parent))
        if times is not None:
            times.see(entry.id, entry.ts, entry.parents)
        bad_ts = invalid_ts(entry.id, entry.ts)
        if bad_ts is not None:
            report.findings.append(Finding(*bad_ts))
        try:
            entry.verify()
        except InvalidEntry as exc:
            check = "id-mismatch" if "does not match" in str(exc) else "invalid-text"
            report.findings.append(Finding(check, entry.id, str(exc)))
            if truth is not None:
                truth.entry(entry, "not-utf8")
        else:
            if truth is not None:
                truth.entry(entry, None)
    advance(report.entries % 2_000)
    if page and each_page is not None:
        await each_page(page)
    for problem in problems:
        report.findings.append(
            Finding("corrupt-row", problem.entry_id, f"row {problem.rowid}: {problem.reason}")
        )
        if truth is not None:
            truth.undecoded(problem.rowid)
    await _resolve(store, report, later, seen, external_exists)
    return report


async def _boundary(store: Store, parents: set[str]) -> set[str]:
    """Those ``parents`` on the line's shallow boundary (decision 0063; a line file's: a
    hub's line is taken in full)."""
    if not parents:
        return set()

    async def on_file(sql: SqlLine) -> set[str]:
        return set(await sql.run_read(lambda conn: boundary_heights(conn, parents)))

    async def complete(_other: Store) -> set[str]:
        return set()

    return await on_backend(store, FileOrEntries(file=on_file, entries=complete))


async def _resolve(
    store: Store,
    report: Report,
    later: list[tuple[str, str]],
    seen: set[int | str],
    external_exists: Callable[[str, str], Awaitable[bool]] | None,
) -> None:
    """The parent links not resolved in the stream: read later, cross-line, or missing."""
    externals = await store.externals()
    absent = await _boundary(store, {p for _e, p in later})
    for entry_id, parent in later:
        if _key(parent) in seen:
            continue
        if parent in absent:  # a shallow line: the parent is older history, not here
            report.shallow += 1
            continue
        if parent in externals:
            other = externals[parent]
            if other == EXTERNAL_ANCHOR:  # known by id only, in no line: nothing to look up
                report.anchors += 1
                report.anchored.append((entry_id, parent))
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
