"""A source as bytes or records: its size and mtime, its lines from a byte offset, its fingerprints.

A transcript file is read by bytes (:func:`~lifeline.sessions.adapters.port.iter_lines`; a
``.json`` file is one document, hence one line); a session kept in a database (a
``SourceFile`` with a ``key``) by its adapter's records, its stamp standing for the
file's size and mtime.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from lifeline.sessions.adapters.fields import parse_json
from lifeline.sessions.adapters.port import Adapter, RawLine, RowAdapter, SourceFile, iter_lines

__all__ = ["Stat", "fingerprints", "lines_of", "stat_of"]

_WINDOW = 4096


def fingerprints(path: Path, offset: int) -> tuple[str, str]:
    with path.open("rb") as handle:
        head = handle.read(min(_WINDOW, offset))
        handle.seek(max(0, offset - _WINDOW))
        tail = handle.read(min(_WINDOW, offset))
    return hashlib.sha256(head).hexdigest(), hashlib.sha256(tail).hexdigest()


@dataclass(frozen=True, slots=True)
class Stat:
    st_size: int
    st_mtime_ns: int


def stat_of(source: SourceFile) -> tuple[int, int]:
    """Size and mtime of a file; a database's session: its stamp (read at discovery)."""
    if source.key:
        return source.stamp
    stat = source.path.stat()
    return stat.st_size, stat.st_mtime_ns


def lines_of(adapter: Adapter, source: SourceFile, offset: int, number: int) -> Iterator[RawLine]:
    """The file's complete lines; a ``.json`` file is one document, hence one line; a
    database's session: its records, as its adapter reads them."""
    if source.key:
        yield from cast(RowAdapter, adapter).records(source)
        return
    path = source.path
    if path.suffix != ".json":
        yield from iter_lines(path, offset, number)
        return
    raw = path.read_bytes()
    try:
        data = parse_json(raw)
    except ValueError:
        data = None
    yield RawLine(1, 0, len(raw), raw, data)
