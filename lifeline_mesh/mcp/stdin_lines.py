"""The MCP client's lines, read from stdin on the event loop so that Ctrl-C stops the server.

The SDK's stdio transport reads stdin with a blocking ``readline`` in a worker thread. A
cancelled task group waits for that thread, and the thread waits for the client's next line:
while the client kept stdin open, SIGINT never stopped `lifeline-mesh mcp` (only SIGKILL
did). Here a pipe, socket or terminal is watched by the event loop and read without
blocking, so cancelling the read takes effect at once. Standard input the loop cannot watch
(a regular file, the null device: reads that never wait long) is left to the SDK's reader.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["StdinLines", "stdin_lines"]

CHUNK_BYTES = 64 * 1024  # read per wake-up; a longer line takes several


class StdinLines:
    """The lines of ``fd`` (a non-blocking descriptor), each with its newline, decoded as
    the SDK decodes them (UTF-8, undecodable bytes replaced)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = bytearray()

    def __aiter__(self) -> StdinLines:
        return self

    async def __anext__(self) -> str:
        searched = 0
        while (end := self._pending.find(b"\n", searched)) < 0:
            searched = len(self._pending)
            chunk = await self._read()
            if not chunk:  # end of input: what is left is the last line
                if not self._pending:
                    raise StopAsyncIteration
                end = len(self._pending) - 1
                break
            self._pending += chunk
        line = bytes(self._pending[: end + 1])
        del self._pending[: end + 1]
        return line.decode("utf-8", errors="replace")

    async def _read(self) -> bytes:
        loop = asyncio.get_running_loop()
        while True:
            try:
                return os.read(self._fd, CHUNK_BYTES)
            except BlockingIOError:
                pass
            readable = loop.create_future()
            loop.add_reader(self._fd, _settle, readable)
            try:
                await readable
            finally:
                loop.remove_reader(self._fd)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():  # the loop may report the descriptor again before the wake-up
        future.set_result(None)


def _watchable_stdin(loop: asyncio.AbstractEventLoop) -> int | None:
    """A private duplicate of fd 0 the loop can watch, or None."""
    try:
        fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)  # above 0-2, not passed to children
    except OSError:  # no stdin at all: the SDK's reader reports it
        return None
    try:
        loop.add_reader(fd, lambda: None)
    except (OSError, ValueError):  # e.g. epoll refuses regular files and /dev/null (EPERM)
        os.close(fd)
        return None
    loop.remove_reader(fd)
    return fd


@asynccontextmanager
async def stdin_lines() -> AsyncIterator[StdinLines | None]:
    """The lines of standard input read on the event loop, or None when the loop cannot
    watch stdin. While open, fd 0 reads the null device (as under the SDK's own claim of
    stdin), so a child process cannot take the client's bytes; it is restored on exit."""
    fd = _watchable_stdin(asyncio.get_running_loop())
    if fd is None:
        yield None
        return
    # O_NONBLOCK belongs to the open file, which a terminal shares with the shell: restore it.
    was_blocking = os.get_blocking(fd)
    try:
        os.set_blocking(fd, False)
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        yield StdinLines(fd)
    finally:
        os.dup2(fd, 0)
        os.set_blocking(fd, was_blocking)
        os.close(fd)
