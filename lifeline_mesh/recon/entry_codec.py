"""The entries set, pure part: how a raw entry is parsed and admitted (DESIGN §5 Admission).

A raw entry is its compact JSON (``Entry.to_json``). Admission recomputes the id from the
content and applies the size caps of ``lifeline.validate.check_admissible``; the version is
the ``ts`` (outside the id), the dependencies are the parents.
"""

from __future__ import annotations

from lifeline.entry import Entry
from lifeline.validate import DEFAULT_LIMITS, Limits, check_admissible
from lifeline_mesh.recon.sets import ParsedItem

__all__ = ["ENTRIES", "EntryCodec", "entry_version"]

ENTRIES = "entries"


def entry_version(entry: Entry) -> bytes:
    return entry.ts.encode("ascii")


class EntryCodec:
    """Parses and admits raw entries; raises an InvalidEntry subclass on a bad one."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits

    def parse(self, raw: bytes) -> ParsedItem:
        entry = Entry.from_json(raw, check=False)
        check_admissible(entry, self.limits)  # recomputes the id: IdMismatch when altered
        return ParsedItem(
            id=bytes.fromhex(entry.id),
            version=entry_version(entry),
            deps=tuple(bytes.fromhex(p) for p in entry.parents),
            raw=raw,
            value=entry,
        )
