"""The History section: the paged, filterable timeline of a line, and the DAG around an
entry drawn on the server (:mod:`lifeline_mesh.ui.dag`)."""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lifeline.entry import ID_RE, normalize_ts
from lifeline.errors import ConfigError, InvalidEntry
from lifeline_mesh.ui.dag import render_dag
from lifeline_mesh.ui.links import Links
from lifeline_mesh.ui.reader import PAGE_SIZE, SCAN_BUDGET, Filters
from lifeline_mesh.ui.render import links_for, page, viewer_of
from lifeline_mesh.ui.section import Section

__all__ = ["SECTION"]

MAX_FIELD = 200
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
THREADS_LISTED = 200


def _date(value: str, name: str) -> str:
    """A date (YYYY-MM-DD, kept as is) or a time (normalised to the stored form)."""
    if not value:
        return ""
    if _DATE.match(value):
        return value
    try:
        return normalize_ts(value)
    except InvalidEntry as exc:
        raise ConfigError(
            f"{name}={value[:40]!r} is not a date; write it like 2026-01-31 or 2026-01-31T12:00:00Z"
        ) from exc


def _filters(request: Request) -> Filters:
    q = {
        k: request.query_params.get(k, "").strip()[:MAX_FIELD]
        for k in ("kind", "author", "agent", "thread", "since", "until")
    }
    return Filters(
        q["kind"],
        q["author"],
        q["agent"],
        q["thread"],
        _date(q["since"], "since"),
        _date(q["until"], "until"),
    )


def _cursor(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if not ID_RE.match(value):
        raise ConfigError(f"before={value[:70]!r} is not an entry id; follow the page links")
    return value


async def history_page(request: Request) -> Response:
    line = request.path_params["line"]
    before = request.path_params.get("before") or request.query_params.get("before")
    filters = _filters(request)
    reader = await viewer_of(request).reader(line)
    lt = await reader.truth()
    result = await reader.history(filters, _cursor(before))
    threads = sorted(lt.state.threads)
    return page(
        request,
        "history.html",
        section="history",
        title=f"History of {line}",
        line=line,
        page=result,
        filters=filters,
        before=before,
        kinds=sorted(lt.state.kinds),
        threads=threads[:THREADS_LISTED],
        superseded=lt.truth.superseded,
        count=lt.state.count,
        page_size=PAGE_SIZE,
        scan_budget=SCAN_BUDGET,
    )


async def graph_page(request: Request) -> Response:
    line = request.path_params["line"]
    reader = await viewer_of(request).reader(line)
    entry = await reader.entry(request.path_params["entry_id"])
    nodes = await reader.window(entry.id)
    links = links_for(request)
    svg = render_dag(nodes, entry.id, lambda i: links.graph(line, i) or "#")
    return page(
        request,
        "graph.html",
        section="history",
        title=f"Graph around {entry.id[:12]}",
        line=line,
        entry=entry,
        svg=svg,
        nodes=sorted(nodes, key=lambda n: (n.height, n.ts, n.id)),
    )


def _nav(links: Links, line: str | None) -> str | None:
    return links.history(line) if line else None


SECTION = Section(
    "history",
    "History",
    _nav,
    [
        Route("/lines/{line}/history", history_page),
        Route("/lines/{line}/history/before-{before}", history_page),
        Route("/lines/{line}/graph/{entry_id}", graph_page),
    ],
)
