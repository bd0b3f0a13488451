"""Where a project's lines live: the port, its SQLite-files adapter, and the hub binding.

A project's lines are SQLite files under ``.lifeline/`` (:class:`FileLines`, a laptop) or
lines of a PostgreSQL database (:class:`~lifeline.store.pg_lines.PgLines`, a hub process
root: ``.lifeline/mesh/hub.json`` names the database, docs/hub.md). Which one is chosen once,
when the :class:`~lifeline.home.Home` first needs it, and kept on the home; every command
opens lines through ``home.lines`` and never asks again which backend it is on (decision
0060).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Hashable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from lifeline.errors import ConfigError, NotFound
from lifeline.fsutil import read_private
from lifeline.lines import validate_line_name
from lifeline.store.port import Store

if TYPE_CHECKING:
    from lifeline.store.sqlite import SqliteStore

__all__ = ["ChangeWatch", "FileLines", "LineFolder", "LineSource", "hub_url"]


class ChangeWatch(Protocol):
    """A line's change token, asked before each use of what was computed from it."""

    async def token(self) -> Hashable | None:
        """Equal tokens: no process changed the line between the two asks (None: unknown)."""
        ...

    def close(self) -> None:
        """Let go of what the watch holds open."""
        ...


class LineSource(Protocol):
    """The lines of one project, wherever they are kept."""

    @property
    def url(self) -> str | None:
        """The database holding the lines, or None: files of ``.lifeline/``."""
        ...

    @property
    def files(self) -> FileLines | None:
        """These lines as SQLite files under ``.lifeline/`` (None: a database's), for
        work done in a line file's SQL; its stores are typed as such."""
        ...

    def where(self, name: str) -> str:
        """Where line ``name`` lives, for messages."""
        ...

    def names(self) -> list[str]:
        """The lines present, sorted."""
        ...

    def open(self, name: str, *, create: bool = False) -> AbstractAsyncContextManager[Store]:
        """Line ``name``, open for the block; NotFound when it does not exist unless
        ``create``."""
        ...

    async def open_kept(self, name: str) -> Store:
        """Existing line ``name``, open until the store's ``close()`` (a reader kept across
        steps of one command)."""
        ...

    async def require_intact(self, store: Store, name: str) -> None:
        """Refuse to write to line ``name`` (open as ``store``) when its storage is damaged
        (a line file failing SQLite's check; a database server keeps its own)."""
        ...

    def change_watch(self, name: str) -> ChangeWatch:
        """How line ``name`` tells that any process changed it (lifeline/store/change.py);
        NotFound when it does not exist."""
        ...

    async def close(self) -> None:
        """Let go of what the source holds open (a database pool)."""
        ...


class LineFolder(Protocol):
    """Where a project keeps its line files (``lifeline.home.Home``, which holds the source
    it chose: so this module names no type of the home's)."""

    @property
    def root(self) -> Path: ...

    def line_path(self, name: str, *, must_exist: bool = False) -> Path: ...

    def file_line_names(self) -> list[str]: ...

    def prepare(self) -> None: ...


class FileLines:
    """One SQLite file per line under ``.lifeline/`` (``Home.line_path``)."""

    url: str | None = None

    def __init__(self, home: LineFolder) -> None:
        self.home = home

    @property
    def files(self) -> FileLines:
        return self

    def where(self, name: str) -> str:
        return str(self.home.line_path(name))

    def names(self) -> list[str]:
        return self.home.file_line_names()

    @asynccontextmanager
    async def open(self, name: str, *, create: bool = False) -> AsyncIterator[SqliteStore]:
        from lifeline.store.sqlite import SqliteStore

        path = self.home.line_path(validate_line_name(name), must_exist=not create)
        if create:
            self.home.prepare()
        store = await SqliteStore.open(path, create=create)
        try:
            yield store
        finally:
            await store.close()

    async def require_intact(self, store: Store, name: str) -> None:
        from lifeline.store.sqlite_check import require_intact

        await require_intact(self.home.line_path(name), name)  # its file, on a reader's own

    async def open_kept(self, name: str) -> SqliteStore:
        from lifeline.store.sqlite import SqliteStore

        return await SqliteStore.open(self.home.line_path(name, must_exist=True), create=False)

    def change_watch(self, name: str) -> ChangeWatch:
        from lifeline.store.change import SqliteChangeWatch

        return SqliteChangeWatch(self.home.line_path(validate_line_name(name), must_exist=True))

    async def close(self) -> None:
        return None


def hub_url(path: Path) -> str | None:
    """The database URL a hub process root's ``hub.json`` names, or None without one."""
    if not path.exists():
        return None
    try:
        data = json.loads(read_private(path))
        store = data["store"]
        if not isinstance(store, str):
            raise TypeError("store is not a string")
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{path} is damaged ({exc}); run `lifeline-mesh hub init --store URL` again"
        ) from exc
    return store


def missing_line(home: LineFolder, name: str, known: list[str]) -> NotFound:
    """The one-line error for a line that is not there."""
    return NotFound(
        f"line {name!r} does not exist under {home.root} (lines: {', '.join(known) or 'none'}); "
        f"create it with `lifeline --line {name} init`"
    )
