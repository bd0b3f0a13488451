"""`lifeline-mesh ui`: the read-only web viewer, served on loopback or written as files."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from lifeline.cli.common import Commands
from lifeline.cli.progress import Progress
from lifeline.wording import count
from lifeline_mesh.cli.home_arg import node_home
from lifeline_mesh.cli.stopping import stop_on_signals
from lifeline_mesh.cli.ui_args import add_serve_ui_arguments, add_ui_arguments
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.ui.defaults import TOKEN_ENV
from lifeline_mesh.ui.server import bind, check_listen, serve_viewer
from lifeline_mesh.ui.viewer import Viewer

__all__ = ["add_serve_ui_arguments", "add_ui_arguments", "register", "ui_beside", "viewer_token"]


@asynccontextmanager
async def ui_beside(
    args: argparse.Namespace, home: NodeHome, stop: asyncio.Event
) -> AsyncIterator[None]:
    """With ``--ui``, the viewer runs for as long as the block (it stops with ``stop``)."""
    if not getattr(args, "ui", False):
        yield
        return
    token = viewer_token(args.ui_token)
    host, port = check_listen(args.ui_listen, remote=args.ui_remote, token=token)
    sock = bind(host, port)

    def ready(url: str) -> None:
        sys.stdout.write(f"viewer on {url}\n")
        sys.stdout.flush()

    names = args.ui_allow_host
    viewer = Viewer(home, token=token)
    task = asyncio.create_task(
        serve_viewer(viewer, sock, stop, ready, names=names, option="--ui-allow-host", listen=host)
    )
    try:
        yield
    finally:
        stop.set()
        await task


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "ui",
        parents=[parent],
        help="the read-only web viewer: truth, entries, history, sessions, mesh",
        description="Serve a read-only site over this project's lines and mesh (loopback "
        "by default), or write it as static files with --static DIR.",
    )
    add_ui_arguments(p)
    p.add_argument(
        "--static",
        type=Path,
        default=None,
        metavar="DIR",
        help="write the site as static files under DIR (relative links) and exit",
    )
    p.set_defaults(func=cmd_ui)


def viewer_token(value: str | None) -> str | None:
    return value or os.environ.get(TOKEN_ENV) or None


async def cmd_ui(args: argparse.Namespace) -> int:
    home = node_home(args)
    if args.static is not None:
        return await _export(home, args.static)
    token = viewer_token(args.token)
    host, port = check_listen(args.listen, remote=args.remote, token=token)
    sock = bind(host, port)
    stop = asyncio.Event()
    stop_on_signals(stop)

    def ready(url: str) -> None:
        sys.stdout.write(f"viewer on {url}\n")
        sys.stdout.flush()

    viewer = Viewer(home, token=token)
    await serve_viewer(viewer, sock, stop, ready, names=args.allow_host, listen=host)
    print("viewer stopped")
    return 0


async def _export(home: NodeHome, target: Path) -> int:
    from lifeline_mesh.ui.export import export_site

    with Progress("writing pages", enabled=sys.stderr.isatty()) as bar:
        report = await export_site(home, target, bar.update)
    print(f"wrote {count(report.pages, 'page')} to {target} (open {target / 'index.html'})")
    for path, status in report.errors[:10]:
        print(f"  {path}: HTTP {status} (written as an error page)")
    return 0
