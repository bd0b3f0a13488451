"""Finding transcript files and ingesting a set of them: what the CLI, the watcher and the
node call. Knows the adapters, the tools' standard folders, and the project filter."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import multiprocessing
import os
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

from lifeline.home import Home
from lifeline.ledger import Ledger
from lifeline.plugins import load_append_hooks
from lifeline.sessions.adapters.claude import ClaudeAdapter
from lifeline.sessions.adapters.codex import CodexAdapter
from lifeline.sessions.adapters.cursor import CURSOR_DB, CursorAdapter
from lifeline.sessions.adapters.forge import FORGE_DB, ForgeAdapter
from lifeline.sessions.adapters.gemini import GeminiAdapter, gemini_project_root
from lifeline.sessions.adapters.port import Adapter, RowAdapter, SourceFile
from lifeline.sessions.config import SessionSettings
from lifeline.sessions.ingest.ingester import Ingester
from lifeline.sessions.ingest.reading import watch_parent
from lifeline.sessions.ingest.report import FileResult, IngestReport, why_unreadable
from lifeline.sessions.ingest.sources import SourceLedger
from lifeline.sessions.model import Tool
from lifeline.sessions.scope import project_hashes, scope_for, scope_matches

__all__ = [
    "ADAPTERS",
    "Found",
    "default_roots",
    "default_sources",
    "in_scope",
    "ingest_sources",
    "open_ingester",
    "peek_cwd",
    "sources_in",
]

ADAPTERS: dict[Tool, Adapter] = {
    Tool.CLAUDE: ClaudeAdapter(),
    Tool.CODEX: CodexAdapter(),
    Tool.GEMINI: GeminiAdapter(),
    Tool.CURSOR: CursorAdapter(),
    Tool.FORGE: ForgeAdapter(),
}
# databases holding many sessions, by file name: given to ingest, each is expanded into
# its sessions (``discover``)
_DATABASES = {CURSOR_DB: Tool.CURSOR, FORGE_DB: Tool.FORGE}
Found = tuple[Adapter, SourceFile]
_CWD = re.compile(rb'"(?:cwd|directories)"\s*:\s*\[?\s*"((?:[^"\\]|\\.)+)"')
_CONTEXT_DIR = re.compile(rb"Workspace Directories:(?:\\n|\n)\s*- ((?:[^\\\n\"])+)")
_REMOTE = re.compile(rb'"repository_url"\s*:\s*"((?:[^"\\]|\\.)+)"')
_PROJECT_HASH = re.compile(rb'"projectHash"\s*:\s*"([0-9a-f]{64})"')
_PEEK = 64 * 1024
log = logging.getLogger(__name__)


def _adapters(tools: Iterable[Tool] | None) -> list[Adapter]:
    wanted = set(tools) if tools else set(ADAPTERS)
    return [a for t, a in ADAPTERS.items() if t in wanted]


def default_roots(
    tools: Iterable[Tool] | None = None,
    env: dict[str, str] | None = None,
    home: Path | None = None,
) -> list[tuple[Adapter, Path]]:
    """The tools' standard folders for this user, each with its tool's adapter."""
    env = dict(os.environ) if env is None else env
    home = home or Path(env.get("HOME") or Path.home())
    return [(a, root) for a in _adapters(tools) for root in a.default_roots(env, home)]


def default_sources(
    tools: Iterable[Tool] | None = None,
    env: dict[str, str] | None = None,
    home: Path | None = None,
) -> list[Found]:
    """Every transcript in the tools' standard folders for this user."""
    found: list[Found] = []
    seen: set[Path] = set()
    for adapter, root in default_roots(tools, env, home):
        for source in adapter.discover(root):
            real = Path(source.ledger_path())
            if real not in seen:
                seen.add(real)
                found.append((adapter, source))
    return found


def _guess(path: Path, tools: Sequence[Adapter]) -> Adapter | None:
    """The adapter for one file: by the tool asked for, else by its name and first line."""
    if len(tools) == 1:
        return tools[0]
    if path.name in _DATABASES:
        return next((a for a in tools if a.tool is _DATABASES[path.name]), None)
    parts = set(path.parts)
    if path.name.startswith("rollout-") or ".codex" in parts:
        return ADAPTERS[Tool.CODEX]
    if "agent-transcripts" in parts:
        return ADAPTERS[Tool.CURSOR]
    if ".gemini" in parts or path.parent.name == "chats":
        return ADAPTERS[Tool.GEMINI]
    if ".claude" in parts or "claude" in parts:
        return ADAPTERS[Tool.CLAUDE]
    try:  # a file outside the tools' folders: its first line says
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return None
    if b'"session_meta"' in head:
        return ADAPTERS[Tool.CODEX]
    if b'"projectHash"' in head or path.suffix == ".json" or "/chats/" in path.as_posix():
        return ADAPTERS[Tool.GEMINI]
    return ADAPTERS[Tool.CLAUDE]


def sources_in(paths: Iterable[Path], tools: Iterable[Tool] | None = None) -> list[Found]:
    """The transcripts at ``paths`` (files, or folders searched for .jsonl/.json files)."""
    adapters = _adapters(tools)
    found: list[Found] = []
    for path in paths:
        files = (
            sorted(
                p
                for p in path.rglob("*")
                if (p.suffix in (".jsonl", ".json") or p.name in _DATABASES) and p.is_file()
            )
            if path.is_dir()
            else [path]
        )
        for file in files:
            if file.name in _DATABASES:  # a database: each of its sessions
                adapter = _guess(file, adapters)
                if adapter is not None:
                    found.extend((adapter, s) for s in adapter.discover(file))
                continue
            if file.name.endswith(".meta.json") or file.name in (
                "session_index.jsonl",
                "projects.json",
                "logs.json",
            ):
                continue
            adapter = _guess(file, adapters)
            source = adapter.identify(file) if adapter is not None else None
            if adapter is not None and source is not None:
                found.append((adapter, source))
    return found


def _head(source: SourceFile) -> bytes:
    try:
        with source.path.open("rb") as handle:
            return handle.read(_PEEK)
    except OSError:
        return b""


def _string(match: re.Match[bytes] | None) -> str | None:
    if match is None:
        return None
    try:
        value = json.loads(b'"' + match.group(1) + b'"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def peek_cwd(source: SourceFile) -> str | None:
    """The working folder a transcript names near its start (for the project filter); for
    Gemini, else the project folder its tool folder records (``.project_root``,
    ``projects.json``); a database's session: the folder its database records."""
    if source.key:
        return cast(RowAdapter, ADAPTERS[source.tool]).project_folder(source)
    if source.folder:  # known from where the file is (the Cursor CLI's project slug)
        return source.folder
    head = _head(source)
    found = _string(_CWD.search(head) or _CONTEXT_DIR.search(head))
    if found is None and source.tool is Tool.GEMINI:
        return gemini_project_root(source.path)
    return found


def in_scope(source: SourceFile, wanted: str, project_root: Path | None = None) -> bool:
    """Whether a transcript belongs to the project ``wanted``: by its folder, the
    repository it recorded (Codex: another checkout of the same remote is this project),
    or Gemini's ``projectHash`` (sha256 of the project's folder)."""
    if source.key:
        return scope_matches(scope_for(peek_cwd(source), None), wanted)
    head = _head(source)
    remote = _string(_REMOTE.search(head))
    if scope_matches(scope_for(peek_cwd(source), remote), wanted):
        return True
    digest = _PROJECT_HASH.search(head)
    return (
        digest is not None
        and project_root is not None
        and digest.group(1).decode() in project_hashes(project_root)
    )


async def ingest_sources(
    ingester: Ingester,
    found: Sequence[Found],
    *,
    scope: str | None = None,
    progress: Callable[[int, int, FileResult | None], None] | None = None,
    workers: int | None = None,
) -> IngestReport:
    """Ingest ``found``; ``scope``: only sessions of that project. When there is much to
    read (:data:`PARALLEL_BYTES`), files are read in ``workers`` processes (default: the
    CPUs, at most 2) while this one writes (decision 0068); else one file at a time. A
    source that cannot be ingested is skipped with a warning (logged, and in the report's
    ``failed`` and ``failures``); the others go on (decision 0113)."""
    report = IngestReport()
    total = len(found)
    todo: list[tuple[int, Found]] = []
    results: list[FileResult | None] = [None] * len(found)
    done = 0
    for index, (adapter, source) in enumerate(found):
        failed: FileResult | None = None
        try:
            outside = (
                scope is not None
                and not ingester.unchanged(adapter, source)
                and not in_scope(source, scope, ingester.project_root)
            )
        except Exception as exc:  # e.g. a database that cannot say its chat's folder
            results[index] = failed = FileResult(source, "failed", error=why_unreadable(exc))
            outside = False
        if outside or failed is not None:
            report.out_of_scope += outside
            done += 1
            if progress:
                progress(done, total, failed)
            continue
        todo.append((index, (adapter, source)))

    async def one(index: int, adapter: Adapter, source: SourceFile, pool: Executor | None) -> None:
        nonlocal done
        results[index] = result = await ingester.ingest(adapter, source, pool)
        done += 1
        if progress:
            progress(done, total, result)

    count = _workers(workers, ingester, [f for _, f in todo])
    if count < 2:
        for index, (adapter, source) in todo:
            await one(index, adapter, source, None)
    else:
        with _process_pool(count) as pool:
            slots = asyncio.Semaphore(count + 1)  # one more: a file is written while two read

            async def bounded(index: int, adapter: Adapter, source: SourceFile) -> None:
                async with slots:
                    await one(index, adapter, source, pool)

            async with asyncio.TaskGroup() as group:
                for index, (adapter, source) in todo:
                    group.create_task(bounded(index, adapter, source))
    for result in results:
        if result is not None:
            if result.outcome == "failed":
                log.warning("%s", result.warning())
            report.add(result)
    return report


PARALLEL_BYTES = 32 * 1024 * 1024  # less to read than this: one process reads it all


def _workers(wanted: int | None, ingester: Ingester, todo: Sequence[Found]) -> int:
    """``wanted`` when given, else 2 on a machine with 2 CPUs or more when there is much
    to read; 1 (no pool) for a single file."""
    if len(todo) < 2:
        return 1
    if wanted is not None:
        return wanted
    if (os.cpu_count() or 1) < 2:
        return 1
    size = 0
    for adapter, source in todo:
        if source.key or ingester.unchanged(adapter, source):  # a database: read in-process
            continue
        with contextlib.suppress(OSError):
            size += source.path.stat().st_size
        if size >= PARALLEL_BYTES:
            return 2
    return 1


def _process_pool(count: int) -> ProcessPoolExecutor:
    """Workers forked from a clean server process that imported the reader once (never
    from this one: it holds threads and open SQLite connections); each one ends itself
    when this process is gone (killed, it could not tell them)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["lifeline.sessions.ingest.reading"])
    return ProcessPoolExecutor(
        count, mp_context=context, initializer=watch_parent, initargs=(os.getpid(),)
    )


@asynccontextmanager
async def open_ingester(
    home: Home, line: str, settings: SessionSettings
) -> AsyncIterator[Ingester]:
    """The sessions line (created when missing), its source ledger, and an Ingester."""
    async with home.open_line(line, create=True) as store:
        sources = SourceLedger(home.sources_path, line)
        try:
            if await store.count() == 0 and sources.count():  # the line was deleted: start over
                sources.forget()
            ledger = Ledger(store, hooks=load_append_hooks(home), limits=home.limits())
            yield Ingester(
                ledger,
                sources,
                caps=settings.caps,
                patterns=settings.patterns,
                project_root=home.root,
            )
        finally:
            sources.close()
