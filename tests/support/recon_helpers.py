"""Builders shared by the reconciliation tests: entry chains and a toy opaque set."""

from __future__ import annotations

import hashlib
from collections import deque
from datetime import UTC, datetime, timedelta

from lifeline.entry import Entry, format_ts
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.frames import Effect, Hello, LoadSnapshot, LoadSummary
from lifeline_mesh.recon.session import Session
from lifeline_mesh.recon.sets import ParsedItem, Snapshot
from lifeline_mesh.testing.pair import MemorySet

_BASE = datetime(2026, 1, 1, tzinfo=UTC)


def chain(n: int, tag: str, parent: str | None = None, body: str = "") -> list[Entry]:
    """``n`` entries, each the child of the previous one (the first of ``parent``)."""
    out: list[Entry] = []
    prev = parent
    for k in range(n):
        e = Entry.create(
            # Monotonic times: a child dated before its parent is refused as backdated.
            ts=format_ts(_BASE + timedelta(seconds=k)),
            kind="note",
            summary=f"{tag}-{k}",
            body=body,
            parents=(prev,) if prev else (),
        )
        out.append(e)
        prev = e.id
    return out


def entry_set(entries: list[Entry] = ()) -> MemorySet:  # type: ignore[assignment]
    s = MemorySet(EntryCodec())
    for e in entries:
        s.add_raw(e.to_json())
    return s


class BlobCodec:
    """An opaque set: the id is sha256 of the bytes, no version, no dependencies."""

    def parse(self, raw: bytes) -> ParsedItem:
        return ParsedItem(hashlib.sha256(raw).digest(), b"", (), raw)


def blob_set(blobs: list[bytes]) -> MemorySet:
    s = MemorySet(BlobCodec())
    for b in blobs:
        s.add_raw(b)
    return s


def open_responder(session: Session, hello: Hello, snap: Snapshot | None = None) -> list[Effect]:
    """Feed a responder the peer's hello and load set 0's snapshot (``snap``, or empty) at
    once, as the driver does when the first frame about the set arrives; summaries are
    answered "not kept". Returns the other effects (the responder's hello)."""
    out: list[Effect] = []
    todo = deque(session.receive(hello, 0.0))
    while todo:
        eff = todo.popleft()
        if isinstance(eff, LoadSummary):
            todo.extend(session.summary_loaded(eff.set_index, None, 0.0))
        elif not isinstance(eff, LoadSnapshot):
            out.append(eff)
    session.snapshot_loaded(0, snap if snap is not None else Snapshot.empty(), 0.0)
    return out
