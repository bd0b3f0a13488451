"""The entry set of a session, checked by the notary as entries arrive.

:class:`NotarizedEntrySet` checks received entries against the attestations already held
(a ts the author never signed is refused) and counts what it admitted; the node signs one
state statement when the session ends if anything was (DESIGN §6, decision 0015).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from lifeline.entry import Entry
from lifeline_mesh.notary.port import Notary
from lifeline_mesh.recon.sets import ParsedItem
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.guards import SetWrapper
from lifeline_mesh.sync.port import Accompanied, AdmitResult

__all__ = ["NotarizedEntrySet"]


class NotarizedEntrySet(SetWrapper):
    def __init__(self, inner: EntrySet, notary: Notary) -> None:
        super().__init__(inner)
        self.inner = inner
        self.notary = notary
        self.admitted = 0  # entries newly stored in this session: a new state to witness
        # Signs that state (the node's: line -> the statements' bytes), for the closing round
        self.on_close: Callable[[str], Awaitable[Sequence[bytes]]] | None = None
        # The signatures that go ahead of the entries sent (node/signatures_ahead.py)
        self.ahead: Accompanied | None = None

    async def ahead_of(self, ids: Sequence[bytes]) -> tuple[str, list[bytes]]:
        return ("", []) if self.ahead is None else await self.ahead.ahead_of(ids)

    async def closing_items(self, line: str) -> Sequence[bytes]:
        if not self.admitted or self.on_close is None:
            return []
        return await self.on_close(line)

    async def admit(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AdmitResult:
        entries = [i.value for i in items if isinstance(i.value, Entry)]
        # One transaction per received batch: the check against the attestations held,
        # then the entries.
        declared = self.inner.externals_of(externals, entries)
        result = await self.notary.admit_entries(entries, declared)
        self.admitted += len(result.added)
        return AdmitResult(result.count, len(result.ts_lowered), result.refused)
