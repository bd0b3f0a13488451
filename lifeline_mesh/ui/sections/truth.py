"""The Truth section: the context of a line as a page, and search (recall) over it."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from lifeline.errors import ConfigError
from lifeline.sessions.config import load_session_settings
from lifeline.truth.parse import parse_checkpoint
from lifeline.truth.service import LineTruth, fetch_verified
from lifeline_mesh.ui.links import Links
from lifeline_mesh.ui.reader import SHOWN, LineReader
from lifeline_mesh.ui.render import links_for, page, viewer_of
from lifeline_mesh.ui.search import MAX_PAGES, PAGE
from lifeline_mesh.ui.section import Section

__all__ = ["SECTION"]

MAX_QUERY = 500


def _items(lt: LineTruth, ids: list[str]) -> list[dict[str, Any]]:
    out = []
    for entry_id in reversed(ids[-SHOWN:]):  # newest first
        kind, ts, summary, why, thread = lt.state.items[entry_id]
        out.append(
            {
                "id": entry_id,
                "kind": kind,
                "ts": ts,
                "summary": summary,
                "why": why,
                "thread": thread,
            }
        )
    return out


async def _threads(reader: LineReader, lt: LineTruth) -> list[dict[str, Any]]:
    live = sorted(lt.truth.resume.items())[:SHOWN]
    entries = await fetch_verified(reader.store, [cid for _t, cid in live])
    out = []
    for thread, cid in live:
        entry = entries.get(cid)
        if entry is None:
            continue
        item = lt.state.items.get(thread)
        blocks = parse_checkpoint(entry.body).blocks
        out.append(
            {
                "thread": thread,
                "label": item[2] if item else thread,
                "checkpoint": cid,
                "ts": entry.ts,
                "summary": entry.summary,
                "next": blocks.get("next", ()),
                "blocked": blocks.get("blocked", ()),
            }
        )
    out.sort(key=lambda t: (t["ts"], t["checkpoint"]), reverse=True)
    return out


async def _pins(reader: LineReader, lt: LineTruth) -> list[dict[str, Any]]:
    ids = lt.truth.pinned[-SHOWN:]
    entries = await reader.entries(ids)
    return [
        {
            "id": i,
            "summary": entries[i].summary if i in entries else "(not in this line)",
            "kind": entries[i].kind if i in entries else "",
            "notes": lt.truth.pin_notes.get(i, []),
        }
        for i in reversed(ids)
    ]


async def _context(request: Request, line: str) -> dict[str, Any]:
    reader = await viewer_of(request).reader(line)
    lt = await reader.truth()
    identity = lt.state.items.get(lt.truth.identity) if lt.truth.identity else None
    return {
        "identity": {"id": lt.truth.identity, "summary": identity[2], "why": identity[3]}
        if identity
        else None,
        "count": lt.state.count,
        "head": lt.state.head,
        "kinds": sorted(lt.state.kinds.items()),
        "decisions": _items(lt, lt.truth.decisions),
        "decision_count": len(lt.truth.decisions),
        "opens": _items(lt, lt.truth.open),
        "open_count": len(lt.truth.open),
        "threads": await _threads(reader, lt),
        "pins": await _pins(reader, lt),
        "integrity": sorted(lt.state.integrity)[:SHOWN],
        "shown": SHOWN,
    }


async def home(request: Request) -> Response:
    line = viewer_of(request).default_line()
    if line is None:
        return page(request, "empty.html", section="truth", title="No lines yet")
    if viewer_of(request).static:  # a file cannot redirect: a page with a link instead
        return page(request, "index.html", section="truth", title="lifeline", line=line)
    target = Links(request.url.path, static=False).truth(line)
    return RedirectResponse(target or "/", status_code=307)


async def truth_page(request: Request) -> Response:
    line = request.path_params["line"]
    ctx = await _context(request, line)
    return page(request, "truth.html", section="truth", title=f"Truth of {line}", line=line, **ctx)


async def search_page(request: Request) -> Response:
    line = request.path_params["line"]
    query = request.query_params.get("q", "")[:MAX_QUERY]
    raw = request.query_params.get("page", "0")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) >= MAX_PAGES:
        raise ConfigError(f"page={raw[:20]!r} is not a page of hits; give 0 to {MAX_PAGES - 1}")
    number = int(raw)
    viewer = viewer_of(request)
    if line == load_session_settings(viewer.home).line:  # its messages, not its 48 KB parts
        target = links_for(request).sessions_search(line, {"q": query} if query else None)
        return RedirectResponse(target or "/", status_code=307)
    reader = await viewer.reader(line)
    found = await reader.search(query, number) if query.strip() else None
    return page(
        request,
        "search.html",
        section="truth",
        title=f"Search {line}",
        line=line,
        query=query,
        found=found,
        number=number,
        page_size=PAGE,
    )


def _nav(links: Links, line: str | None) -> str | None:
    return links.truth(line) if line else links.home()


async def _slash(request: Request) -> Response:
    return RedirectResponse(request.url.path + "/", status_code=307)


SECTION = Section(
    "truth",
    "Truth",
    _nav,
    [
        Route("/", home),
        Route("/lines/{line}/", truth_page),
        Route("/lines/{line}", _slash),
        Route("/lines/{line}/search", search_page),
    ],
)
