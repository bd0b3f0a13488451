"""Per-session wrappers around reconciled sets: the reader role.

* :class:`SetWrapper` delegates everything but ``admit``; the notary's check of received
  entries is one too (``notary/notarized_set.py``).
* :class:`ReceiveOnly` lets a peer without write access receive but never send us items,
  whether it called us or we dialed it.
* :class:`SendNothing` is the reader's own side: it offers nothing, so its sessions only
  receive (what it wrote locally stays local) instead of being refused.
* :func:`refusing_items`: the session's channel, on which the peer's first ``Items`` for
  a :class:`ReceiveOnly` set is refused as it arrives, before anything of it is parsed
  or held: orphans (never stored, so never refused at ``admit``) and cross-line parents
  cost the node nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lifeline.errors import LocalProtocolError, PermissionDenied
from lifeline_mesh.recon.frames import Frame, Items
from lifeline_mesh.recon.sets import ItemCodec, ParsedItem, SetSummary, Snapshot
from lifeline_mesh.sync.driver_types import Channel
from lifeline_mesh.sync.port import (
    Accompanied,
    AdmitResult,
    FetchResult,
    ReconSet,
    RunKey,
    Running,
    RunResult,
    Summarizing,
)

__all__ = ["ReceiveOnly", "SendNothing", "SetWrapper", "refusing_items"]


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

    def runs(self) -> bool:
        inner = self._inner_set
        return isinstance(inner, Running) and inner.runs()

    async def fetch_run(self, after: RunKey | None, limit: int) -> RunResult:
        inner = self._inner_set
        if not isinstance(inner, Running):
            raise LocalProtocolError(f"the {self.name} set is not read in runs")
        return await inner.fetch_run(after, limit)


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

    def runs(self) -> bool:
        return False  # nothing to send: a peer wanting all of it gets the usual nothing

    async def admit(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AdmitResult:
        return await self._inner_set.admit(items, externals)


def refusing_items(
    channel: Channel, set_names: Callable[[], Sequence[str]], sets: Sequence[ReconSet]
) -> Channel:
    """``channel``, refusing the peer's items for the sets that take none (``ReceiveOnly``;
    ``set_names()``: the session's sets, by index); ``channel`` itself when all take them."""
    refusals = {s.name: s.reason for s in sets if isinstance(s, ReceiveOnly)}
    return _RefusingItems(channel, set_names, refusals) if refusals else channel


class _RefusingItems:
    def __init__(
        self, channel: Channel, set_names: Callable[[], Sequence[str]], refusals: dict[str, str]
    ) -> None:
        self._channel = channel
        self._set_names = set_names
        self._refusals = refusals

    @property
    def bytes_sent(self) -> int:
        return self._channel.bytes_sent

    @bytes_sent.setter
    def bytes_sent(self, value: int) -> None:
        self._channel.bytes_sent = value

    @property
    def bytes_received(self) -> int:
        return self._channel.bytes_received

    @bytes_received.setter
    def bytes_received(self, value: int) -> None:
        self._channel.bytes_received = value

    async def send(self, frame: Frame) -> None:
        await self._channel.send(frame)

    async def recv(self) -> Frame | None:
        frame = await self._channel.recv()
        if isinstance(frame, Items) and (frame.items or frame.externals):
            names = self._set_names()
            name = names[frame.set_index] if 0 <= frame.set_index < len(names) else ""
            reason = self._refusals.get(name)
            if reason is not None:
                what = (
                    f"{len(frame.items)} {name}" if frame.items else f"cross-line parents of {name}"
                )
                raise PermissionDenied(f"refusing {what} from the peer: {reason}")
        return frame
