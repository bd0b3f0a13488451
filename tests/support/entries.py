"""Entries for tests: one call with the fields a test cares about, the rest fixed."""

from __future__ import annotations

from collections.abc import Iterator

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


def reasons_chain(n: int, batch: int = 2_000) -> Iterator[list[Entry]]:
    """``n`` decisions of ~4 KB in a chain, ``batch`` at a time (lines whose size a
    memory test can feel)."""
    parent: tuple[str, ...] = ()
    for start in range(0, n, batch):
        out = []
        for i in range(start, min(n, start + batch)):
            entry = Entry.create(
                ts=f"2026-01-01T00:{i // 3600 % 60:02d}:{i // 60 % 60:02d}.{i % 60:06d}Z",
                kind="decision",
                summary=f"decision {i}",
                body=f"{i} " + "words of the reasons " * 200,
                parents=parent,
            )
            parent = (entry.id,)
            out.append(entry)
        yield out
