"""The change feed of a database of lines: which lines another hub process (or this one)
just wrote, heard through PostgreSQL ``LISTEN``/``NOTIFY``.

Every write that changes a line's set (pg_writes.append_locked) sends ``NOTIFY
lifeline_lines, '<version>:<line name>'`` inside its own transaction, so the notification
is delivered only when the write commits, and never for a write rolled back.
:class:`LineListener` holds one dedicated connection (not one of the pool's: a pooled
connection is lent to sessions and its listeners would go with it) that listens on that
channel and hands each notified line to ``on_lines``.

Notifications sent while no connection listens are lost, so the listener also keeps each
line's ``version`` (bumped by every such write): after it (re)connects it reads every
line's version and reports those that moved while it was away, and it does the same
every ``recheck`` seconds, which also finds a connection that died without a word.
A connection that fails is dialled again with back-off; the feed keeps going all along.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

import asyncpg

__all__ = ["CHANNEL", "LineListener", "notify_sql"]

log = logging.getLogger(__name__)

CHANNEL = "lifeline_lines"
APPLICATION = "lifeline line listener"  # its connection in pg_stat_activity
RECHECK_S = 30.0  # the safety net: every line's version compared this often
RETRY_S = (0.2, 0.5, 1.0, 2.0, 5.0)  # reconnect back-off, then every 5 s


def notify_sql(update: str) -> str:
    """``update`` (an ``UPDATE lines … WHERE line_id = $1``) as one statement that also
    notifies the line's change, delivered at commit."""
    return (
        f"WITH changed AS ({update} RETURNING version, name) "
        f"SELECT pg_notify('{CHANNEL}', version || ':' || name) FROM changed"
    )


class LineListener:
    """Reports lines changed in the database at ``dsn`` until :meth:`run` is cancelled."""

    def __init__(
        self,
        dsn: str,
        on_lines: Callable[[list[str]], None],
        *,
        recheck: float = RECHECK_S,
        connect: Callable[[str], Any] | None = None,
    ) -> None:
        self.dsn = dsn
        self._on_lines = on_lines
        self._recheck = recheck
        self._connect = connect or (
            lambda dsn: asyncpg.connect(
                dsn, timeout=10, server_settings={"application_name": APPLICATION}
            )
        )
        self._versions: dict[str, int] | None = None  # None: nothing read yet (baseline)
        self._lost = asyncio.Event()
        self.connects = 0  # connections made so far (status, tests)
        self.notified = 0  # notifications received so far
        self.listening = asyncio.Event()  # set while a connection listens
        self.server_pid: int | None = None  # the listening connection's server process

    async def run(self) -> None:
        failures = 0
        while True:
            conn: asyncpg.Connection[Any] | None = None
            try:
                conn = await self._connect(self.dsn)
                assert conn is not None
                self._lost.clear()
                conn.add_termination_listener(lambda _c: self._lost.set())
                await conn.add_listener(CHANNEL, self._heard)
                self.server_pid = conn.get_server_pid()
                self.connects += 1
                if failures:
                    log.info("listening for line changes in the database again")
                failures = 0
                self.listening.set()
                await self._compare(conn)  # what moved while nobody listened
                while not self._lost.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self._recheck):
                            await self._lost.wait()
                    if not self._lost.is_set():
                        await self._compare(conn)
                raise ConnectionError("the listening connection was closed")
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ConnectionError) as exc:
                self.listening.clear()
                failures += 1
                level = logging.WARNING if failures == 1 else logging.DEBUG
                log.log(level, "line changes in the database not heard (retrying): %s", exc)
            finally:
                self.listening.clear()
                if conn is not None and not conn.is_closed():
                    with contextlib.suppress(Exception):
                        await asyncio.shield(conn.close(timeout=2))
            await asyncio.sleep(RETRY_S[min(failures, len(RETRY_S)) - 1])

    def _heard(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        """A notification: ``'<version>:<line>'`` (the line's version after the write)."""
        self.notified += 1
        version, _, name = str(payload).partition(":")
        if self._versions is not None and version.isdigit():
            self._versions[name] = max(int(version), self._versions.get(name, 0))
        self._report([name])

    async def _compare(self, conn: asyncpg.Connection[Any]) -> None:
        rows = await conn.fetch("SELECT name, version FROM lines")
        now = {str(name): int(version) for name, version in rows}
        before, self._versions = self._versions, now
        if before is None:
            return  # the baseline: nothing to report
        moved = [name for name, version in now.items() if before.get(name) != version]
        if moved:
            self._report(moved)

    def _report(self, lines: Iterable[str]) -> None:
        names = sorted(set(lines))
        try:
            self._on_lines(names)
        except Exception:  # a subscriber's failure never stops the feed
            log.exception("reporting changed lines %s failed", names)
