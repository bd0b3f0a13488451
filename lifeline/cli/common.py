"""Helpers every `lifeline` command uses: opening lines, printing, argument types."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeAlias, TypedDict

from lifeline.cli.logformat import LOG_FORMATS
from lifeline.cli.moved import environment_note
from lifeline.entry import Entry
from lifeline.errors import ConfigError
from lifeline.home import Home
from lifeline.lines import DEFAULT_LINE, validate_line_name
from lifeline.store.port import Store
from lifeline.wording import one_line, shown_text

__all__ = [
    "Attribution",
    "Commands",
    "add_attribution",
    "add_json_option",
    "add_line_option",
    "attribution",
    "count_int",
    "creates_project",
    "default_author",
    "entry_text",
    "external_checker",
    "find_root",
    "global_options",
    "home_of",
    "no_project_message",
    "open_line",
    "positive_int",
    "print_json",
    "root_of",
]


def global_options(*, line: bool = True) -> argparse.ArgumentParser:
    """``--root``/``--line``/``-v``, accepted before or after the command name.

    Without ``line``, commands that work on a line add ``--line`` themselves
    (:func:`add_line_option`), so it is offered nowhere it would mean nothing.
    """
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--root",
        type=Path,
        default=argparse.SUPPRESS,
        help="project root holding .lifeline/ (default: the nearest folder upward that "
        "holds one; commands that create one, such as init, use the current directory)",
    )
    if line:
        add_line_option(parent)
    parent.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks and debug logs",
    )
    parent.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=argparse.SUPPRESS,
        help="text (default) or json: one JSON object a line (ts, level, logger, message, "
        "peer, line), with a node's sessions logged too",
    )
    return parent


def add_line_option(
    parser: argparse.ArgumentParser, help: str = f"the line to use (default: {DEFAULT_LINE})"
) -> None:
    parser.add_argument("--line", default=argparse.SUPPRESS, help=help)


# The sub-command table each command module's ``register(sub, parent)`` adds its parsers to.
# (a string: the class is not subscriptable at run time before Python 3.12)
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_json_option(
    parser: argparse._ActionsContainer, help: str = "machine-readable output"
) -> None:
    """``--json`` of a read command: its output as JSON (printed with :func:`print_json`)."""
    parser.add_argument("--json", action="store_true", help=help)


def find_root(start: Path) -> Path:
    """The root of the nearest home from ``start`` upward (:meth:`Home.find`)."""
    return Home.find(start).root


def root_of(args: argparse.Namespace) -> Path:
    """The project root: ``--root``, else :func:`find_root` from the current directory.

    Found once per command (kept on ``args``); ``-v`` says which on stderr."""
    given: Path | None = getattr(args, "root", None)
    if given is not None and getattr(args, "root_checked", False):
        return given
    root = given if given is not None else _found_root(args)
    if not root.is_dir():
        raise ConfigError(f"--root {root} is not a directory; pass the project folder")
    args.root, args.root_checked = root, True
    if getattr(args, "verbose", False):
        how = "--root" if given is not None else "found from the current directory"
        print(f"using project root {root.resolve()} ({how})", file=sys.stderr)
    return root


def creates_project(parser: argparse.ArgumentParser) -> None:
    """Mark a command that makes ``.lifeline/`` where it runs (``init``, ``join``...): run
    outside any project, it creates one in the current folder instead of refusing."""
    parser.set_defaults(creates_project=True)


def no_project_message(start: Path) -> str:
    """What a command that needs a project says when none holds ``start``."""
    return (
        f"no lifeline project found in {start} or above; run `lifeline init` in the "
        "project's folder (or pass --root DIR)"
    )


def _found_root(args: argparse.Namespace) -> Path:
    """The root found upward from the current directory; a command that only uses a project
    refuses (one line) when there is none, rather than work in, or create, the wrong place."""
    start = Path.cwd()
    home = Home.find(start)
    if not home.exists() and not getattr(args, "creates_project", False):
        raise ConfigError(no_project_message(start))
    return home.root


def home_of(args: argparse.Namespace) -> Home:
    """The command's :class:`Home`, built once from :func:`root_of` (kept on ``args``)."""
    home = getattr(args, "home", None)
    if not isinstance(home, Home):
        home = args.home = Home(root_of(args))
    return home


def line_of(args: argparse.Namespace) -> str:
    return validate_line_name(getattr(args, "line", None) or DEFAULT_LINE)


@asynccontextmanager
async def open_line(
    args: argparse.Namespace, *, create: bool = False, line: str | None = None
) -> AsyncIterator[Store]:
    """Open the selected line; a line that does not exist is an error unless ``create``."""
    home, name = home_of(args), line or line_of(args)
    _note_environment(home, name)
    async with home.open_line(name, create=create) as store:
        yield store


_NOTED: list[str] = []  # the environment note is said once per process


def _note_environment(home: Home, line: str) -> None:
    if _NOTED:
        return
    line_file = home.line_path(line) if home.lines.url is None else None
    note = environment_note("lifeline", line, line_file)
    if note is not None:
        _NOTED.append(note)
        print(note, file=sys.stderr)


def external_checker(args: argparse.Namespace) -> Callable[[str, str], Awaitable[bool]]:
    """``exists(line, id)`` for cross-line parents: is ``id`` stored in line ``line``?"""

    return home_of(args).exists_in


def default_author() -> str:
    """Who writes when ``--author`` is not given: ``$LIFELINE_AUTHOR``, ``$USER``,
    ``$LOGNAME``, then git's ``user.name`` (a container or a CI job often has no user
    variables but a configured git), then this machine's name; never a bare "unknown"."""
    for var in ("LIFELINE_AUTHOR", "USER", "LOGNAME"):
        value = os.environ.get(var)
        if value:
            return value
    return _git_user_name() or socket.gethostname() or "unknown"


def add_attribution(p: argparse.ArgumentParser) -> None:
    """Who wrote an entry a command records: ``--author``, ``--agent``, ``--provider`` and
    ``--model``, as `log` takes them (and lifeline-context's writes did)."""
    p.add_argument("--author", default=None, help="who (default: $LIFELINE_AUTHOR or $USER)")
    p.add_argument("--agent", default="human", help="the agent that wrote it (default: human)")
    p.add_argument("--provider", default="none", help="model provider (default: none)")
    p.add_argument("--model", default="human", help="model name (default: human)")


class Attribution(TypedDict):
    author: str
    agent: str
    provider: str
    model: str


def attribution(args: argparse.Namespace) -> Attribution:
    """The Draft fields :func:`add_attribution` took (``author`` by :func:`default_author`
    when not given)."""
    author = args.author if args.author is not None else default_author()
    return Attribution(author=author, agent=args.agent, provider=args.provider, model=args.model)


def _git_user_name() -> str | None:
    try:
        done = subprocess.run(
            ["git", "config", "user.name"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = done.stdout.strip()
    return name if done.returncode == 0 and name else None


# The largest count, limit or budget a command takes: far above any useful value, and far
# inside the 64-bit integers SQLite binds (a LIMIT past them raised OverflowError).
MOST = 1_000_000_000


def _whole(text: str, least: int) -> int:
    stripped = text.strip()
    digits = stripped[1:] if stripped[:1] in ("+", "-") else stripped
    if not (digits.isascii() and digits.isdigit()):  # int() would take '٣' or 5,000 digits
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number")
    if len(digits.lstrip("0")) > len(str(MOST)) or int(stripped) > MOST:
        raise argparse.ArgumentTypeError(f"{text[:40]} is too large: give at most {MOST:,}")
    value = int(stripped)
    if value < least:
        raise argparse.ArgumentTypeError(
            f"{value} must be greater than 0" if least == 1 else f"{value} must be 0 or more"
        )
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number from 1 to :data:`MOST`."""
    return _whole(text, 1)


def count_int(text: str) -> int:
    """An argparse type: a whole number from 0 to :data:`MOST`."""
    return _whole(text, 0)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n")


def entry_text(entry: Entry) -> str:
    """A human rendering of one entry (``lifeline show``): its text as written, but for
    control characters, shown escaped (the entry may be a member's; decision 0128)."""
    lines = [
        f"id:       {entry.id}",
        f"ts:       {entry.ts}",
        f"kind:     {one_line(entry.kind)}",
        f"author:   {one_line(entry.author)}",
        f"agent:    {one_line(f'{entry.agent} ({entry.provider}/{entry.model})')}",
        f"summary:  {one_line(entry.summary)}",
        f"parents:  {', '.join(entry.parents) or '-'}",
    ]
    if entry.dedup_key:
        lines.append(f"dedup:    {one_line(entry.dedup_key)}")
    if entry.body:
        lines.append("")
        lines.append(shown_text(entry.body))
    return "\n".join(lines)
