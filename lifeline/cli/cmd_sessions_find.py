"""`lifeline sessions usage` (tokens and cost) and `lifeline sessions search` (messages,
ranked): both read the sessions index, brought up to date first (docs/sessions.md)."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from lifeline.cli.common import Commands, add_json_option, home_of, positive_int, print_json
from lifeline.cli.sessions_line import open_sessions_line
from lifeline.errors import ConfigError
from lifeline.sessions.finder import opened_index, parse_since, search
from lifeline.sessions.index import SessionIndex
from lifeline.sessions.messages import ROLES
from lifeline.sessions.model import Tool
from lifeline.sessions.prices import load_prices
from lifeline.sessions.scope import project_scope
from lifeline.sessions.usage import GROUPS, UsageLine, UsageReport, usage_report
from lifeline.store.port import Store
from lifeline.wording import count, one_line

__all__ = ["register_find"]

_TOOLS = [t.value for t in Tool]
_SINCE = "only from this time on: a date (2026-11-30), an ISO time (UTC) or N days (7d)"


def register_find(inner: Commands, parent: argparse.ArgumentParser) -> None:
    q = inner.add_parser(
        "usage",
        parents=[parent],
        help="tokens and cost per session, day, model, project or tool",
        description="Token usage as the transcripts recorded it (input, cached input, cache "
        "writes, output, of which reasoning), and its cost where the price table knows the "
        "model: a dated table shipped with lifeline, extended or overridden by "
        ".lifeline/prices.json or --prices FILE. Models without a price show tokens only.",
    )
    q.add_argument("--by", choices=list(GROUPS), default="day", help="one row per (default: day)")
    q.add_argument("--since", help=_SINCE)
    q.add_argument("--tool", choices=_TOOLS, help="only this agent tool")
    q.add_argument("--scope", help="only this project's sessions ('.' for this project's)")
    q.add_argument("--prices", type=Path, metavar="FILE", help="a price table (JSON) to apply")
    add_json_option(q)
    q.set_defaults(func=cmd_usage)

    q = inner.add_parser(
        "search",
        parents=[parent],
        help="messages and tool calls matching words, ranked (BM25)",
        description="Search the redacted messages of every session (prompts, replies, "
        "reasoning, tool calls and results, errors). Each hit names its session and the "
        "--offset at which `lifeline sessions show ID --json --offset N` opens it.",
    )
    q.add_argument("query", metavar="QUERY", help="words to look for")
    q.add_argument("--tool", choices=_TOOLS, help="only this agent tool")
    q.add_argument("--since", help=_SINCE)
    q.add_argument("--role", choices=ROLES, help="only messages of this role")
    q.add_argument("--session", metavar="ID", help="only this session (id, prefix or tool's id)")
    q.add_argument("--limit", type=positive_int, default=20, help="at most N hits (default 20)")
    add_json_option(q)
    q.set_defaults(func=cmd_search)


@asynccontextmanager
async def _index(args: argparse.Namespace) -> AsyncIterator[tuple[Store, SessionIndex]]:
    store, _settings = await open_sessions_line(args)
    try:
        async with opened_index(store) as index:
            yield store, index
    finally:
        await store.close()


def _row(name: str, line: UsageLine, width: int) -> str:
    t = line.tokens
    cost = f"{line.cost:,.2f}" + ("*" if line.unpriced else "")
    return (
        f"{name[:width]:<{width}} {line.sessions:>8} {t.input:>13,} {t.cached:>13,}"
        f" {t.cache_write:>11,} {t.output:>11,} {t.reasoning:>10,} {t.total:>14,} {cost:>10}"
    )


def _print_usage(report: UsageReport, since: str | None, before: int) -> None:
    """``before``: how many sessions have usage recorded before ``since`` (none after it)."""
    if not report.lines and since is not None and before:
        print(
            f"no recorded token usage since {since.replace('T', ' ')} UTC; "
            f"{count(before, 'session has', 'sessions have')} usage from before then: "
            "widen --since, or leave it out"
        )
        return
    if not report.lines:
        print("no recorded token usage; ingest sessions with `lifeline sessions ingest`")
        return
    width = {"session": 72, "project": 40, "model": 28}.get(report.by, 12)
    print(
        f"{report.by:<{width}} {'sessions':>8} {'input':>13} {'cached':>13} {'cache write':>11}"
        f" {'output':>11} {'reasoning':>10} {'total':>14} {report.currency:>10}"
    )
    for line in report.lines:
        name = f"{line.key[:12]}  {line.label}" if report.by == "session" else line.label
        print(_row(name, line, width))
    print(_row("total", report.total, width))
    print(f"prices as of {report.prices_as_of}, per million tokens")
    if report.total.unpriced:
        names = ", ".join(f"{m} ({n:,} tokens)" for m, n in sorted(report.total.unpriced.items()))
        print(
            f"* no price known for {names}: tokens only, not in the cost; "
            "add them to .lifeline/prices.json (docs/sessions.md)"
        )


async def cmd_usage(args: argparse.Namespace) -> int:
    home = home_of(args)
    extra = [p for p in (home.prices_path,) if p.exists()]
    prices = load_prices(*extra, *([args.prices] if args.prices else []))
    since = parse_since(args.since)
    project = project_scope(home.root) if args.scope == "." else args.scope
    async with _index(args) as (_store, index):
        report = usage_report(
            index, prices, by=args.by, since=since, tool=args.tool, project=project
        )
        before = 0
        if since is not None and not report.lines and not args.json:
            every = usage_report(index, prices, by=args.by, tool=args.tool, project=project)
            before = every.total.sessions
    if args.json:
        print_json(report.as_json())
    else:
        _print_usage(report, since, before)
    return 0


async def cmd_search(args: argparse.Namespace) -> int:
    since = parse_since(args.since)
    if not args.query.strip():
        raise ConfigError("give words to search for, e.g. `lifeline sessions search 'rate limit'`")
    async with _index(args) as (store, index):
        session = None
        if args.session:
            from lifeline.sessions.catalogue import Catalogue

            session = (await Catalogue(store).load()).resolve(args.session).header_id
        hits = await search(
            store,
            index,
            args.query,
            tool=args.tool,
            since=since,
            role=args.role,
            session=session,
            limit=args.limit,
        )
    if args.json:
        print_json([h.as_json() for h in hits])
        return 0
    if not hits:
        print(f"no message matches {args.query!r}")
        return 0
    for h in hits:
        when = (h.ts or "")[:16].replace("T", " ")
        role = f"{h.role}:{h.name}" if h.name and h.role.startswith("tool") else h.role
        print(f"{h.session[:12]} +{h.offset:<5} {when:<16} {h.tool:<6} {role:<24} {h.score:.2f}")
        print(f"    {one_line(h.excerpt)}")
        print(
            f"    {one_line(h.title[:70])}  (show: lifeline sessions show {h.session[:12]} --json "
            f"--offset {h.offset} --limit 1)"
        )
    return 0
