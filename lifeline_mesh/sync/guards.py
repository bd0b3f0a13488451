"""Per-session wrappers around reconciled sets: the notary's checks and the reader role.

* :class:`NotarizedEntrySet` checks received entries against the attestations already held
  (a ts the author never signed is refused) and counts what it admitted; the node signs one
  state statement when the session ends if anything was (DESIGN §6, decision 0015).
* :class:`ReceiveOnly` lets a caller without write access receive but never send us items.
* :class:`SendNothing` is the reader's own side: it offers nothing, so its sessions only
  receive (what it wrote locally stays local) instead of being refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from lifeline.entry import Entry
from lifeline.errors import PermissionDenied
from lifeline_mesh.notary.port import Notary
from lifeline_mesh.recon.sets import ItemCodec, ParsedItem, SetSummary, Snapshot
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.port import AdmitResult, FetchResult, ReconSet, Summarizing

__all__ = ["NotarizedEntrySet", "ReceiveOnly", "SendNothing"]


class _Wrapper:
    """Delegates everything but ``admit`` to the wrapped set."""

    def __init__(self, inner: ReconSet) -> None:
        self._inner_set = inner
        self.name = inner.name
        self.codec: ItemCodec = inner.codec

    async def snapshot(self) -> Snapshot:
        return await self._inner_set.snapshot()

    async def summary(self) -> SetSummary | None:
        inner = self._inner_set
        return await inner.summary() if isinstance(inner, Summarizing) else None

    async def fetch(self, ids: Sequence[bytes]) -> FetchResult:
        return await self._inner_set.fetch(ids)


class NotarizedEntrySet(_Wrapper):
    def __init__(self, inner: EntrySet, notary: Notary) -> None:
        super().__init__(inner)
        self.inner = inner
        self.notary = notary
        self.admitted = 0  # entries newly stored in this session: a new state to witness
        # Signs that state (the node's: line -> the statements' bytes), for the closing round
        self.on_close: Callable[[str], Awaitable[Sequence[bytes]]] | None = None

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
        result = await self.notary.admit_entries(entries, self.inner.externals_of(externals))
        self.admitted += len(result.added)
        return AdmitResult(result.count, len(result.ts_lowered))


class ReceiveOnly(_Wrapper):
    """The caller may read this line but not write it (a reader, DESIGN §7)."""

    def __init__(self, inner: ReconSet, reason: str) -> None:
        super().__init__(inner)
        self.reason = reason

    async def admit(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AdmitResult:
        if items:
            raise PermissionDenied(
                f"refusing {len(items)} {self.name} from the caller: {self.reason}"
            )
        return AdmitResult(0)


class SendNothing(_Wrapper):
    """This node is a reader: fetch nothing to send, admit what arrives."""

    async def fetch(self, ids: Sequence[bytes]) -> FetchResult:
        return FetchResult([], [])

    async def admit(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AdmitResult:
        return await self._inner_set.admit(items, externals)
