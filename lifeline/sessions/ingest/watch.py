"""Watching transcripts: ingest whatever changed, every few seconds, until told to stop.

Polling, not inotify: one ``stat`` per known file per pass is cheap (the source ledger
answers "unchanged" without reading), works the same on every OS and inside containers,
and a pass that finds nothing writes nothing. Used by ``lifeline sessions watch`` and by
``lifeline-mesh serve --sessions``. A source that could not be ingested is tried again only
once it changes: its warning is given once, not every pass (decision 0113).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from lifeline.home import Home
from lifeline.sessions.adapters.port import SourceFile
from lifeline.sessions.adapters.source_io import stat_of
from lifeline.sessions.config import load_session_settings
from lifeline.sessions.ingest.ingester import Ingester
from lifeline.sessions.ingest.report import FileResult
from lifeline.sessions.ingest.service import Found, default_sources, ingest_sources, open_ingester
from lifeline.sessions.model import Tool
from lifeline.sessions.scope import project_scope

__all__ = ["watch", "watch_project"]


async def watch(
    ingester: Ingester,
    find: Callable[[], list[Found]],
    scope: str | None,
    stop: asyncio.Event,
    interval: float,
    announce: Callable[[FileResult], None] | None = None,
) -> None:
    """Ingest whatever changed every ``interval`` seconds until ``stop`` is set."""
    failed: dict[str, tuple[int, int]] = {}  # a source that failed, as it was then

    def report(done: int, total: int, result: FileResult | None) -> None:
        if result is not None and result.outcome == "failed":
            with contextlib.suppress(OSError):
                failed[result.source.ledger_path()] = stat_of(result.source)
        if result is not None and announce and result.outcome not in ("unchanged", "empty"):
            announce(result)

    while not stop.is_set():
        found = find()
        if failed:
            found = [f for f in found if not _as_it_failed(f[1], failed)]
        await ingest_sources(ingester, found, scope=scope, progress=report)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)


def _as_it_failed(source: SourceFile, failed: dict[str, tuple[int, int]]) -> bool:
    """Whether ``source`` failed and has not changed since."""
    seen = failed.get(source.ledger_path())
    if seen is None:
        return False
    try:
        return stat_of(source) == seen
    except OSError:
        return False


async def watch_project(
    home: Home,
    stop: asyncio.Event,
    *,
    every_project: bool = False,
    tools: list[Tool] | None = None,
    interval: float = 2.0,
    announce: Callable[[FileResult], None] | None = None,
) -> None:
    """Watch the tools' standard folders into the project's sessions line until ``stop``."""
    settings = load_session_settings(home)
    scope = None if every_project else project_scope(home.root)
    async with open_ingester(home, settings.line, settings) as ingester:
        await watch(ingester, lambda: default_sources(tools), scope, stop, interval, announce)
