"""Per-session wrappers around reconciled sets: the reader role.

* :class:`SetWrapper` delegates everything but ``admit``; the notary's check of received
  entries is one too (``notary/notarized_set.py``).
* :class:`ReceiveOnly` lets a peer without write access receive but never send us items,
  whether it called us or we dialed it.
* :class:`SendNothing` is the reader's own side: it offers nothing, so its sessions only
  receive (what it wrote locally stays local) instead of being refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from lifeline.errors import PermissionDenied
from lifeline_mesh.recon.sets import ItemCodec, ParsedItem, SetSummary, Snapshot
from lifeline_mesh.sync.port import (
    Accompanied,
    AdmitResult,
    FetchResult,
    ReconSet,
    Summarizing,
)

__all__ = ["ReceiveOnly", "SendNothing", "SetWrapper"]


class SetWrapper:
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

    async def ahead_of(self, ids: Sequence[bytes]) -> tuple[str, list[bytes]]:
        inner = self._inner_set
        return await inner.ahead_of(ids) if isinstance(inner, Accompanied) else ("", [])


class ReceiveOnly(SetWrapper):
    """The peer may read this line but not write it (a reader, DESIGN §7)."""

    def __init__(self, inner: ReconSet, reason: str) -> None:
        super().__init__(inner)
        self.reason = reason

    async def admit(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AdmitResult:
        if items:
            raise PermissionDenied(
                f"refusing {len(items)} {self.name} from the peer: {self.reason}"
            )
        return AdmitResult(0)


class SendNothing(SetWrapper):
    """This node is a reader: fetch nothing to send, admit what arrives."""

    async def fetch(self, ids: Sequence[bytes]) -> FetchResult:
        return FetchResult([], [])

    async def admit(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AdmitResult:
        return await self._inner_set.admit(items, externals)
