"""Sessions usage and message search in the viewer (part of the Sessions section's pages):
tokens and cost per day, model, project, tool or session with a bar chart drawn on the
server (:mod:`lifeline_mesh.ui.usage_chart`), and ranked messages and tool calls, each a
link into its transcript at its item. Both read the sessions index
(lifeline/sessions/index.py), brought up to date first; transcript text reaches HTML only
through autoescape and the ``redactions`` filter.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lifeline.errors import ConfigError
from lifeline.sessions.finder import opened_index, parse_since, search
from lifeline.sessions.messages import ROLES
from lifeline.sessions.model import Tool
from lifeline.sessions.prices import load_prices
from lifeline.sessions.usage import GROUPS, usage_report
from lifeline_mesh.ui.links import Links
from lifeline_mesh.ui.render import page, viewer_of
from lifeline_mesh.ui.section import Section
from lifeline_mesh.ui.sessions_view import ITEMS_PAGE
from lifeline_mesh.ui.usage_chart import SEGMENTS, render_usage_chart

__all__ = ["SECTION"]

TOOLS = [t.value for t in Tool]
MAX_QUERY = 500
HITS = 50


def _choice(request: Request, name: str, allowed: list[str], default: str = "") -> str:
    value = request.query_params.get(name, default)
    if value and value not in allowed:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(allowed)}")
    return value


def _since(request: Request) -> tuple[str, str | None]:
    given = request.query_params.get("since", "").strip()[:40]
    return given, parse_since(given) if given else None


async def usage_page(request: Request) -> Response:
    viewer = viewer_of(request)
    line = request.path_params["line"]
    by = _choice(request, "by", list(GROUPS), "day")
    tool = _choice(request, "tool", TOOLS)
    given, since = _since(request)
    home = viewer.home
    prices = load_prices(*[p for p in (home.prices_path,) if p.exists()])
    store = (await viewer.reader(line)).store
    async with opened_index(store) as index:
        report = usage_report(index, prices, by=by or "day", since=since, tool=tool or None)
    query = {k: v for k, v in (("by", by), ("since", given), ("tool", tool)) if v}
    return page(
        request,
        "usage.html",
        section="sessions",
        title=f"Token usage of {line}",
        line=line,
        report=report,
        chart=render_usage_chart(report.lines, report.currency),
        segments=SEGMENTS,
        groups=list(GROUPS),
        tools=TOOLS,
        filters={"by": by or "day", "since": given, "tool": tool},
        query=query,
    )


async def search_page(request: Request) -> Response:
    viewer = viewer_of(request)
    line = request.path_params["line"]
    query = request.query_params.get("q", "")[:MAX_QUERY]
    tool = _choice(request, "tool", TOOLS)
    role = _choice(request, "role", list(ROLES))
    given, since = _since(request)
    hits = None
    if query.strip():
        store = (await viewer.reader(line)).store
        async with opened_index(store) as index:
            hits = await search(
                store, index, query, tool=tool or None, since=since, role=role or None, limit=HITS
            )
    return page(
        request,
        "sessions_search.html",
        section="sessions",
        title=f"Search the sessions of {line}",
        line=line,
        query=query,
        hits=hits,
        tools=TOOLS,
        roles=ROLES,
        filters={"tool": tool, "role": role, "since": given},
        page_size=ITEMS_PAGE,
    )


def _nav(links: Links, line: str | None) -> str | None:
    return None  # reached from the Sessions pages


SECTION = Section(
    "sessions-find",
    "",
    _nav,
    [
        Route("/lines/{line}/usage", usage_page),
        Route("/lines/{line}/sessions-search", search_page),
    ],
)
