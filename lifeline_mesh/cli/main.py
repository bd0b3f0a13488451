"""Entry point of `lifeline-mesh`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lifeline_mesh import __version__

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lifeline-mesh",
        description="Run a lifeline-mesh node: sync, sign and verify ledgers across peers.",
    )
    parser.add_argument("--version", action="version", version=f"lifeline-mesh {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        sys.exit(2)
