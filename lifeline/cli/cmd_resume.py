"""`lifeline sessions resume` and `lifeline sessions unfinished`: continuation bundles and
lost work (docs/sessions.md, "Bundles"). Registered under `lifeline sessions`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lifeline.cli.common import Commands, add_json_option, home_of, print_json
from lifeline.cli.common import positive_int as _positive
from lifeline.cli.sessions_line import open_catalogue
from lifeline.fsutil import NewTree
from lifeline.sessions.bundles.bundle import PROVIDER_FORMATS
from lifeline.sessions.bundles.launch import LAUNCHERS, launch
from lifeline.sessions.bundles.resume import BundleRequest, NotReady, build_bundle
from lifeline.sessions.scope import project_scope
from lifeline.truth.budget import DEFAULT_BUDGET_CHARS, Budget
from lifeline.truth.decisions import decisions_in_force
from lifeline.wording import count, one_line

__all__ = ["NOT_READY", "register_into"]

NOT_READY = 3  # exit status: the answer is "not ready", with the reason


def register_into(inner: Commands, parent: argparse.ArgumentParser) -> None:
    q = inner.add_parser(
        "resume",
        parents=[parent],
        help="a continuation bundle for a session, or for this project's latest work",
        description="Distill a session — merged with the sessions of the same scope and "
        "topic — into a sized continuation bundle for a new session's first prompt. "
        "Exit status 3 when it is not ready to resume (the reason on stderr).",
    )
    q.add_argument("id", nargs="?", metavar="ID", help="session id or prefix, or native id")
    q.add_argument("--scope", help="resume the latest topic of this scope ('.': this project)")
    q.add_argument("--topic", help="with --scope: the topic slug (prefix) or bundle key")
    q.add_argument(
        "--exclude", action="append", default=[], metavar="SESSION", help="leave out (repeatable)"
    )
    q.add_argument("--single", action="store_true", help="only the session named, no merge")
    size = q.add_mutually_exclusive_group()
    size.add_argument(
        "--budget", type=_positive, help=f"limit in characters (default {DEFAULT_BUDGET_CHARS})"
    )
    size.add_argument("--budget-tokens", type=_positive, help="limit in estimated tokens")
    q.add_argument(
        "--format",
        choices=["md", "json", *PROVIDER_FORMATS],
        default="md",
        help="md (default), json, or the markdown in a provider's request shape",
    )
    q.add_argument(
        "--launch", choices=sorted(LAUNCHERS), help="start this tool with the bundle as prompt"
    )
    q.add_argument(
        "--no-worktree",
        action="store_true",
        help="leave out the working tree (git diff of the edited files since the start "
        "commit, when this machine has the scope's checkout): the bundle alone, the same "
        "on every node",
    )
    q.set_defaults(func=cmd_resume)

    q = inner.add_parser(
        "unfinished",
        parents=[parent],
        help="crashed, interrupted and abandoned sessions with their outstanding work, "
        "unconfirmed edits and last failure",
    )
    q.add_argument("--scope", help="only this scope ('.': this project)")
    add_json_option(q)
    q.set_defaults(func=cmd_unfinished)

    q = inner.add_parser(
        "export",
        parents=[parent],
        help="the sessions and one bundle per topic as an Open Knowledge Format v0.2 folder",
    )
    q.add_argument("--okf", type=Path, required=True, metavar="DIR", help="a new or empty folder")
    q.add_argument(
        "--budget-tokens", type=_positive, default=6000, help="each bundle's limit (default 6000)"
    )
    q.set_defaults(func=cmd_export)


def _scope(args: argparse.Namespace) -> str | None:
    return project_scope(home_of(args).root) if args.scope == "." else args.scope


async def cmd_resume(args: argparse.Namespace) -> int:
    if args.id is None and args.scope is None:
        args.scope = "."
    budget = (
        Budget(args.budget_tokens, "tokens")
        if args.budget_tokens is not None
        else Budget(args.budget or DEFAULT_BUDGET_CHARS, "chars")
    )
    req = BundleRequest(
        ref=args.id,
        scope=_scope(args),
        topic=args.topic,
        exclude=tuple(args.exclude),
        single=args.single,
        budget=budget,
        format="md" if args.launch else args.format,
        decisions=await decisions_in_force(home_of(args)),
        checkout_root=None if args.no_worktree else home_of(args).root,
    )
    catalogue = await open_catalogue(args)
    try:
        _, text = await build_bundle(catalogue, req)
    except NotReady as exc:
        sys.stdout.write(exc.text)
        print(f"lifeline: {exc}", file=sys.stderr)
        return NOT_READY
    finally:
        await catalogue.store.close()
    if args.launch:
        sys.stdout.flush()
        launch(args.launch, text)
    sys.stdout.write(text)
    return 0


async def cmd_unfinished(args: argparse.Namespace) -> int:
    from lifeline.sessions.bundles.unfinished import unfinished

    catalogue = await open_catalogue(args)
    try:
        found = await unfinished(catalogue, _scope(args))
    finally:
        await catalogue.store.close()
    if args.json:
        print_json([u.as_json() for u in found])
        return 0
    if not found:
        print("no unfinished sessions")
        return 0
    for u in found:
        s = u.session
        title = one_line(" ".join((s.facts.title or s.facts.first_prompt or "(untitled)").split()))[
            :60
        ]
        when = (s.facts.last_activity or "?")[:16].replace("T", " ")
        print(f"{s.id[:12]}  {s.tool.value:<6} {u.state:<11} {when:<16}  {title}")
        print(f"    {one_line(s.status.reason)}")
        for group, texts in u.outstanding.items():
            for text in texts[:5]:
                print(f"    {group.replace('_', ' ')}: {one_line(text[:100])}")
            if len(texts) > 5:
                print(f"    {group.replace('_', ' ')}: … {len(texts) - 5} more")
        for text in u.unconfirmed_edits[:10]:
            print(f"    unconfirmed edit: {one_line(text[:160])}")
        if len(u.unconfirmed_edits) > 10:
            print(f"    unconfirmed edit: … {len(u.unconfirmed_edits) - 10} more")
        if u.last_failure:
            print(f"    last failure: {one_line(u.last_failure[:300])}")
    return 0


async def cmd_export(args: argparse.Namespace) -> int:
    from lifeline.sessions.bundles.okf import export_okf

    out: Path = args.okf
    # before anything is read: a path that cannot be a new folder fails at once
    with NewTree(out) as tree:
        catalogue = await open_catalogue(args)
        try:
            report = await export_okf(catalogue, tree, Budget(args.budget_tokens, "tokens"))
        finally:
            await catalogue.store.close()
    print(
        f"{count(report.sessions, 'session')} and {count(report.bundles, 'bundle')} written "
        f"to {out} ({count(report.files, 'file')}, Open Knowledge Format 0.2)"
    )
    return 0
