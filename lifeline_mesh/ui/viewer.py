"""The viewer's state for one project: its lines (opened on first use, kept open), the
background audit and witness times, and how pages are linked (served or static).

Lines are opened without creating anything (``create=False``) and looked up again on each
request, so a line a peer sends after start-up appears at once. On a hub process root the
lines are in the hub's database: the viewer reads a copy of its own, brought up to date
before each page (ui/hub_copy.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from lifeline.errors import LifelineError
from lifeline.lines import DEFAULT_LINE, validate_line_name
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.ui.audit_cache import AuditCache, WitnessCache
from lifeline_mesh.ui.hub_copy import HubCopy
from lifeline_mesh.ui.reader import LineReader

__all__ = ["Viewer"]

log = logging.getLogger(__name__)


@dataclass
class Viewer:
    home: NodeHome
    static: bool = False
    token: str | None = None
    on_link: Callable[[str], None] | None = None  # the static export collects links here
    audit: AuditCache = field(init=False)
    witness: WitnessCache = field(init=False)
    _readers: dict[str, LineReader] = field(default_factory=dict, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _warming: asyncio.Task[None] | None = field(default=None, init=False)
    _hub: HubCopy | None = field(default=None, init=False)  # a hub root's copies of its lines

    def __post_init__(self) -> None:
        self.audit = AuditCache(self.home)
        self.witness = WitnessCache(self.home)
        if self.home.lines.url is not None:
            self._hub = HubCopy(self.home)

    def lines(self) -> list[str]:
        return self.home.line_names()

    def default_line(self) -> str | None:
        names = self.lines()
        if DEFAULT_LINE in names:
            return DEFAULT_LINE
        return names[0] if names else None

    async def reader(self, line: str) -> LineReader:
        """The open reader of ``line`` (NotFound when there is no such line)."""
        name = validate_line_name(line)
        async with self._lock:
            found = self._readers.get(name)
            if found is None:
                if self._hub is not None:
                    store = await self._hub.open(name)
                else:
                    path = self.home.line_path(name, must_exist=True)
                    store = await SqliteStore.open(path, create=False)
                found = LineReader(name, store)
                self._readers[name] = found
            elif self._hub is not None:
                await self._hub.refresh(name, found.store)
            return found

    async def warm_up(self) -> None:
        """Read every line once in the background (see LineReader.warm_up)."""
        for name in self.lines():
            try:
                await (await self.reader(name)).warm_up()
            except LifelineError as exc:  # the page that reads it will say what is wrong
                log.warning("viewer: could not read line %s ahead: %s", name, exc)

    def start_warm_up(self) -> None:
        self._warming = asyncio.get_running_loop().create_task(self.warm_up())

    async def close(self) -> None:
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._warming
        await self.audit.stop()
        await self.witness.stop()
        for reader in self._readers.values():
            await reader.close()
        self._readers.clear()
        if self._hub is not None:
            self._hub.close()
