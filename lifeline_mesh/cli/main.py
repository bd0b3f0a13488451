"""Entry point of `lifeline-mesh`: builds the parser from the command modules and runs one.

Same conventions as `lifeline`: one line on stderr and exit 2 for our errors, exit 1 when a
check (verify) finds a problem, tracebacks only with ``-v``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from lifeline.cli.main import make_parser, run
from lifeline_mesh import __version__
from lifeline_mesh.cli import (
    cmd_capture,
    cmd_ci,
    cmd_hub,
    cmd_init,
    cmd_mcp,
    cmd_membership,
    cmd_notary,
    cmd_peers,
    cmd_proposals,
    cmd_sync,
    cmd_ui,
)

__all__ = ["build_parser", "main"]

# Each module exposes register(subparsers, parent) and sets `func` (async, returns exit code).
COMMAND_MODULES: list[ModuleType] = [
    cmd_init,
    cmd_notary,
    cmd_sync,
    cmd_membership,
    cmd_mcp,
    cmd_proposals,
    cmd_capture,
    cmd_peers,
    cmd_ui,
    cmd_ci,
    cmd_hub,
]


def build_parser() -> argparse.ArgumentParser:
    return make_parser(
        "lifeline-mesh",
        "Run a lifeline-mesh node: sync, sign and verify ledgers across peers.",
        __version__,
        COMMAND_MODULES,
        line_option=False,
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    sys.exit(run(args, prog="lifeline-mesh"))
