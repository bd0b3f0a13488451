"""`serve`'s peer options, added to its parser without the peering machinery (every
`lifeline-mesh` command of the module that registers `serve` builds that parser)."""

from __future__ import annotations

import argparse

__all__ = ["add_peering_arguments"]


def add_peering_arguments(parser: argparse.ArgumentParser) -> None:
    """``--peer``, ``--no-discovery``, ``--interface`` for ``serve``."""
    parser.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="a peer to sync with (repeatable; added to the config's peers)",
    )
    parser.add_argument(
        "--no-discovery",
        action="store_true",
        help="do not announce or browse on the LAN (static peers only)",
    )
    parser.add_argument(
        "--interface",
        action="append",
        default=[],
        metavar="ADDR",
        help="IP address of an interface to announce and browse on (repeatable; default: "
        "the listen address when it is a single address, else required for discovery)",
    )
