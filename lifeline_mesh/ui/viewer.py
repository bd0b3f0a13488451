"""The viewer's state for one project: its lines (opened on first use, kept open), the
background audit and witness times, and how pages are linked (served or static).

Lines are opened without creating anything (``create=False``) and looked up again on each
request, so a line a peer sends after start-up appears at once. On a hub process root the
lines are in the hub's database: the viewer reads a copy of its own, brought up to date
before each page (ui/hub_copy.py). A line's first copy is a pass over the line (about a
minute at a million entries): it runs as a task of its own, started by the warm-up or the
first page that needs it, and a page waits :data:`PATIENCE` seconds for it at most, then
answers how far the copy is (:class:`LinePreparing`, a page that reloads itself) instead of
holding the browser, and every other page, for the whole pass. An entry's body is rendered
in a thread, one at a time (:meth:`Viewer.body_html`): on the loop, 70 bodies of brackets
opened at once held every other page for ~29 s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from markupsafe import Markup

from lifeline.errors import LifelineError
from lifeline.lines import DEFAULT_LINE, validate_line_name
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.ui.audit_cache import AuditCache, WitnessCache
from lifeline_mesh.ui.hub_copy import HubCopy, LinePreparing
from lifeline_mesh.ui.markdown import render_markdown
from lifeline_mesh.ui.reader import LineReader

__all__ = ["PATIENCE", "Viewer"]

log = logging.getLogger(__name__)

PATIENCE = 3.0  # seconds a page waits for a hub line's first copy before saying how far it is


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
    _copying: dict[str, asyncio.Task[SqliteStore]] = field(default_factory=dict, init=False)
    _rendering: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)  # one body

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

    async def reader(self, line: str, *, wait: bool = False) -> LineReader:
        """The open reader of ``line`` (NotFound when there is no such line). On a hub root,
        while the line's first copy is made: LinePreparing after :data:`PATIENCE` seconds,
        unless ``wait`` (the warm-up, a static copy)."""
        name = validate_line_name(line)
        if self._hub is not None and name not in self._readers:
            await self._first_copy(name, wait or self.static)
        async with self._lock:
            found = self._readers.get(name)
            if found is None:
                if self._hub is not None:
                    copying = self._copying.pop(name, None)
                    store = await (copying or self._hub.open(name))
                else:
                    path = self.home.line_path(name, must_exist=True)
                    store = await SqliteStore.open(path, create=False)
                found = LineReader(name, store)
                self._readers[name] = found
            elif self._hub is not None:
                await self._hub.refresh(name, found.store)
            return found

    async def _first_copy(self, name: str, wait: bool) -> None:
        """The first copy of hub line ``name``, started if no one has: waited for whole
        with ``wait``, else for :data:`PATIENCE` seconds, then LinePreparing."""
        assert self._hub is not None
        task = self._copying.get(name)
        if task is None:
            self.home.require_line(name)  # no such line: NotFound now, not from the task
            task = asyncio.get_running_loop().create_task(self._hub.open(name))
            self._copying[name] = task
        if wait:
            await asyncio.shield(task)
            return
        done, _ = await asyncio.wait({task}, timeout=PATIENCE)  # the task goes on after
        if not done:
            raise LinePreparing(name, *self._hub.progress.get(name, (0, 0)))

    async def body_html(self, text: str) -> Markup:
        """An entry body as HTML (ui/markdown.py), rendered in a thread while the loop serves
        other pages; one body at a time, so that thread never takes the loop's turn twice."""
        async with self._rendering:
            return await asyncio.to_thread(render_markdown, text)

    async def warm_up(self) -> None:
        """Read every line once in the background (see LineReader.warm_up)."""
        for name in self.lines():
            try:
                await (await self.reader(name, wait=True)).warm_up()
            except LifelineError as exc:  # the page that reads it will say what is wrong
                log.warning("viewer: could not read line %s ahead: %s", name, exc)

    def start_warm_up(self) -> None:
        self._warming = asyncio.get_running_loop().create_task(self.warm_up())

    async def close(self) -> None:
        tasks = [t for t in (self._warming, *self._copying.values()) if t is not None]
        for task in tasks:
            task.cancel()  # nothing for a task already done
        await asyncio.gather(*tasks, return_exceptions=True)
        for task in self._copying.values():
            if task.done() and not task.cancelled() and task.exception() is None:
                await task.result().close()
        self._copying.clear()
        await self.audit.stop()
        await self.witness.stop()
        for reader in self._readers.values():
            await reader.close()
        self._readers.clear()
        if self._hub is not None:
            self._hub.close()
