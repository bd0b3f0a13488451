"""How long a connection to our HTTP servers may wait, and how many may be open at once.

uvicorn closes a kept-alive connection 5 s after a response, but holds a connection that
has not finished sending a request head for ever: a client that connects and says nothing,
or trickles a header a byte at a time, keeps a socket and a file descriptor. 1,100 such
sockets used to stop the viewer (the process ran out of descriptors and accepted nobody).
:func:`server_config` serves both the viewer and `mcp --http` with uvicorn's h11 protocol
and two limits on top:

- **a header deadline**: a request head must be complete within
  :attr:`HttpLimits.header_timeout` of the connection (or of the previous response);
  otherwise the connection is closed. A request being answered (an MCP event stream
  included) is not idle and never cut.
- **a connection cap**: past :attr:`HttpLimits.max_connections`, a new connection closes
  the connection that has waited longest for a request; when every connection is busy
  with a request, the newcomer gets 503 and is closed. The newest client always gets its
  turn, so a flood of idle sockets cannot lock the page out.

TLS handshakes are not counted (asyncio ends one that stalls after 60 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.h11_impl import RequestResponseCycle as _Cycle

__all__ = ["DEFAULT_LIMITS", "HttpLimits", "server_config"]

log = logging.getLogger(__name__)

_BUSY_TEXT = b"every connection of this server is busy; try again shortly\n"
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_BUSY_TEXT), _BUSY_TEXT)
)


@dataclass(frozen=True, slots=True)
class HttpLimits:
    header_timeout: float = 10.0  # seconds to send a whole request head
    keep_alive: int = 5  # seconds a connection may idle after a response (uvicorn's)
    max_connections: int = 512  # open at once, and at most a quarter of our descriptors
    # Connections asyncio accepts in one go before any of them runs (and can be closed):
    # uvicorn's 2,048 would take a whole flood at once, past the descriptor limit.
    backlog: int = 128

    def for_this_process(self) -> HttpLimits:
        """These limits with the cap lowered to a quarter of the open-file limit (the rest
        is for the lines, the accept bursts and the rest of the process)."""
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY or soft // 4 >= self.max_connections:
            return self
        return replace(self, max_connections=max(16, soft // 4))


DEFAULT_LIMITS = HttpLimits()


class _LimitedH11(H11Protocol):
    """uvicorn's h11 protocol with the header deadline and the connection cap."""

    limits: ClassVar[HttpLimits] = DEFAULT_LIMITS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._waiting_since = self.loop.time()
        self._arm()
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request: armed after it
        if not self.transport.is_closing():
            self._waiting_since = self.loop.time()
            self._arm()

    def _idle(self) -> bool:
        """No request being answered: waiting for (the rest of) a request head."""
        cycle: _Cycle | None = self.cycle
        return cycle is None or cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        waited_for = self.cycle
        self._deadline = self.loop.call_later(
            self.limits.header_timeout, self._on_deadline, waited_for
        )

    def _disarm(self) -> None:
        deadline = getattr(self, "_deadline", None)
        if deadline is not None:
            deadline.cancel()
            self._deadline = None

    def _on_deadline(self, waited_for: _Cycle | None) -> None:
        self._deadline = None
        if self.cycle is waited_for and self._idle():  # no request head since it was armed
            self._close()

    def _close(self) -> None:
        if self.transport.is_closing():
            return
        if self.conn.our_state not in (h11.ERROR, h11.CLOSED):
            with contextlib.suppress(h11.LocalProtocolError):
                self.conn.send(h11.ConnectionClosed())
        self.transport.close()

    def _make_room(self) -> None:
        """Close the connection that has waited longest for a request, else refuse this one."""
        idle = [
            c
            for c in self.connections
            if isinstance(c, _LimitedH11) and c is not self and c._idle()
        ]
        idle = [c for c in idle if not c.transport.is_closing()]
        if idle:
            min(idle, key=lambda c: c._waiting_since)._close()
            return
        log.warning(
            "HTTP connection cap (%d) reached, every one busy: refused one",
            self.limits.max_connections,
        )
        self.transport.write(_BUSY)
        self._close()


def server_config(app: Any, limits: HttpLimits = DEFAULT_LIMITS, **kwargs: Any) -> uvicorn.Config:
    """A uvicorn configuration for ``app`` with ``limits`` (``kwargs``: TLS, logging...)."""
    limits = limits.for_this_process()
    protocol = type("LimitedH11", (_LimitedH11,), {"limits": limits})
    return uvicorn.Config(
        app,
        http=protocol,
        timeout_keep_alive=limits.keep_alive,
        backlog=limits.backlog,
        **kwargs,
    )
