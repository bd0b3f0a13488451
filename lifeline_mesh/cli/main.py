"""Entry point of `lifeline-mesh`: builds the parser from the command modules and runs one.

Same conventions as `lifeline`: one line on stderr and exit 2 for our errors, exit 1 when a
check (verify) finds a problem, tracebacks only with ``-v``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from lifeline.cli.main import command_word, exit_process, make_parser, run, store_details
from lifeline_mesh import __version__
from lifeline_mesh.heap import one_arena

__all__ = ["COMMANDS", "COMMAND_MODULES", "build_parser", "main"]

# Each module exposes register(subparsers, parent) and sets `func` (async, returns exit code).
COMMAND_MODULES = [
    "cmd_init",
    "cmd_notary",
    "cmd_sync",
    "cmd_membership",
    "cmd_mcp",
    "cmd_proposals",
    "cmd_capture",
    "cmd_peers",
    "cmd_ui",
    "cmd_ci",
    "cmd_hub",
]
# Which module registers each command: a command line that names one builds only that
# module's parser (as `lifeline` does, decision 0025). Importing every module costs each
# start ~0.7 s and ~55 MB (the viewer, the CI runner, gRPC...), which `verify` or `sync`
# never use. tests/cli/test_cli_options.py keeps this map equal to what the modules register.
COMMANDS = {
    "init": "cmd_init",
    **dict.fromkeys(["id", "sign", "verify"], "cmd_notary"),
    **dict.fromkeys(["lines", "serve", "share", "sync", "unshare"], "cmd_sync"),
    **dict.fromkeys(["invite", "join", "members", "membership-serve", "revoke"], "cmd_membership"),
    "mcp": "cmd_mcp",
    **dict.fromkeys(["approve", "proposals", "reject"], "cmd_proposals"),
    "capture": "cmd_capture",
    **dict.fromkeys(["discover", "peers", "status"], "cmd_peers"),
    "ui": "cmd_ui",
    **dict.fromkeys(["ci", "credentials"], "cmd_ci"),
    **dict.fromkeys(["hub", "migrate-store"], "cmd_hub"),
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `lifeline-mesh` parser: every command, or, when ``argv`` names a command, only
    its module's (the same parser for that command line)."""
    names = COMMAND_MODULES
    command = None if argv is None else command_word(argv)
    if command in COMMANDS:
        names = [COMMANDS[command]]
    return make_parser(
        "lifeline-mesh",
        "Run a lifeline-mesh node: sync, sign and verify ledgers across peers.",
        __version__,
        [importlib.import_module(f"lifeline_mesh.cli.{name}") for name in names],
        line_option=False,
        version_details=_version_details,
    )


def _version_details() -> list[str]:
    from lifeline_mesh.discovery.advert import PROTOCOL_VERSION  # as advertised to peers

    return [f"sync protocol: {PROTOCOL_VERSION}", *store_details()]


def main(argv: Sequence[str] | None = None) -> None:
    one_arena()  # every thread allocates from one heap (lifeline_mesh/heap.py)
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    exit_process(run(args, prog="lifeline-mesh"))
