"""`lifeline hooks install|uninstall|run`: the agent tools call us at session start and end.

``install`` writes the tool's own hook entries (docs/sessions.md, "Hooks"); the entries
run ``lifeline hooks run session-start|session-end --client NAME``, which read the tool's
JSON event on stdin. Start: print the project's context and, when this project has an
unfinished session, its bundle, as the tool's ``additionalContext``. End: ingest the
transcript named in the event. A hook never fails the tool: errors go to stderr, exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from lifeline.cli.common import Commands, creates_project
from lifeline.cli.stdin import read_stdin
from lifeline.errors import LifelineError
from lifeline.home import Home
from lifeline.lines import DEFAULT_LINE
from lifeline.sessions.bundles.resume import BundleRequest, NotReady, build_bundle
from lifeline.sessions.bundles.unfinished import unfinished
from lifeline.sessions.catalogue import Catalogue
from lifeline.sessions.config import load_session_settings
from lifeline.sessions.hooks import CLIENTS, client_of, config_path, plan_change, write_change
from lifeline.sessions.ingest.service import ingest_sources, open_ingester, sources_in
from lifeline.sessions.scope import project_scope
from lifeline.truth.budget import Budget
from lifeline.truth.decisions import decisions_in_force
from lifeline.truth.service import build_context

__all__ = ["apply_hooks", "register"]

_CONTEXT_CHARS = 12_000
_BUNDLE_CHARS = 12_000


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "hooks",
        parents=[parent],
        help="let Claude Code, Codex and Gemini call lifeline at session start and end",
        description="Write (or remove) lifeline's entries in an agent tool's hook config: at "
        "session start the tool gets the project's context and the bundle of an unfinished "
        "session; at session end its transcript is ingested. See docs/sessions.md.",
    )
    inner = p.add_subparsers(dest="hooks_command", metavar="SUBCOMMAND")
    inner.required = True
    for name, text in (("install", "add the entries"), ("uninstall", "remove ours only")):
        q = inner.add_parser(name, parents=[parent], help=f"{text} (idempotent; shows the diff)")
        q.add_argument("client", choices=sorted(CLIENTS), help="the agent tool")
        q.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
        q.add_argument(
            "--config-dir",
            type=Path,
            help="the tool's config folder (default: $CLAUDE_CONFIG_DIR, $CODEX_HOME, or ~/.…)",
        )
        q.set_defaults(func=cmd_install if name == "install" else cmd_uninstall)
        creates_project(q)
    q = inner.add_parser(
        "run", parents=[parent], help="what the installed entries run (reads the event on stdin)"
    )
    q.add_argument("event", choices=["session-start", "session-end"])
    q.add_argument("--client", choices=sorted(CLIENTS), required=True)
    q.set_defaults(func=cmd_run)


def hook_command(event: str, client: str) -> str:
    exe = shutil.which("lifeline")
    prefix = shlex.quote(exe) if exe else f"{shlex.quote(sys.executable)} -m lifeline"
    return f"{prefix} hooks run {event} --client {client}"


def _apply(args: argparse.Namespace, install: bool) -> int:
    return apply_hooks(
        args.client, install=install, config_dir=args.config_dir, dry_run=args.dry_run
    )


def apply_hooks(
    client_name: str, *, install: bool, config_dir: Path | None = None, dry_run: bool = False
) -> int:
    """Add (or remove) our entries in ``client_name``'s hook config, saying what changed:
    `hooks install|uninstall`, and `init --hooks`."""
    client = client_of(client_name)
    path = config_path(client, config_dir, dict(os.environ))
    commands = (
        {
            "start": hook_command("session-start", client.name),
            "end": hook_command("session-end", client.name),
        }
        if install
        else None
    )
    change = plan_change(path, client, commands)
    if not change.changed:
        print(f"{path}: already {'installed' if install else 'without lifeline hooks'}")
        return 0
    sys.stdout.write(change.diff())
    if dry_run:
        print(f"dry run: {path} not written")
        return 0
    write_change(change)
    print(f"{'installed in' if install else 'removed from'} {path}")
    if install and client.note:
        print(f"note: {client.note}")
    return 0


async def cmd_install(args: argparse.Namespace) -> int:
    return _apply(args, install=True)


async def cmd_uninstall(args: argparse.Namespace) -> int:
    return _apply(args, install=False)


def _project(cwd: Path) -> Home | None:
    """The nearest home at or above ``cwd`` (None when no folder there has one)."""
    for folder in (cwd, *cwd.parents):
        if Home(folder).exists():
            return Home(folder)
    return None


def _event() -> dict[str, Any]:
    try:
        data = json.loads(read_stdin(sys.stdin.read) or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


async def _context_text(home: Home) -> str:
    """The project's context (its main line), or "" when it has none."""
    if not home.has_line(DEFAULT_LINE):
        return ""
    async with home.open_line(DEFAULT_LINE) as store:
        return (await build_context(store, line=DEFAULT_LINE, budget=Budget(_CONTEXT_CHARS))).text


async def _bundle_text(home: Home, event: dict[str, Any]) -> str:
    """The bundle of this project's newest unfinished session (not the one starting)."""
    settings = load_session_settings(home)
    if not home.has_line(settings.line):
        return ""
    async with home.open_line(settings.line) as store:
        cat = await Catalogue(store, live_window=settings.live_window).load()
        current = str(event.get("session_id") or "")
        lost = [
            u
            for u in await unfinished(cat, project_scope(home.root))
            if u.session.native_id != current
        ]
        if not lost:
            return ""
        req = BundleRequest(
            ref=lost[0].session.id,
            budget=Budget(_BUNDLE_CHARS),
            decisions=await decisions_in_force(home),
        )
        try:
            return (await build_bundle(cat, req))[1]
        except NotReady:
            return ""


async def _start_text(home: Home, event: dict[str, Any]) -> str:
    pieces = [await _context_text(home), await _bundle_text(home, event)]
    return "\n\n".join(p for p in pieces if p.strip())


async def _end(home: Home, event: dict[str, Any]) -> None:
    transcript = event.get("transcript_path")
    if not isinstance(transcript, str) or not Path(transcript).is_file():
        return
    settings = load_session_settings(home)
    async with open_ingester(home, settings.line, settings) as ingester:
        await ingest_sources(ingester, sources_in([Path(transcript)]))


async def cmd_run(args: argparse.Namespace) -> int:
    event = _event()
    cwd = Path(str(event.get("cwd") or os.getcwd()))
    given = getattr(args, "root", None)
    home = Home(given) if given is not None else _project(cwd)
    out: dict[str, Any] = {}
    try:
        if home is not None and args.event == "session-start":
            text = await _start_text(home, event)
            if text.strip():
                out = {
                    "hookSpecificOutput": {
                        "hookEventName": "SessionStart",
                        "additionalContext": text,
                    }
                }
        elif home is not None:
            await _end(home, event)
    except (LifelineError, OSError) as exc:  # never fail the agent tool
        print(f"lifeline hook: {exc}", file=sys.stderr)
    print(json.dumps(out, ensure_ascii=False))
    return 0
