"""The sessions line, opened for the `lifeline sessions` commands that read it.

The line is the one --line names, else ``sessions.line`` in .lifeline/config.json, else
'sessions'. One that does not exist yet is told with the command that creates it and fills
it, `lifeline sessions ingest`, not with the `init` of an ordinary line (an empty sessions
line has nothing to list, show or count).
"""

from __future__ import annotations

import argparse

from lifeline.cli.common import home_of
from lifeline.errors import NotFound
from lifeline.sessions.catalogue import Catalogue
from lifeline.sessions.config import SessionSettings, load_session_settings
from lifeline.store.port import Store

__all__ = ["open_catalogue", "open_sessions_line", "sessions_line_name"]


def sessions_line_name(args: argparse.Namespace, settings: SessionSettings) -> str:
    return str(getattr(args, "line", None) or settings.line)


async def open_sessions_line(args: argparse.Namespace) -> tuple[Store, SessionSettings]:
    """The sessions line, open until the store's ``close()`` (line files, or a hub's
    database), and the session settings."""
    home = home_of(args)
    settings = load_session_settings(home)
    name = sessions_line_name(args, settings)
    try:
        return await home.lines.open_kept(name), settings
    except NotFound:
        if not home.exists() or home.has_line(name):
            raise  # no project here (its own hint), or not the line that is missing
        given = f" --line {name}" if getattr(args, "line", None) else ""
        raise NotFound(
            f"no sessions yet: line {name!r} does not exist under {home.root}; "
            f"`lifeline sessions ingest{given}` creates it from the agents' transcripts"
        ) from None


async def open_catalogue(args: argparse.Namespace) -> Catalogue:
    """The sessions line's catalogue; its ``store`` stays open until closed."""
    store, settings = await open_sessions_line(args)
    return await Catalogue(store, live_window=settings.live_window).load()
