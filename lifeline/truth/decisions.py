"""The decisions in force on a project's main line, with their summaries.

Continuation bundles carry them (``lifeline sessions resume``, the session-start hook, the
MCP ``session_bundle`` tool), so every entry point asks this one function.
"""

from __future__ import annotations

from lifeline.home import Home
from lifeline.lines import DEFAULT_LINE

__all__ = ["decisions_in_force"]


async def decisions_in_force(home: Home) -> tuple[tuple[str, str], ...]:
    """(id, summary) of the project's decisions in force on its main line, if it has one."""
    if not home.has_line(DEFAULT_LINE):
        return ()
    from lifeline.truth.service import fetch_verified, read_shown  # only with a main line

    async with home.open_line(DEFAULT_LINE) as store:
        truth = (await read_shown(store)).truth
        entries = await fetch_verified(store, truth.decisions)
    return tuple((i, entries[i].summary) for i in truth.decisions if i in entries)
