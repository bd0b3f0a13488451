"""`lifeline sessions …`: ingest agent transcripts into the sessions line; list, show, watch.

The sessions line is ``sessions`` unless ``--line`` or ``sessions.line`` in
.lifeline/config.json names another (docs/sessions.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lifeline.cli.cmd_resume import register_into
from lifeline.cli.cmd_sessions_find import register_find
from lifeline.cli.common import (
    Commands,
    add_json_option,
    add_line_option,
    count_int,
    creates_project,
    global_options,
    home_of,
    print_json,
)
from lifeline.cli.sessions_line import open_catalogue, sessions_line_name
from lifeline.errors import ConfigError
from lifeline.sessions.catalogue import filter_sessions
from lifeline.sessions.config import DEFAULT_SESSIONS_LINE, load_session_settings
from lifeline.sessions.model import SessionStatus, Tool
from lifeline.sessions.render import header_lines, render_session, session_row
from lifeline.sessions.scope import project_scope
from lifeline.wording import count

if TYPE_CHECKING:  # the ingest machinery is imported by the commands that ingest, only:
    # `resume`, `list` and `show` start without it (bench/history/continuation-bundles.md)
    from lifeline.sessions.ingest.report import FileResult, IngestReport
    from lifeline.sessions.ingest.service import Found

__all__ = ["register"]

_TOOLS = [t.value for t in Tool]


def register(sub: Commands, top: argparse.ArgumentParser) -> None:
    # The global options, but a --line whose help names the sessions line's default.
    parent = global_options(line=False)
    add_line_option(
        parent,
        f"the sessions line (default: {DEFAULT_SESSIONS_LINE}, or sessions.line in "
        ".lifeline/config.json)",
    )
    p = sub.add_parser(
        "sessions",
        parents=[parent],
        help="agent sessions (Claude Code, Codex, Gemini, Cursor, Forge) as a line",
        description="Agent transcripts, redacted, in the line 'sessions' (or --line NAME, or "
        "sessions.line in .lifeline/config.json). See docs/sessions.md.",
    )
    inner = p.add_subparsers(dest="sessions_command", metavar="SUBCOMMAND")
    inner.required = True

    q = inner.add_parser(
        "ingest", parents=[parent], help="read transcripts into the sessions line (incremental)"
    )
    q.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="files or folders (default: the tools' standard folders); a Cursor state.vscdb "
        "or a .forge.db: each of its chats",
    )
    q.add_argument(
        "--tool", action="append", choices=_TOOLS, help="only this tool (repeatable; default: all)"
    )
    q.add_argument(
        "--all",
        action="store_true",
        help="every project's sessions (default: this project's scope only)",
    )
    add_json_option(q, "print the summary as JSON")
    q.set_defaults(func=cmd_ingest)
    creates_project(q)

    q = inner.add_parser("list", parents=[parent], help="the sessions in the line")
    q.add_argument("--scope", help="only this scope ('.' for this project's); see `show`")
    q.add_argument("--status", choices=[s.value for s in SessionStatus], help="only this status")
    q.add_argument("--tool", choices=_TOOLS, help="only this tool")
    add_json_option(q)
    q.set_defaults(func=cmd_list)

    q = inner.add_parser("show", parents=[parent], help="one session as a readable transcript")
    q.add_argument("id", metavar="ID", help="session id or prefix, or the tool's own session id")
    add_json_option(q, "the normalized session as JSON")
    q.add_argument("--offset", type=count_int, default=0, help="skip the first N items (--json)")
    q.add_argument("--limit", type=count_int, help="at most N items (--json)")
    q.set_defaults(func=cmd_show)

    q = inner.add_parser(
        "watch", parents=[parent], help="ingest as transcripts change (Ctrl-C stops)"
    )
    q.add_argument("--tool", action="append", choices=_TOOLS, help="only this tool (repeatable)")
    q.add_argument("--all", action="store_true", help="every project's sessions")
    q.add_argument(
        "--interval", type=float, default=2.0, help="seconds between looks at the files (default 2)"
    )
    q.set_defaults(func=cmd_watch)
    register_into(inner, parent)
    register_find(inner, parent)


def _found(args: argparse.Namespace) -> list[Found]:
    from lifeline.sessions.ingest.service import default_sources, sources_in

    tools = [Tool(t) for t in args.tool] if args.tool else None
    if getattr(args, "paths", None):
        missing = [str(p) for p in args.paths if not p.exists()]
        if missing:
            raise ConfigError(f"no such file or folder: {', '.join(missing)}")
        return sources_in(args.paths, tools)
    return default_sources(tools)


def _looked_in(args: argparse.Namespace) -> str:
    """For an ingest of the standard folders that found no transcript: where it looked,
    and how to point it at transcripts kept elsewhere."""
    from lifeline.sessions.ingest.service import default_roots

    home = Path.home()
    roots = [root for _adapter, root in default_roots([Tool(t) for t in args.tool or []])]
    there = [root for root in roots if root.exists()]
    shown = ", ".join(
        f"~/{root.relative_to(home)}" if root.is_relative_to(home) else str(root)
        for root in there or roots
    )
    where = f"none in {shown}" if there else f"none of the tools' folders exists ({shown})"
    return (
        f"no agent transcripts found: {where}; for transcripts kept elsewhere, "
        "give their files or folders: `lifeline sessions ingest PATH…`"
    )


class _Progress:
    """The ingest's bar (:class:`lifeline.cli.progress.Progress`), only on a terminal."""

    def __init__(self, enabled: bool) -> None:
        from lifeline.cli.progress import Progress

        self._bar = Progress("ingesting", enabled=enabled and sys.stderr.isatty())

    def __call__(self, done: int, total: int, result: FileResult | None) -> None:
        self._bar.update(done, total, result.source.path.name[:40] if result else "")
        if done == total:
            self._bar.close()


def _summary(report: IngestReport) -> str:
    lines = [
        f"{count(report.sessions, 'session')} ingested ({count(report.turns, 'turn')}, "
        f"{count(report.items, 'item')}, {count(report.entries, 'entry', 'entries')} written); "
        f"{report.unchanged} unchanged, {report.empty} empty"
        + (
            f", {report.out_of_scope} outside this project (use --all)"
            if report.out_of_scope
            else ""
        ),
    ]
    for label, counts in (
        ("skipped lines", report.skipped),
        ("unknown records", report.opaque),
        ("redactions", report.redactions),
    ):
        if counts:
            lines.append(f"{label}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    lines += [f"could not read {f}" for f in report.failures]
    return "\n".join(lines)


async def cmd_ingest(args: argparse.Namespace) -> int:
    from lifeline.sessions.ingest.service import ingest_sources, open_ingester

    home = home_of(args)
    settings = load_session_settings(home)
    found = _found(args)
    scope = None if (args.all or args.paths) else project_scope(home.root)
    async with open_ingester(home, sessions_line_name(args, settings), settings) as ingester:
        report = await ingest_sources(
            ingester, found, scope=scope, progress=_Progress(not args.json)
        )
    if args.json:
        print_json(report.as_json())
    else:
        print(_summary(report))
        if not found and not args.paths:
            print(_looked_in(args))
    return 0


async def cmd_list(args: argparse.Namespace) -> int:
    catalogue = await open_catalogue(args)
    try:
        scope = project_scope(home_of(args).root) if args.scope == "." else args.scope
        found = filter_sessions(
            catalogue.summaries(), scope=scope, status=args.status, tool=args.tool
        )
    finally:
        await catalogue.store.close()
    if catalogue.left_out:
        print(
            f"note: {count(catalogue.left_out, 'session header')} left out: not JSON, or of a tool"
            " this version does not read (a newer version wrote them?)",
            file=sys.stderr,
        )
    if args.json:
        print_json([s.model_dump(mode="json", exclude={"items"}) for s in found])
        return 0
    if not found:
        print("no sessions; ingest some with `lifeline sessions ingest`")
        return 0
    print(f"{'id':<12}  {'tool':<6} {'status':<11} {'turns':>5}  {'started':<16}  title")
    for s in found:
        print(session_row(s))
    return 0


async def cmd_show(args: argparse.Namespace) -> int:
    catalogue = await open_catalogue(args)
    try:
        session = await catalogue.session(args.id)
        children: dict[str, Any] = {}
        if not args.json:
            for stored in catalogue.sessions.values():
                agent = stored.status and stored.status.get("facts", {}).get("agent_id")
                parent = stored.status and stored.status.get("facts", {}).get("parent_session")
                if agent and parent == session.native_id:
                    children[str(agent)] = await catalogue.session(stored.header_id)
    finally:
        await catalogue.store.close()
    if args.json:
        end = None if args.limit is None else args.offset + args.limit
        page = session.model_copy(update={"items": session.items[args.offset : end]})
        print_json(page.model_dump(mode="json", exclude_none=True))
        return 0
    print("\n".join(header_lines(session)))
    print()
    for line in render_session(session, children.get):
        print(line)
    return 0


async def cmd_watch(args: argparse.Namespace) -> int:
    from lifeline.sessions.ingest.service import open_ingester
    from lifeline.sessions.ingest.watch import watch

    home = home_of(args)
    settings = load_session_settings(home)
    scope = None if args.all else project_scope(home.root)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    args.paths = []
    print(f"watching {'every project' if scope is None else scope}; Ctrl-C stops", flush=True)
    async with open_ingester(home, sessions_line_name(args, settings), settings) as ingester:
        await watch(ingester, lambda: _found(args), scope, stop, args.interval, _announce)
    print("stopped", flush=True)
    return 0


def _announce(result: FileResult) -> None:
    print(
        f"{result.outcome:<9} {result.source.source}: +{count(result.turns, 'turn')}, "
        f"+{count(result.items, 'item')}",
        flush=True,
    )
