"""The adapter port: one per agent tool, all streaming a transcript line by line.

An adapter knows where its tool keeps sessions (:meth:`Adapter.discover`), what a file's
native session id is, and how to turn one raw line into normalized items
(:meth:`Parser.feed`). Parsers are resumable: their whole state is a small JSON-able dict
(:meth:`Parser.snapshot`), so an ingest can stop at a line boundary and the next one can
continue from that byte offset without reading the file again.

The shared rules of every format live here: a line that is not JSON (or nests deeper than
:data:`~lifeline.sessions.adapters.fields.MAX_DEPTH`) is skipped and counted, and a lone
surrogate in one becomes U+FFFD; a last line without its newline is not consumed (a live
file is being written); a record type nobody knows becomes an
:class:`~lifeline.sessions.model.Opaque` item and is counted; nothing makes a whole session
fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lifeline.sessions.adapters.fields import parse_json
from lifeline.sessions.model import Item, SessionFacts, Tool
from lifeline.sessions.status import Tracker

__all__ = [
    "READ_BLOCK",
    "Adapter",
    "ParseState",
    "Parser",
    "RawLine",
    "RowAdapter",
    "SourceFile",
    "iter_lines",
]

READ_BLOCK = 1 << 20


@dataclass(frozen=True, slots=True)
class RawLine:
    """One complete line of a transcript: where it is, its bytes, its JSON (or None)."""

    number: int  # 1-based
    start: int  # byte offset of its first byte
    end: int  # byte offset just past its newline
    raw: bytes
    data: Any  # the parsed JSON value (redacted once ingest has cleaned it), or None
    sha256: str = ""  # of the line as stored: see lifeline.sessions.ingest.ingester.clean_line

    @property
    def json_object(self) -> dict[str, Any] | None:
        return self.data if isinstance(self.data, dict) else None


def iter_lines(path: Path, start: int = 0, number: int = 0) -> Iterator[RawLine]:
    """Complete lines of ``path`` from byte ``start`` (line ``number`` + 1), streamed.

    Memory stays at one block plus one line. A last line without a newline is not yielded:
    the caller sees where the complete lines stop and counts the rest as a partial line.
    """
    with path.open("rb") as handle:
        handle.seek(start)
        pending = b""
        offset = start
        while True:
            block = handle.read(READ_BLOCK)
            if not block:
                return
            pending += block
            cut = 0
            while True:
                nl = pending.find(b"\n", cut)
                if nl < 0:
                    break
                raw = pending[cut : nl + 1]
                number += 1
                yield RawLine(number, offset, offset + len(raw), raw, _json(raw))
                offset += len(raw)
                cut = nl + 1
            pending = pending[cut:]


def _json(raw: bytes) -> Any:
    text = raw.strip()
    if not text:
        return None
    try:
        return parse_json(text)
    except ValueError:  # not JSON, or nested deeper than MAX_DEPTH: skipped and counted
        return None


@dataclass
class ParseState:
    """What a parser carries from line to line; serialisable at any line boundary."""

    facts: dict[str, Any] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
    opaque: Counter[str] = field(default_factory=Counter)
    tracker: Tracker = field(default_factory=Tracker)
    extra: dict[str, Any] = field(default_factory=dict)  # the adapter's own small state

    def snapshot(self) -> dict[str, Any]:
        return {
            "facts": self.facts,
            "skipped": dict(self.skipped),
            "opaque": dict(self.opaque),
            "tracker": self.tracker.snapshot(),
            "extra": self.extra,
        }

    @classmethod
    def restore(cls, data: dict[str, Any]) -> ParseState:
        return cls(
            facts=dict(data.get("facts", {})),
            skipped=Counter(data.get("skipped", {})),
            opaque=Counter(data.get("opaque", {})),
            tracker=Tracker.restore(data.get("tracker", {})),
            extra=dict(data.get("extra", {})),
        )

    def session_facts(self) -> SessionFacts:
        return SessionFacts.model_validate(self.facts)

    def fact(self, name: str, value: Any, *, first: bool = False) -> None:
        """Record a fact; ``first``: keep the earliest value seen."""
        if value is None or value == "":
            return
        if first and self.facts.get(name) is not None:
            return
        self.facts[name] = value


class Parser(Protocol):
    """Turns lines into items; ``state`` is everything it remembers."""

    state: ParseState

    def feed(self, line: RawLine) -> list[Item]: ...


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A transcript file found on disk, with its tool and its name in the tool's layout.

    A tool that keeps its sessions in a database (Cursor's ``state.vscdb``, Forge's
    ``.forge.db``) has one source per session: the database's ``path`` and the session's
    ``key`` in it, with ``stamp`` standing for a file's size and mtime (what changes when
    the session does: read at discovery, compared by the next ingest without reading the
    session) and ``folder`` the project folder when the database says it apart from the
    session. Its adapter is a :class:`RowAdapter`.
    """

    tool: Tool
    path: Path
    source: str  # e.g. "<slug>/<id>.jsonl" — the provenance name, never absolute
    key: str = ""  # a session inside a database file; "" for a file per session
    stamp: tuple[int, int] = (0, 0)  # (size, mtime_ns) of a keyed session
    folder: str | None = None  # the project folder of a keyed session, when known apart

    def ledger_path(self) -> str:
        """The name the source ledger keeps it under: the canonical path, and the key."""
        real = str(self.path.resolve())
        return f"{real}#{self.key}" if self.key else real


class Adapter(Protocol):
    """One agent tool: where its sessions are, and how to read one."""

    tool: Tool
    # True: the file only grows (Claude, Codex) and can be read from a byte offset;
    # False: it is replayed whole whenever it changes (Gemini's upsert log, legacy JSON).
    append_only: bool

    def default_roots(self, env: dict[str, str], home: Path) -> list[Path]: ...

    def discover(self, root: Path) -> Iterator[SourceFile]: ...

    def identify(self, path: Path) -> SourceFile | None:
        """The source for one file given by the user, or None when it is not ours."""
        ...

    def native_id(self, source: SourceFile, first: RawLine | None) -> str: ...

    def parser(self, source: SourceFile, state: ParseState | None) -> Parser: ...

    def whole(
        self, source: SourceFile, state: ParseState, lines: Iterator[RawLine]
    ) -> Iterator[tuple[RawLine, list[Item]]]:
        """For replayed formats: the session's items (from ``lines``, the file's cleaned
        lines) grouped by the line that last wrote them (append-only adapters may raise
        NotImplementedError)."""
        ...


class RowAdapter(Adapter, Protocol):
    """A tool whose sessions are rows of a database (``SourceFile.key`` set): replayed whole
    (``append_only`` False) from the records :meth:`records` reads, each a
    :class:`RawLine` numbered from 1 whose bytes are the record's JSON."""

    def records(self, source: SourceFile) -> Iterator[RawLine]: ...

    def project_folder(self, source: SourceFile) -> str | None:
        """The session's working folder (for the project filter), or None."""
        ...
