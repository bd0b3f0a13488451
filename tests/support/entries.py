"""Entries for tests: one call with the fields a test cares about, the rest fixed."""

from __future__ import annotations

from lifeline.entry import Entry


def make_entry(
    summary: str,
    parents: tuple[str, ...] = (),
    *,
    kind: str = "note",
    ts: str = "2026-01-01T00:00:00Z",
    body: str = "",
    dedup_key: str | None = None,
) -> Entry:
    return Entry.create(
        ts=ts,
        kind=kind,
        summary=summary,
        body=body,
        author="t",
        parents=parents,
        dedup_key=dedup_key,
    )
