"""The CPU part of ingest: a slice of a transcript file into packed, redacted items.

:func:`read_slice` takes everything it needs in one picklable :class:`ReadJob` and returns
an :class:`Outcome`, so it runs alike on the event loop, in a worker thread, or in a worker
process (decision 0068: ``ingest --all`` over many files reads them in two processes while
the parent writes). Nothing here touches the store.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from lifeline.sessions.adapters.port import Adapter, Parser, ParseState, RawLine, SourceFile
from lifeline.sessions.adapters.source_io import lines_of
from lifeline.sessions.ingest.redact import Redactor
from lifeline.sessions.model import Item, Prompt, Usage
from lifeline.sessions.pack import Caps, Cleaner, Packer, Part, dumps, native_ids

__all__ = ["Outcome", "ReadJob", "clean_line", "read_slice", "read_slim", "watch_parent"]

_WATCH_SECONDS = 1.0


@dataclass
class ReadJob:
    """Where to read and with what: picklable, for a worker process."""

    adapter: Adapter
    source: SourceFile
    state: ParseState | None  # None: from the start of the file
    packer: Packer
    offset: int
    line_no: int
    prefix: str
    caps: Caps
    patterns: tuple[tuple[str, str], ...]
    budget: int  # bytes read per pass of an append-only file


@dataclass
class Outcome:
    closed: list[Part]
    tail: Part | None
    state: ParseState
    offset: int
    line_no: int
    prefix: str
    partial: int
    items: int
    turns: int
    lines: int
    redactions: Counter[str]
    truncated: int
    skipped: Counter[str]  # in this pass
    opaque: Counter[str]
    more: bool  # stopped at the read budget: the file goes on


def read_slice(job: ReadJob) -> Outcome:
    """Lines of ``job.source`` from ``job.offset`` to packed, redacted items."""
    adapter, source = job.adapter, job.source
    state = job.state or ParseState()
    redactor = Redactor(job.patterns)
    cleaner = Cleaner(job.caps)
    packer = job.packer
    offset, line_no, prefix = job.offset, job.line_no, job.prefix
    items = turns = lines = 0
    skipped, opaque = Counter(state.skipped), Counter(state.opaque)
    more = False
    cleaned = (clean_line(line, redactor) for line in lines_of(adapter, source, offset, line_no))
    if adapter.append_only:
        parser = adapter.parser(source, job.state)
        state = parser.state
        groups: Iterator[tuple[RawLine, list[Item]]] = (
            (line, _fed(parser, line)) for line in cleaned
        )
    else:
        groups = adapter.whole(source, state, cleaned)
    limit = job.caps.part_bytes - 200
    for line, found in groups:
        lines += 1
        offset, line_no = max(offset, line.end), max(line_no, line.number)
        prefix = hashlib.sha256(f"{prefix}{line.sha256}".encode()).hexdigest()
        ids = native_ids(line.data)
        stored, texts = [], []
        for item in found:
            state.tracker.observe(item)
            if isinstance(item, Usage):
                item.add_to(state.extra.setdefault("usage", {}))
            turns += isinstance(item, Prompt) and item.agent is None
            data = cleaner.clean(item)
            data["ln"], data["sha"] = line.number, line.sha256
            if ids:
                data["ids"] = ids
            data, text = cleaner.fitted(data, limit)
            stored.append(data)
            texts.append(text)
        items += len(stored)
        packer.add(line.number, stored, texts)
        if adapter.append_only and offset - job.offset >= job.budget:
            more = True
            break
    partial = source.path.stat().st_size - offset if adapter.append_only and not more else 0
    counts = Counter(state.extra.get("redactions", {}))
    counts.update(redactor.counts)
    state.extra["redactions"] = dict(counts)
    state.extra["truncated"] = state.extra.get("truncated", 0) + cleaner.truncated
    state.extra["items"] = state.extra.get("items", 0) + items
    return Outcome(
        packer.closed,
        packer.tail(),
        state,
        offset,
        line_no,
        prefix,
        max(partial, 0),
        items,
        turns,
        lines,
        Counter(redactor.counts),
        cleaner.truncated,
        state.skipped - skipped,
        state.opaque - opaque,
        more,
    )


def _fed(parser: Parser, line: RawLine) -> list[Item]:
    """The items of one line; none when the record holds fields of types its adapter does
    not take (a list where a string goes): the line is skipped and counted ``malformed``,
    and the rest of the file is read (decision 0113)."""
    try:
        return parser.feed(line)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError):
        parser.state.skipped["malformed"] += 1
        return []


def read_slim(job: ReadJob) -> Outcome:
    """:func:`read_slice` for a worker process: its parts come back as their JSON alone
    (:meth:`Part.slim`), half the bytes to pickle and no dicts to rebuild."""
    out = read_slice(job)
    out.closed = [part.slim() for part in out.closed]
    out.tail = out.tail.slim() if out.tail is not None else None
    return out


def watch_parent(pid: int) -> None:
    """In a worker process: end it when process ``pid`` (the ingest) is gone, so that a
    killed ingest leaves no reader behind."""

    def watch() -> None:
        while True:
            time.sleep(_WATCH_SECONDS)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # the pid was reused by another user's process
                os._exit(1)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def clean_line(line: RawLine, redactor: Redactor) -> RawLine:
    """``line`` with its record redacted (every string, keys included) and its provenance
    hash: the raw bytes' sha256 when nothing was redacted, else the sha256 of the redacted
    record's canonical JSON — never a function of a secret (decision 0019)."""
    if line.data is None:
        sha = hashlib.sha256(line.raw).hexdigest()
        return RawLine(line.number, line.start, line.end, line.raw, line.data, sha)
    before = sum(redactor.counts.values())
    data = redactor.record(line.raw, line.data)
    if data is line.data or sum(redactor.counts.values()) == before:
        sha = hashlib.sha256(line.raw).hexdigest()
        return RawLine(line.number, line.start, line.end, line.raw, line.data, sha)
    digest = hashlib.sha256(dumps(data).encode("utf-8", "surrogatepass")).hexdigest()
    return RawLine(line.number, line.start, line.end, line.raw, data, digest)
