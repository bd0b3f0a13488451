"""Entry point of `lifeline`: builds the parser from the command modules and runs one.

Errors of ours become one line on stderr and exit status 2 (tracebacks only with ``-v``);
``verify`` exits 1 when it finds a problem; output piped into ``head`` ends quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from lifeline import __version__
from lifeline.cli import cmd_core, cmd_hooks, cmd_projection, cmd_sessions, cmd_truth
from lifeline.cli.common import global_options
from lifeline.errors import LifelineError

__all__ = ["build_parser", "main", "make_parser", "run"]

# Each module exposes register(subparsers, parent) and sets `func` (async, returns exit code).
COMMAND_MODULES = [cmd_core, cmd_truth, cmd_projection, cmd_sessions, cmd_hooks]


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr (the usage text is one `--help` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def make_parser(
    prog: str, description: str, version: str, modules: Sequence[ModuleType]
) -> argparse.ArgumentParser:
    """A CLI whose commands come from ``modules`` (each has ``register(sub, parent)``)."""
    parent = global_options()
    parser = _Parser(prog=prog, description=description, parents=[parent])
    parser.add_argument("--version", action="version", version=f"{prog} {version}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in modules:
        module.register(sub, parent)
    return parser


def build_parser() -> argparse.ArgumentParser:
    return make_parser(
        "lifeline",
        "The project's reasoning ledger: record why the software is what it is.",
        __version__,
        COMMAND_MODULES,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    sys.exit(run(args, prog="lifeline"))


def run(args: argparse.Namespace, *, prog: str = "lifeline") -> int:
    verbose = bool(getattr(args, "verbose", False))
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        code: int = asyncio.run(args.func(args))
        sys.stdout.flush()
        return code
    except LifelineError as exc:
        if verbose:
            raise
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader (e.g. `head`) went away: stop quietly, as other Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
