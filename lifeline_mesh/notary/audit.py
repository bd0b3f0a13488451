"""Drives ``lifeline-mesh verify`` for one line: the ledger's audit plus the notary's rules.

The same findings as :func:`lifeline_mesh.notary.rules.check_attestations` over the whole
line, in the same order, but in memory bounded by a page, not by the line (issue 21):

1. the runners' enrollments, learned first (they decide which signers are known);
2. every item, a page at a time in (sort_key, id) order: decoded and verified in threads
   (libsodium releases the GIL), its signer judged; only the line-wide evidence (receipts,
   summaries, states) is kept, and the ids the items name are checked against the store;
3. when there is evidence, the line walked once from children to parents for each signed
   entry's first witness (only the walk's frontier held, and the few findings it makes);
4. the ledger's own audit (:func:`lifeline.audit.line.verify_store`) reading the line once, and
   each page of its entries judged with the attestations about them, looked up by subject.

Findings go to a :class:`FindingLog` (spilled to a temporary file past a few thousand). The
same audit runs on a line file and on a hub's line: only its reads differ, a line file's
notary tables in SQLite (:class:`~lifeline_mesh.notary.audit_reads.SqliteAuditReads`) or
their PostgreSQL twin (:class:`~lifeline_mesh.notary.pg_audit_reads.PgAuditReads`), chosen
by the backend the line was opened on (decision 0110).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import IO, TYPE_CHECKING, Any

from lifeline.audit.line import Linked, verify_store
from lifeline.audit.parallel import StreamPage
from lifeline.errors import BadSignature, StoreError
from lifeline.store.backend import on_backend
from lifeline.store.port import Store
from lifeline_mesh.notary.audit_items import AttestationIndex, ItemPass
from lifeline_mesh.notary.audit_reads import AuditReads, SqliteAuditReads
from lifeline_mesh.notary.audit_walk import witness_windows
from lifeline_mesh.notary.enrollment import LearningSigners
from lifeline_mesh.notary.findings_log import FindingLog
from lifeline_mesh.notary.import_times import attests
from lifeline_mesh.notary.rules import (
    Finding,
    Policy,
    Verdict,
    anchor_findings,
    entry_findings,
    missing_findings,
    state_findings,
    summary_truncation,
    unsigned_detail,
    unsigned_severity,
    verify_items,
)
from lifeline_mesh.notary.signers import KnownSigners
from lifeline_mesh.notary.statement import Attestation, Role
from lifeline_mesh.notary.storage import NotaryStore

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore
    from lifeline.store.sqlite import SqliteStore

__all__ = ["SECTIONS", "LineReport", "audit_line", "write_json"]

# A report's findings in the order check_attestations lists them, the ledger's first.
SECTIONS = (
    "ledger", "enrolled", "items", "signers", "entries", "truncation", "states", "sources",
)  # fmt: skip
RECENT = 20_000  # entries whose ts the forward pass remembers (parents are usually recent)


@dataclass(slots=True)
class LineReport:
    line: str
    verdict: Verdict
    log: FindingLog = field(default_factory=FindingLog)

    @property
    def findings(self) -> list[Finding]:
        """Every finding, read back (a small report's; a large one streams :attr:`log`)."""
        return list(self.log)

    @property
    def failures(self) -> list[Finding]:
        return list(self.log.failures())

    @property
    def ok(self) -> bool:
        return not self.log.fails

    def counts(self) -> dict[str, Any]:
        counts = self.verdict.to_dict()
        counts.pop("findings")
        return {"line": self.line, "ok": self.ok, **counts, "failures": self.log.fails}

    def to_dict(self) -> dict[str, Any]:
        return {**self.counts(), "findings": [_as_dict(f) for f in self.log]}


def _as_dict(f: Finding) -> dict[str, str]:
    return {"check": f.check, "subject": f.subject, "detail": f.detail, "severity": f.severity}


def write_json(out: IO[str], head: dict[str, Any], reports: Sequence[LineReport]) -> None:
    """``json.dumps({**head, "lines": [r.to_dict() ...]}, indent=2, sort_keys=True)``,
    byte for byte, each report's findings written as they are read back."""

    def dumps(value: object) -> str:
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)

    marker = "\x00findings-{}\x00"
    doc = {**head, "lines": [{**r.counts(), "findings": marker.format(i)} for i, r in
                             enumerate(reports)]}  # fmt: skip
    text = dumps(doc)
    for i, report in enumerate(reports):
        quoted = dumps(marker.format(i))
        before, text = text.split(quoted, 1)
        out.write(before)
        indent = before[before.rfind("\n") + 1 :]
        indent = indent[: len(indent) - len(indent.lstrip(" "))]
        _write_array(out, report.log, indent, dumps)
    out.write(text + "\n")


def _write_array(
    out: IO[str], findings: FindingLog, indent: str, dumps: Callable[[object], str]
) -> None:
    inner = indent + "  "
    first = True
    for finding in findings:
        body = dumps(_as_dict(finding)).replace("\n", "\n" + inner)
        out.write(("[\n" if first else ",\n") + inner + body)
        first = False
    out.write("[]" if first else "\n" + indent + "]")


@dataclass(frozen=True, slots=True)
class _Audit:
    """What :func:`audit_line` was asked: the same for a line file and a hub's line."""

    line: str
    signers: KnownSigners
    policy: Policy
    external_exists: Callable[[str, str], Awaitable[bool]] | None
    advance: Callable[[int], None]


async def audit_line(
    line_store: Store,
    line: str,
    signers: KnownSigners,
    policy: Policy,
    *,
    external_exists: Callable[[str, str], Awaitable[bool]] | None = None,
    advance: Callable[[int], None] = lambda _n: None,
) -> LineReport:
    """The report of ``line``; ``advance(n)`` is told of every ``n`` entries checked. Its
    notary's tables are read a page at a time: a line file's in SQLite, a hub's line's in
    PostgreSQL (see the module docstring)."""
    audit = _Audit(line, signers, policy, external_exists, advance)
    reads = await on_backend(line_store, _READS)
    return await _audit(line_store, reads, audit)


class _Reads:
    """A line's :class:`AuditReads`, per backend; a store of neither kind has no notary."""

    async def sqlite(self, store: SqliteStore) -> AuditReads:
        await NotaryStore.attach(store)  # raises when the line has no notary tables
        return SqliteAuditReads(store)

    async def postgres(self, store: PgStore) -> AuditReads:
        # Imported only for a hub's line: a laptop's verify never loads the driver.
        from lifeline_mesh.notary.pg_audit_reads import PgAuditReads

        return PgAuditReads(store)

    async def plain(self, store: Store) -> AuditReads:
        raise StoreError(
            f"verify needs the notary's tables, which a {type(store).__name__} does not "
            "have; open the line through its home (a line file, or a hub's line)"
        )


_READS = _Reads()


async def _audit(store: Store, reads: AuditReads, audit: _Audit) -> LineReport:
    log = FindingLog(SECTIONS)
    verdict = Verdict()
    workers = max(1, min(os.cpu_count() or 1, 8))
    enrolled = verify_items(await reads.enrolled_items())
    log.extend(_learn_runners(enrolled.valid, audit.signers), "enrolled")
    items = ItemPass(reads, audit.signers, audit.policy, log, workers)
    await items.run()
    policy = audit.policy
    if Role.AUTHOR in items.index.roles:  # a line its nodes sign: see Policy.allow_unsigned
        policy = replace(policy, signed_line=True)
    verdict.attestations = items.count
    windows = await witness_windows(reads, items.index, items.trusted_evidence(), policy)
    walk = _ForwardPass(reads, items.index, policy, log, verdict, windows)
    base = await verify_store(
        store,
        audit.line,
        external_exists=audit.external_exists,
        advance=audit.advance,
        each_page=walk.page,
        parent_times=False,  # judged below with the signatures (rules.entry_findings)
    )
    verdict.entries = base.entries
    log.extend((Finding(f.check, f.entry_id, f.detail) for f in base.findings), "ledger")
    if base.anchored:  # an anchor under a signed entry is a false one (decision 0123)
        signed = await items.index.about(Role.AUTHOR, sorted({c for c, _ in base.anchored}))
        log.extend(anchor_findings(base.anchored, signed), "ledger")
    evidence = items.evidence
    held = await items.held_tips()
    log.extend(summary_truncation(evidence, held, base.entries, policy), "truncation")
    log.extend(missing_findings(items.missing), "truncation")
    log.extend(state_findings(evidence, held, policy), "states")
    log.extend(await reads.source_findings(), "sources")  # who sent what
    return LineReport(audit.line, verdict, log)


class _ForwardPass:
    """Each page of the ledger audit's stream, judged with its attestations."""

    def __init__(
        self,
        reads: AuditReads,
        index: AttestationIndex,
        policy: Policy,
        log: FindingLog,
        verdict: Verdict,
        windows: dict[str, list[Finding]],
    ) -> None:
        self.reads, self.index, self.policy = reads, index, policy
        self.log, self.verdict, self.windows = log, verdict, windows
        self.recent: dict[str, str] = {}

    async def page(self, entries: Sequence[Linked]) -> None:
        recent = self.recent
        stream = entries if isinstance(entries, StreamPage) else None
        found: dict[str, str] = {}
        if stream is not None:  # from worker processes: parents only where they may matter
            ids = stream.ids
            linked: list[Linked] = [stream[i] for i in sorted(stream.linked)]
        else:
            ids = [e.id for e in entries]
            linked = [e for e in entries if e.parents]
        # ``recent`` is a cache for a stream where most entries carry their parents.
        if len(linked) * 2 > len(entries):
            recent.update([(e.id, e.ts) for e in entries])  # first: a parent may be on the page
        unknown = [p for e in linked for p in e.parents if p not in recent]
        if unknown:
            found = await self.reads.ts_of_ids(unknown)
        ts_of = _Either(recent, found)
        authors = await self.index.about(Role.AUTHOR, ids)
        imports = await self.index.about(Role.IMPORTED, ids, trusted_only=True)
        if stream is not None and not authors and not imports:
            self._unsigned(stream, linked, ts_of, found)
            return
        policy, verdict, log = self.policy, self.verdict, self.log
        severity, why = unsigned_severity(policy), unsigned_detail(policy)
        run: list[str] = []  # a run of unsigned entries with nothing else to say: one call
        unsigned = 0
        nothing: tuple[Attestation, ...] = ()
        for entry in entries:  # the usual entry (unsigned, after its parents) in few steps
            eid = entry.id
            mine = authors.get(eid, nothing) if authors else nothing
            held = imports.get(eid, nothing) if imports else nothing
            if not mine and not held:
                unsigned += 1
                if not entry.parents or not _after_any(recent, found, entry):
                    run.append(eid)
                    continue
            if run:
                log.extend_same("unsigned", why, severity, run, "entries")
                run = []
            log.extend(entry_findings(entry, mine, held, ts_of, policy), "entries")
            if mine:
                verdict.signed += 1
                log.extend(self.windows.pop(eid, ()), "entries")
            elif held and attests(held, entry.ts):
                verdict.imported += 1
            elif held:
                verdict.unsigned += 1  # other nodes' claims of other ts (decision 0122)
        verdict.unsigned += unsigned
        if run:
            log.extend_same("unsigned", why, severity, run, "entries")
        if len(recent) > RECENT:  # oldest first (insertion order): drop the older half
            for key in list(islice(recent, len(recent) - RECENT // 2)):
                del recent[key]

    def _unsigned(
        self, stream: StreamPage, linked: list[Linked], ts_of: _Either, found: dict[str, str]
    ) -> None:
        """A page of unsigned entries: runs of ``unsigned`` notes, and the entries whose
        time may be before a parent's judged between them (as :meth:`page` would)."""
        log, ids = self.log, stream.ids
        severity, why = unsigned_severity(self.policy), unsigned_detail(self.policy)
        done = 0
        for entry, i in zip(linked, sorted(stream.linked), strict=True):
            if _after_any(self.recent, found, entry):
                log.extend_same("unsigned", why, severity, ids[done:i], "entries")
                log.extend(entry_findings(entry, (), (), ts_of, self.policy), "entries")
                done = i + 1
        log.extend_same("unsigned", why, severity, ids[done:] if done else ids, "entries")
        self.verdict.unsigned += len(ids)


def _after_any(recent: dict[str, str], found: dict[str, str], entry: Linked) -> bool:
    """Whether a parent's stored ts may be after the entry's (entry_findings decides). Times
    in the stored form (27 characters) order as strings."""
    ts = entry.ts
    for parent in entry.parents:
        other = recent.get(parent)
        if other is None:
            other = found.get(parent)
        if other is not None and (other > ts or len(other) != 27 or len(ts) != 27):
            return True
    return False


class _Either(Mapping[str, str]):
    """Two mappings read as one (the recent entries, then those looked up)."""

    def __init__(self, first: Mapping[str, str], second: Mapping[str, str]) -> None:
        self.first, self.second = first, second

    def __getitem__(self, key: str) -> str:
        found = self.first.get(key)
        return self.second[key] if found is None else found

    def __iter__(self) -> Iterator[str]:
        yield from self.first
        yield from self.second

    def __len__(self) -> int:
        return len(self.first) + len(self.second)


def _learn_runners(valid: Sequence[Attestation], signers: KnownSigners) -> list[Finding]:
    """Resolve the line's runners from their ``enrolled`` statements (decision 0024); one
    whose certificate is not this mesh's CA's is a failure (and its runner stays unknown)."""
    out = []
    for att in valid:
        if att.role is not Role.ENROLLED:
            continue
        if not isinstance(signers, LearningSigners):
            break  # no mesh CA here to check them: runners stay unknown signers
        try:
            signers.learn(att)
        except BadSignature as exc:
            out.append(Finding("bad-enrollment", att.id.hex(), str(exc)))
    return out
