"""Ingest: transcript files into the sessions line, incrementally, redacted first.

For each file: skip it when its size and mtime are as recorded (no read at all); continue
from the recorded byte offset when it only grew; read it whole when it is new, was
rewritten in place (a fingerprint changed, it shrank) or is a replayed format. The lines
read become items (adapter), are redacted and capped (:mod:`pack`), packed into parts,
and written with a header and a status entry in one transaction; the source ledger is
updated after the write, so a crash in between only repeats work (ids are content
addresses: a repeat writes nothing new).

Entry shapes (decision 0019): ``session`` (identity: tool, native id, the redacted first
line's hash), ``session-part`` (a run of items; parent: the previous part or the header)
and ``session-status`` (verdict, facts, counts, scope and the tail part's id; parent: the
tail). Every field that is hashed is derived from the file's bytes, so two machines that
ingest one file write the same ids; only the scope may differ (it looks at the local git
checkout), and it lives in the status entry alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lifeline.entry import compute_id
from lifeline.errors import NotFound, StoreError
from lifeline.ledger import Draft, Ledger
from lifeline.sessions.adapters.port import Adapter, ParseState, RawLine, SourceFile
from lifeline.sessions.adapters.source_io import Stat, fingerprints, lines_of, stat_of
from lifeline.sessions.ingest.reading import Outcome, ReadJob, clean_line, read_slice, read_slim
from lifeline.sessions.ingest.redact import Redactor
from lifeline.sessions.ingest.report import FileResult, why_unreadable
from lifeline.sessions.ingest.sources import SourceLedger, SourceRecord
from lifeline.sessions.pack import (
    FORMAT,
    KIND_HEADER,
    KIND_PART,
    KIND_STATUS,
    Caps,
    Packer,
    Part,
    dumps,
)
from lifeline.sessions.scope import project_hashes, scope_for
from lifeline.store.port import Store

__all__ = [
    "AUTHOR",
    "KIND_HEADER",
    "KIND_PART",
    "KIND_STATUS",
    "Ingester",
    "clean_line",
]

AUTHOR = "lifeline-sessions"
_INLINE_BYTES = 256 * 1024  # less to read than this: parse on the loop, skip the thread hop
READ_BUDGET = 32 * 1024 * 1024  # bytes read per pass of an append-only file


@dataclass
class _Plan:
    """Where reading starts: from scratch, or from a recorded position."""

    header: dict[str, Any] | None  # a new header to write, or None (resuming)
    session: str
    native: str  # the tool's own session id (labels every entry's summary)
    state: ParseState | None
    packer: Packer
    prev: str  # the id the next closed part hangs from
    offset: int = 0
    line_no: int = 0
    prefix: str = ""
    outcome: str = "read"
    partial: int = 0


class Ingester:
    """Ingests transcript files into one line (``store`` through ``ledger``)."""

    def __init__(
        self,
        ledger: Ledger,
        sources: SourceLedger,
        *,
        caps: Caps | None = None,
        patterns: tuple[tuple[str, str], ...] = (),
        scope_of: Callable[[str | None, str | None], str] = scope_for,
        project_root: Path | None = None,
    ) -> None:
        self.ledger = ledger
        self.store: Store = ledger.store
        self.sources = sources
        caps = caps or Caps()
        self.caps = Caps(
            caps.tool_output, caps.text, min(caps.part_bytes, ledger.limits.body_bytes - 2_000)
        )
        self.patterns = patterns
        self.scope_of = scope_of
        # the project ingesting: a Gemini session whose projectHash is this folder's is its
        self.project_root = project_root
        self.read_budget = READ_BUDGET

    def unchanged(self, adapter: Adapter, source: SourceFile) -> bool:
        """The file is as last ingested (one stat, no read)."""
        try:
            size, mtime_ns = stat_of(source)
        except OSError:
            return False
        return self.sources.unchanged(adapter.tool.value, source.ledger_path(), size, mtime_ns)

    async def ingest(
        self, adapter: Adapter, source: SourceFile, pool: Executor | None = None
    ) -> FileResult:
        """Ingest one file; never raises for a bad file (the result says what happened):
        one odd transcript must not stop the others, the hooks, the watcher or ``serve``
        (decision 0113). A store that fails does raise: nothing could be written anyway.
        ``pool``: where a big read runs (a process pool), instead of a worker thread."""
        try:
            return await self._ingest(adapter, source, pool)
        except OSError as exc:
            return FileResult(source, "failed", error=f"cannot read it ({exc.strerror or exc})")
        except StoreError:
            raise
        except Exception as exc:  # what this file holds, whatever it is, fails it alone
            return FileResult(source, "failed", error=why_unreadable(exc))

    async def _ingest(
        self, adapter: Adapter, source: SourceFile, pool: Executor | None
    ) -> FileResult:
        size, mtime_ns = stat_of(source)
        stat = Stat(size, mtime_ns)
        path = source.ledger_path()
        tool = adapter.tool.value
        if self.sources.unchanged(tool, path, stat.st_size, stat.st_mtime_ns):
            return FileResult(source, "unchanged")
        if stat.st_size == 0:
            self.sources.touch(tool, path, 0, stat.st_mtime_ns)
            return FileResult(source, "empty")
        plan = await self._plan(adapter, source, self.sources.get(tool, path), stat.st_size)
        total = FileResult(source, plan.outcome, session=plan.session)
        while True:  # a big file in slices of READ_BUDGET bytes: memory stays flat
            job = self._job(adapter, source, plan)
            if pool is not None and not source.key:  # a database's session: read here
                out = await asyncio.get_running_loop().run_in_executor(pool, read_slim, job)
            elif stat.st_size - plan.offset < _INLINE_BYTES and not source.key:  # few new lines
                out = read_slice(job)
            else:
                out = await asyncio.to_thread(read_slice, job)
            if out.offset == plan.offset and plan.header is None and out.partial == plan.partial:
                self.sources.touch(tool, path, stat.st_size, stat.st_mtime_ns)
                return total if total.lines else FileResult(source, "unchanged")
            result = await self.ledger.append_many(self._drafts(adapter, source.source, plan, out))
            self.sources.put(self._record(tool, path, stat, source, plan, out))
            total.add(
                out.turns,
                out.items,
                out.lines,
                result.count,
                out.skipped,
                out.opaque,
                out.redactions,
            )
            rec = self.sources.get(tool, path) if out.more else None
            resumed = await self._resume(rec) if rec is not None else None
            if resumed is None:
                return total
            plan = resumed

    async def _plan(
        self, adapter: Adapter, source: SourceFile, rec: SourceRecord | None, size: int
    ) -> _Plan:
        if rec is not None and adapter.append_only and self._intact(source.path, rec, size):
            resumed = await self._resume(rec)
            if resumed is not None:
                return resumed
        first = next(lines_of(adapter, source, 0, 0), None)
        native = adapter.native_id(source, first)
        # identity is the tool's own id and the content: never a file or folder name
        # (a Claude project folder names the user), never where or how it was read
        header = {
            "v": FORMAT,
            "tool": adapter.tool.value,
            "session": native,
            "first": self._first_digest(first)
            if first is not None and adapter.append_only
            else None,
        }
        summary = _header_summary(header)
        session = _entry_id(KIND_HEADER, summary, adapter.tool.value, dumps(header), ())
        outcome = "read" if rec is None or not rec.offset else "rewritten"
        return _Plan(
            header, session, native, None, Packer(self.caps.part_bytes), session, outcome=outcome
        )

    def _first_digest(self, first: RawLine) -> str:
        """The sha256 of the first line as it is stored: redacted, like the provenance hash
        of every item (:func:`clean_line`). Of the raw line, it let anyone holding the line
        test guesses of a secret in it offline — a Codex ``session_meta`` records
        ``https://user:password@host/…``, and the facts give the rest (decision 0113)."""
        redactor = Redactor(self.patterns)
        if first.data is not None:
            return clean_line(first, redactor).sha256
        text = redactor.text(first.raw.decode("utf-8", "replace"))
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    async def _resume(self, rec: SourceRecord) -> _Plan | None:
        """Where the last pass stopped, with its tail part's items; None: read it all again
        (the tail entry is gone, e.g. the line was replaced)."""
        resume = rec.resume
        tail_items: list[dict[str, Any]] = []
        if resume.get("tail"):
            try:
                entry = await self.store.get(resume["tail"])
                tail_items = json.loads(entry.body)["items"]
            except (NotFound, ValueError, KeyError):
                return None
        packer = Packer(
            self.caps.part_bytes,
            index=resume["part"],
            items=tail_items,
            first_line=resume.get("first", 0),
            last_line=resume.get("last", 0),
        )
        state = ParseState.restore(resume["state"])
        return _Plan(
            None,
            rec.session,
            str(resume.get("native", "")),
            state,
            packer,
            resume["prev"],
            rec.offset,
            rec.line_no,
            rec.prefix,
            "resumed",
            resume.get("partial", 0),
        )

    def _job(self, adapter: Adapter, source: SourceFile, plan: _Plan) -> ReadJob:
        return ReadJob(
            adapter,
            source,
            plan.state,
            plan.packer,
            plan.offset,
            plan.line_no,
            plan.prefix,
            self.caps,
            self.patterns,
            self.read_budget,
        )

    @staticmethod
    def _intact(path: Path, rec: SourceRecord, size: int) -> bool:
        if size < rec.offset or not rec.resume:
            return False
        head, tail = fingerprints(path, rec.offset)
        return head == rec.head and tail == rec.tail

    def _drafts(self, adapter: Adapter, source_name: str, plan: _Plan, out: Outcome) -> list[Draft]:
        tool = adapter.tool.value
        drafts: list[Draft] = []
        if plan.header is not None:
            drafts.append(
                _draft(KIND_HEADER, _header_summary(plan.header), tool, dumps(plan.header), ())
            )
        prev = plan.prev
        label = f"{tool} {plan.native[:12]}"
        for part in out.closed:
            draft = _part_draft(part, plan.session, label, tool, prev)
            drafts.append(draft)
            prev = _draft_id(draft)
        tail_id = ""
        tail_parent = prev
        if out.tail is not None:
            draft = _part_draft(out.tail, plan.session, label, tool, prev)
            drafts.append(draft)
            tail_id = _draft_id(draft)
        out.state.extra["prev"] = prev
        out.state.extra["tail"] = tail_id
        parts = (
            (out.tail.index + 1) if out.tail else (out.closed[-1].index + 1 if out.closed else 0)
        )
        status = self._status_body(plan.session, tail_id or tail_parent, parts, out)
        status["source"] = source_name
        drafts.append(
            _draft(
                KIND_STATUS,
                _status_summary(label, status),
                tool,
                dumps(status),
                (tail_id or tail_parent,),
            )
        )
        return drafts

    def _status_body(self, session: str, tail: str, parts: int, out: Outcome) -> dict[str, Any]:
        state = out.state
        verdict = state.tracker.verdict(out.partial)
        redactor = Redactor(self.patterns)
        facts = {k: v for k, v in redactor.value(state.facts).items() if v not in (None, "")}
        for name in ("title", "first_prompt"):
            if isinstance(facts.get(name), str):
                facts[name] = facts[name][:200]
        cwd = state.extra.get("cwd_raw")
        digest = state.extra.get("project_hash")
        root = self.project_root
        if cwd is None and digest and root is not None and digest in project_hashes(root):
            cwd = str(root.absolute())
        scope = self.scope_of(cwd, state.facts.get("git_remote"))
        return {
            "v": FORMAT,
            "session": session,
            "tail": tail,
            "parts": parts,
            "status": verdict.status.value,
            "reason": redactor.text(verdict.reason),
            "facts": facts,
            "scope": scope,
            "turns": state.tracker.prompts,
            "items": state.extra.get("items", 0),
            "lines": out.line_no,
            "bytes": out.offset,
            "partial": out.partial,
            "skipped": dict(state.skipped),
            "opaque": dict(state.opaque),
            "redactions": state.extra.get("redactions", {}),
            "truncated": state.extra.get("truncated", 0),
            "usage": state.extra.get("usage", {}),
        }

    @staticmethod
    def _record(
        tool: str, path: str, stat: Stat, source: SourceFile, plan: _Plan, out: Outcome
    ) -> SourceRecord:
        # a database's session has no bytes of its own to fingerprint: its stamp says it all
        head, tail = ("", "") if source.key else fingerprints(source.path, out.offset)
        tail_part = out.tail
        resume = {
            "state": out.state.snapshot(),
            "part": tail_part.index
            if tail_part
            else (out.closed[-1].index + 1 if out.closed else plan.packer.index),
            "first": tail_part.lines[0] if tail_part else 0,
            "last": tail_part.lines[1] if tail_part else 0,
            "prev": out.state.extra.get("prev", plan.prev),
            "tail": out.state.extra.get("tail", ""),
            "partial": out.partial,
            "native": plan.native,
        }
        return SourceRecord(
            tool,
            path,
            stat.st_size,
            stat.st_mtime_ns,
            out.offset,
            out.line_no,
            out.prefix,
            head,
            tail,
            plan.session,
            resume,
        )


def _header_summary(header: dict[str, Any]) -> str:
    return f"{header['tool']} session {str(header['session'])[:80]}"


def _status_summary(label: str, status: dict[str, Any]) -> str:
    title = status["facts"].get("title") or status["facts"].get("first_prompt") or ""
    turns = status["turns"]
    text = f"{label}: {status['status']}, {turns} turn{'' if turns == 1 else 's'} — {title}"
    return " ".join(text.split())[:300]


def _part_draft(part: Part, session: str, label: str, tool: str, prev: str) -> Draft:
    summary = f"{label} part {part.index}: lines {part.lines[0]}-{part.lines[1]}, {part.size} items"
    return _draft(KIND_PART, summary, tool, part.body(session), (prev,))


def _draft(kind: str, summary: str, tool: str, body: str, parents: tuple[str, ...]) -> Draft:
    return Draft(
        kind=kind,
        summary=summary,
        body=body,
        author=AUTHOR,
        agent=tool,
        provider="none",
        model="none",
        parents=parents,
    )


def _entry_id(kind: str, summary: str, tool: str, body: str, parents: tuple[str, ...]) -> str:
    return compute_id(kind, AUTHOR, tool, "none", "none", summary, body, parents)


def _draft_id(draft: Draft) -> str:
    return _entry_id(draft.kind, draft.summary, draft.agent, draft.body, draft.parents or ())
