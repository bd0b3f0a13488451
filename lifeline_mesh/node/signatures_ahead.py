"""The author signatures a session sends ahead of entries stored while it ran (decision 0106).

A session reads its sets one after another: the signatures (their summary, and their
snapshot when they differ), then the entries, whose snapshot may be loaded much later. A
local `lifeline log`, or another hub process, that stores an entry and its signature in
between would have the entry sent without its signature: the peer then holds it unsigned
— `verify` fails it on a signed line — until a later session. Entries and their signatures
are stored together (a local write) or the signatures first (a received batch), and rows
are numbered in the order writes commit; so every entry whose row is at or below the
line's highest row before the signatures were first read has its signature in what the
session read. The others are few — those written since — and their signatures are sent
ahead of them: one query per batch of entries sent, which finds no row after the mark in
the usual case.
"""

from __future__ import annotations

from collections.abc import Sequence

from lifeline_mesh.node.lines import NodeLine
from lifeline_mesh.notary.attestation_set import AttestationSet

__all__ = ["SignaturesAhead"]


class SignaturesAhead:
    """Marks ``line`` before ``authors`` is first read; sends the signatures of entries
    stored after the mark ahead of them."""

    def __init__(self, line: NodeLine, authors: AttestationSet) -> None:
        self.line, self.authors = line, authors
        self.mark: int | None = None
        authors.before_read = self.first_read

    async def first_read(self) -> None:
        if self.mark is None:
            self.mark = await self.line.write_mark()

    async def ahead_of(self, ids: Sequence[bytes]) -> tuple[str, list[bytes]]:
        """The raw author signatures (and any runner enrollment they need) of those of the
        entries ``ids`` stored after the mark; none before the signatures were read (that
        read comes later, and holds them)."""
        if self.mark is None:
            return self.authors.name, []
        later = await self.line.stored_after(self.mark, [i.hex() for i in ids])
        if not later:
            return self.authors.name, []
        signatures = await self.line.snapshot_reads().author_ids(later)
        if not signatures:
            return self.authors.name, []
        return self.authors.name, (await self.authors.fetch(signatures)).raws
