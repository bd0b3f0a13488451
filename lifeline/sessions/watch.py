"""Watching transcripts: ingest whatever changed, every few seconds, until told to stop.

Polling, not inotify: one ``stat`` per known file per pass is cheap (the source ledger
answers "unchanged" without reading), works the same on every OS and inside containers,
and a pass that finds nothing writes nothing. Used by ``lifeline sessions watch`` and by
``lifeline-mesh serve --sessions``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from lifeline.sessions.ingest import FileResult, Ingester
from lifeline.sessions.service import Found, ingest_sources

__all__ = ["watch"]


async def watch(
    ingester: Ingester,
    find: Callable[[], list[Found]],
    scope: str | None,
    stop: asyncio.Event,
    interval: float,
    announce: Callable[[FileResult], None] | None = None,
) -> None:
    """Ingest whatever changed every ``interval`` seconds until ``stop`` is set."""

    def report(done: int, total: int, result: FileResult | None) -> None:
        if result is not None and announce and result.outcome not in ("unchanged", "empty"):
            announce(result)

    while not stop.is_set():
        await ingest_sources(ingester, find(), scope=scope, progress=report)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)
