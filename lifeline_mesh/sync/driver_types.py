"""The frame channel a session runs over (implemented by the gRPC adapters and tests)."""

from __future__ import annotations

from typing import Protocol

from lifeline_mesh.recon.frames import Frame

__all__ = ["Channel"]


class Channel(Protocol):
    """A bidirectional stream of frames; counts the payload bytes it carries."""

    bytes_sent: int
    bytes_received: int

    async def send(self, frame: Frame) -> None: ...

    async def recv(self) -> Frame | None:
        """The next frame, None when the peer closed; RemoteProtocolError on garbage."""
        ...
