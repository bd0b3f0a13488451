"""The project's home: the one owner of the ``<root>/.lifeline/`` layout.

::

    <root>/
      LIFELINE.md, LIFELINE.<line>.md   readable projections (safe to commit)
      .lifeline/
        .gitignore                      keeps the folder out of git (lifeline/ignore.py)
        config.json                     settings: size caps, sessions (optional)
        prices.json                     token prices for `sessions usage` (optional)
        <line>.db                       one SQLite file per line
        <line>.projection.json          the record of its last render (lifeline/projection/file.py)
        <line>.db.damaged-<time>        a damaged file `lifeline recover` set aside (integrity.py)
        sessions-sources.sqlite         the session importer's source ledger (never synced)
        <line>.sessions-index.sqlite    a sessions line's search and usage index (a cache)
        policy.json                     what MCP agents may write (lifeline_mesh/mcp/policy.py)
        mesh/, ci/                      the node's files (lifeline_mesh/home/node_home.py)
        mesh/hub.json                   a hub process root: its lines are in that database

Every entry point builds one :class:`Home` (the node's entry points a
:class:`lifeline_mesh.home.node_home.NodeHome`, which adds the node's files) and passes it
down; no other module names a file under ``.lifeline/``. The home also holds what it opened:
its line source (:attr:`Home.lines`: the line files, or a hub's database), chosen once from
``hub.json`` when first needed (decision 0060).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lifeline.errors import NotFound
from lifeline.fsutil import refuse_link
from lifeline.line_source import FileLines, LineSource, hub_url, missing_line
from lifeline.lines import DEFAULT_LINE, is_line_name, validate_line_name
from lifeline.store.port import Store
from lifeline.validate import Limits

__all__ = ["Home"]

LEDGER_DIR = ".lifeline"
SETTINGS_FILE = "config.json"
IGNORE_FILE = ".gitignore"
SOURCES_FILE = "sessions-sources.sqlite"
PRICES_FILE = "prices.json"
POLICY_FILE = "policy.json"
LINE_SUFFIX = ".db"
RENDER_RECORD_SUFFIX = ".projection.json"
HUB_BINDING = ("mesh", "hub.json")
SESSIONS_INDEX_SUFFIX = ".sessions-index.sqlite"


@dataclass(frozen=True, slots=True)
class Home:
    """One project: its root folder and what lives under ``.lifeline/``."""

    root: Path
    # What holds the lines: chosen once (``lines``), or given by the entry point (serve --store)
    source: LineSource | None = field(default=None, compare=False, repr=False)

    @classmethod
    def find(cls, start: Path) -> Home:
        """The nearest folder from ``start`` upward that holds ``.lifeline/``, as git finds
        ``.git``; the search stops at a repository's root (a folder with ``.git``) and at
        the filesystem root. ``start`` itself when none holds one (where `init` creates it)."""
        here = start.resolve()
        for folder in (here, *here.parents):
            if cls(folder).exists():
                return cls(folder)
            if (folder / ".git").exists():
                break
        return cls(start)

    # The layout.

    @property
    def dir(self) -> Path:
        """``<root>/.lifeline``."""
        return self.root / LEDGER_DIR

    def exists(self) -> bool:
        return self.dir.is_dir()

    @property
    def settings_path(self) -> Path:
        return self.dir / SETTINGS_FILE

    @property
    def ignore_path(self) -> Path:
        return self.dir / IGNORE_FILE

    @property
    def sources_path(self) -> Path:
        """The session importer's source ledger (local, never synced)."""
        return self.dir / SOURCES_FILE

    @property
    def prices_path(self) -> Path:
        """Token prices the user gives `sessions usage` (lifeline/sessions/prices.py)."""
        return self.dir / PRICES_FILE

    @property
    def policy_path(self) -> Path:
        """The agents' write policy, read by the MCP server (lifeline_mesh/mcp/policy.py);
        `lifeline init --agent` writes it (beside the lines: where lifeline-context kept it)."""
        return self.dir / POLICY_FILE

    def committable(self) -> set[str]:
        """Files under ``.lifeline/`` that belong in git, relative to the root (posix)."""
        return {self.relative(self.ignore_path), self.relative(self.settings_path)}

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # Lines.

    @property
    def hub_binding_path(self) -> Path:
        """A hub process root's database (``{"store": URL}``, 0600): its lines and its node's
        documents live there (docs/hub.md)."""
        return self.dir.joinpath(*HUB_BINDING)

    @property
    def lines(self) -> LineSource:
        """Where this project's lines live, chosen on first use and kept: the database a
        ``hub.json`` names, else the line files."""
        if self.source is None:
            url = hub_url(self.hub_binding_path)
            if url is None:
                chosen: LineSource = FileLines(self)
            else:
                from lifeline.ignore import refuse_tracked

                refuse_tracked(
                    self,
                    self.hub_binding_path,
                    "the database a repository names would take this project's entries",
                    "bind your own with `lifeline-mesh hub init --store URL`",
                )
                from lifeline.store.pg_lines import PgLines  # the driver only on a hub

                chosen = PgLines(url)
            object.__setattr__(self, "source", chosen)
        assert self.source is not None
        return self.source

    def line_path(self, name: str, *, must_exist: bool = False) -> Path:
        """The file of line ``name``."""
        path = self.dir / f"{validate_line_name(name)}{LINE_SUFFIX}"
        if must_exist and not self.exists():
            raise NotFound(
                f"no lifeline project under {self.root} (it holds no {LEDGER_DIR}/); "
                "create one with `lifeline init` in that folder"
            )
        if must_exist and not path.exists():
            refuse_link(path)  # a link leading nowhere: say so, not "no such line"
            raise missing_line(self, name, self.file_line_names())
        return path

    def require_line(self, name: str) -> None:
        """NotFound (saying how to create it) unless line ``name`` exists, wherever the
        lines live."""
        if self.lines.url is None:
            self.line_path(name, must_exist=True)
        elif validate_line_name(name) not in self.line_names():
            raise missing_line(self, name, self.line_names())

    def has_line(self, name: str) -> bool:
        return validate_line_name(name) in self.line_names()

    def line_names(self) -> list[str]:
        """The lines present, sorted."""
        return self.lines.names()

    def file_line_names(self) -> list[str]:
        """The lines present as files under ``.lifeline/``, sorted."""
        if not self.dir.is_dir():
            return []
        return sorted(p.stem for p in self.dir.glob(f"*{LINE_SUFFIX}") if is_line_name(p.stem))

    def db_files(self) -> list[Path]:
        """Every ``.db`` file under ``.lifeline/``, line name or not (a foreign project's
        files, e.g. lifeline-context's, are read by the importer)."""
        return sorted(self.dir.glob(f"*{LINE_SUFFIX}"))

    @staticmethod
    def render_record_path(line_file: Path) -> Path:
        """The record of a line's last render, beside its file (``<line>.projection.json``)."""
        return line_file.with_name(f"{line_file.stem}{RENDER_RECORD_SUFFIX}")

    @staticmethod
    def sessions_index_path(line_file: Path) -> Path:
        """A sessions line's search and usage index, beside its file
        (``<line>.sessions-index.sqlite``; lifeline/sessions/index.py): a cache."""
        return line_file.with_name(f"{line_file.stem}{SESSIONS_INDEX_SUFFIX}")

    @staticmethod
    def damaged_path(line_file: Path, stamp: str) -> Path:
        """Where ``lifeline recover`` keeps a damaged line file (``<line>.db.damaged-<time>``)."""
        return line_file.with_name(f"{line_file.name}.damaged-{stamp}")

    @staticmethod
    def recovering_path(line_file: Path) -> Path:
        """The new file ``lifeline recover`` builds before it takes the line's place."""
        return line_file.with_name(f".{line_file.name}.recovering")

    def projection_path(self, name: str) -> Path:
        """``LIFELINE.md`` for the default line, ``LIFELINE.<line>.md`` for the others."""
        if name == DEFAULT_LINE:
            return self.root / "LIFELINE.md"
        return self.root / f"LIFELINE.{validate_line_name(name)}.md"

    @asynccontextmanager
    async def open_line(self, name: str, *, create: bool = False) -> AsyncIterator[Store]:
        """Open line ``name`` wherever the lines live (:attr:`lines`); one that does not
        exist is NotFound unless ``create``. On line files, ``create`` makes ``.lifeline/``
        (with its ignore file) when missing."""
        async with self.lines.open(name, create=create) as store:
            yield store

    async def exists_in(self, line: str, entry_id: str) -> bool:
        """Whether ``entry_id`` is stored in line ``line`` (False when there is no such line)."""
        try:
            async with self.open_line(line) as store:
                return bool(await store.contains([entry_id]))
        except NotFound:
            return False

    def prepare(self) -> None:
        """Make ``.lifeline/`` (its owner's only: lifeline/file_modes.py), keep it out of git:
        a line git tracks is refused before anything is written into it."""
        from lifeline.file_modes import make_dir_private  # both use this module
        from lifeline.ignore import ensure_ignore_file, refuse_tracked_databases

        ensure_ignore_file(self)  # makes the folder 0700 when missing
        make_dir_private(self)
        refuse_tracked_databases(self)

    # Settings.

    def limits(self) -> Limits:
        """The size caps: defaults overridden by ``config.json``'s ``limits`` (read now)."""
        from lifeline.settings import read_limits  # settings.py parses; this module locates

        return read_limits(self.settings_path)
