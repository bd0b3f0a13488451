"""Helpers every `lifeline` command uses: opening lines, printing, argument types."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeAlias

from lifeline.entry import Entry
from lifeline.errors import ConfigError, NotFound
from lifeline.ignore import ensure_ignore_file
from lifeline.lines import DEFAULT_LINE, LEDGER_DIR, line_path, validate_line_name
from lifeline.store.sqlite import SqliteStore

__all__ = [
    "Commands",
    "add_json_option",
    "add_line_option",
    "default_author",
    "entry_text",
    "external_checker",
    "find_root",
    "global_options",
    "open_line",
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
        "holds one, else the current directory)",
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
    """The nearest folder from ``start`` upward that holds ``.lifeline/``, as git finds
    ``.git``; the search stops at a repository's root (a folder with ``.git``) and at the
    filesystem root. ``start`` itself when none holds one (where `init` creates it)."""
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / LEDGER_DIR).is_dir():
            return folder
        if (folder / ".git").exists():
            break
    return start


def root_of(args: argparse.Namespace) -> Path:
    """The project root: ``--root``, else :func:`find_root` from the current directory.

    Found once per command (kept on ``args``); ``-v`` says which on stderr."""
    given: Path | None = getattr(args, "root", None)
    if given is not None and getattr(args, "root_checked", False):
        return given
    root = given if given is not None else find_root(Path.cwd())
    if not root.is_dir():
        raise ConfigError(f"--root {root} is not a directory; pass the project folder")
    args.root, args.root_checked = root, True
    if getattr(args, "verbose", False):
        how = "--root" if given is not None else "found from the current directory"
        print(f"using project root {root.resolve()} ({how})", file=sys.stderr)
    return root


def line_of(args: argparse.Namespace) -> str:
    return validate_line_name(getattr(args, "line", None) or DEFAULT_LINE)


@asynccontextmanager
async def open_line(
    args: argparse.Namespace, *, create: bool = False, line: str | None = None
) -> AsyncIterator[SqliteStore]:
    """Open the selected line; a line that does not exist is an error unless ``create``."""
    name = line or line_of(args)
    path = line_path(root_of(args), name, must_exist=not create)
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
        ensure_ignore_file(root_of(args))
    store = await SqliteStore.open(path)
    try:
        yield store
    finally:
        await store.close()


def external_checker(args: argparse.Namespace) -> Callable[[str, str], Awaitable[bool]]:
    """``exists(line, id)`` for cross-line parents: is ``id`` stored in line ``line``?"""

    async def exists(other: str, entry_id: str) -> bool:
        try:
            async with open_line(args, line=other) as foreign:
                return bool(await foreign.contains([entry_id]))
        except NotFound:
            return False

    return exists


def default_author() -> str:
    for var in ("LIFELINE_AUTHOR", "USER", "LOGNAME"):
        value = os.environ.get(var)
        if value:
            return value
    return "unknown"


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n")


def entry_text(entry: Entry) -> str:
    """A human rendering of one entry (``lifeline show``)."""
    lines = [
        f"id:       {entry.id}",
        f"ts:       {entry.ts}",
        f"kind:     {entry.kind}",
        f"author:   {entry.author}",
        f"agent:    {entry.agent} ({entry.provider}/{entry.model})",
        f"summary:  {entry.summary}",
        f"parents:  {', '.join(entry.parents) or '-'}",
    ]
    if entry.dedup_key:
        lines.append(f"dedup:    {entry.dedup_key}")
    if entry.body:
        lines.append("")
        lines.append(entry.body)
    return "\n".join(lines)
