"""The viewer's command-line options, for `ui` and `serve --ui`, without the viewer itself.

`serve` builds its parser from these on every start; importing the viewer (uvicorn,
starlette, jinja2, markdown) only to add three options cost each start a third of a second
of CPU, so the viewer is imported when it runs (decision 0039).
"""

from __future__ import annotations

import argparse

from lifeline_mesh.ui.defaults import DEFAULT_LISTEN, TOKEN_ENV

__all__ = ["add_serve_ui_arguments", "add_ui_arguments"]


def add_ui_arguments(p: argparse.ArgumentParser, *, prefix: str = "") -> None:
    """The viewer's listen options (``ui``: --listen; ``serve --ui``: --ui-listen)."""
    p.add_argument(
        f"--{prefix}listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where the viewer listens (default: {DEFAULT_LISTEN}; port 0 = a free port)",
    )
    p.add_argument(
        f"--{prefix}remote",
        action="store_true",
        help=f"allow a non-loopback listen address (requires a token: {TOKEN_ENV} or "
        f"--{prefix}token)",
    )
    p.add_argument(
        f"--{prefix}allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="answer browsers that reach the viewer by this host name too (repeatable; "
        "localhost, IP addresses and the --listen name always work: other names are "
        "refused, so a web page cannot rename this address to read it)",
    )
    p.add_argument(
        f"--{prefix}token",
        default=None,
        metavar="TOKEN",
        help=f"require this token (default: ${TOKEN_ENV}, if set); prefer the variable, "
        "a command line is visible to other users",
    )


def add_serve_ui_arguments(p: argparse.ArgumentParser) -> None:
    """``serve --ui`` and its ``--ui-listen``, ``--ui-remote``, ``--ui-token``."""
    p.add_argument(
        "--ui", action="store_true", help="also serve the read-only web viewer (see `ui`)"
    )
    add_ui_arguments(p, prefix="ui-")
