"""The Sessions section: a line's agent sessions listed by scope, status and tool (paged),
one transcript (prompts and replies in full, tool calls and context folded, subagents
nested, compactions marked), the unfinished sessions with what was outstanding, and each
session's continuation bundle with a copy button.

Transcript text is untrusted (anything a tool or a web page put in a session): it reaches
HTML only through autoescape and the ``redactions`` filter, which escapes first.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lifeline.errors import ConfigError
from lifeline.sessions.config import load_session_settings
from lifeline.sessions.model import SessionStatus, Tool
from lifeline.sessions.scope import project_scope
from lifeline_mesh.ui.links import Links
from lifeline_mesh.ui.render import page, viewer_of
from lifeline_mesh.ui.section import Section
from lifeline_mesh.ui.sessions_view import ITEMS_PAGE, LIST_PAGE

__all__ = ["SECTION"]

STATUSES = [s.value for s in SessionStatus]
TOOLS = [t.value for t in Tool]


def _number(request: Request, name: str) -> int:
    raw = request.query_params.get(name, "0")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:  # not "²", not 5,000 digits
        raise ConfigError(f"{name}={raw[:20]!r} is not a page number; give 0 to 999999999")
    return int(raw)


def _choice(request: Request, name: str, allowed: list[str]) -> str:
    value = request.query_params.get(name, "")
    if value and value not in allowed:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(allowed)}")
    return value


async def home(request: Request) -> Response:
    """The configured sessions line's list (``sessions.line`` in settings)."""
    viewer = viewer_of(request)
    line = load_session_settings(viewer.home).line
    if line not in viewer.lines():
        return page(
            request,
            "sessions_none.html",
            section="sessions",
            title="Sessions",
            sessions_line=line,
        )
    return await _listing(request, line)


async def listing(request: Request) -> Response:
    return await _listing(request, request.path_params["line"])


async def _listing(request: Request, line: str) -> Response:
    viewer = viewer_of(request)
    view = (await viewer.reader(line)).sessions
    scope = request.query_params.get("scope", "").strip()[:500]
    if scope == ".":  # as `--scope .`: this project's
        scope = project_scope(viewer.home.root)
    status = _choice(request, "status", STATUSES)
    tool = _choice(request, "tool", TOOLS)
    number = _number(request, "page")
    rows, total = await view.listing(scope, status, tool, number)
    await view.unfinished()  # starts finding them, for the Unfinished page
    query = {k: v for k, v in (("scope", scope), ("status", status), ("tool", tool)) if v}
    scopes = sorted({s.scope for s in await view.summaries()})
    return page(
        request,
        "sessions.html",
        section="sessions",
        title=f"Sessions of {line}",
        line=line,
        rows=rows,
        total=total,
        number=number,
        pages=-(-total // LIST_PAGE),
        query=query,
        filters={"scope": scope, "status": status, "tool": tool},
        scopes=scopes[:500],
        statuses=STATUSES,
        tools=TOOLS,
    )


async def transcript(request: Request) -> Response:
    viewer = viewer_of(request)
    line = request.path_params["line"]
    view = (await viewer.reader(line)).sessions
    session = await view.session(request.path_params["session_id"])
    start = _number(request, "from")
    return page(
        request,
        "session.html",
        section="sessions",
        title=(session.facts.title or session.facts.first_prompt or session.id[:12])[:80],
        line=line,
        s=session,
        rows=await view.transcript(session, start),
        start=start,
        page_size=ITEMS_PAGE,
    )


async def bundle(request: Request) -> Response:
    viewer = viewer_of(request)
    line = request.path_params["line"]
    view = (await viewer.reader(line)).sessions
    session = await view.session(request.path_params["session_id"])
    ready, text, why = await view.bundle(session.id)
    return page(
        request,
        "bundle.html",
        section="sessions",
        title=f"Bundle: {(session.facts.title or session.id[:12])[:60]}",
        line=line,
        s=session,
        ready=ready,
        text=text,
        why=why,
    )


async def unfinished_page(request: Request) -> Response:
    viewer = viewer_of(request)
    line = request.path_params["line"]
    found = await (await viewer.reader(line)).sessions.unfinished(wait=viewer.static)
    return page(
        request,
        "unfinished.html",
        section="sessions",
        title=f"Unfinished sessions of {line}",
        line=line,
        found=found,
    )


def _nav(links: Links, line: str | None) -> str | None:
    return links.sessions_home()


SECTION = Section(
    "sessions",
    "Sessions",
    _nav,
    [
        Route("/sessions", home),
        Route("/lines/{line}/sessions", listing),
        Route("/lines/{line}/unfinished", unfinished_page),
        Route("/lines/{line}/sessions/{session_id}", transcript),
        Route("/lines/{line}/sessions/{session_id}/bundle", bundle),
    ],
)
