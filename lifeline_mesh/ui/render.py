"""Pages from templates: one Jinja environment (autoescaping on, strict about missing names)
and :func:`page`, which adds what every page shows (sections, lines, links).

Every value from a ledger reaches HTML through Jinja's autoescape, the markdown renderer
(:mod:`lifeline_mesh.ui.markdown`, run in a thread before the page: ``Viewer.body_html``),
the ``redactions`` filter (escapes, then marks ``[REDACTED:…]``) or the SVG builders'
``escape``; no template marks entry text safe.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from lifeline.wording import count
from lifeline_mesh.ui.links import Links
from lifeline_mesh.ui.section import Section
from lifeline_mesh.ui.viewer import Viewer

__all__ = ["ENV", "NavItem", "links_for", "page"]


def _when(ts: object) -> str:
    text = str(ts or "")
    return text.replace("T", " ")[:19] + (" UTC" if text.endswith("Z") else "")


def _epoch(seconds: object) -> str:
    if not isinstance(seconds, int | float):
        return "never"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


_MARKERS = re.compile(r"\[(?:REDACTED:[A-Za-z0-9_.-]{1,40}|TRUNCATED: [^\]\n]{1,200})\]")


def _redactions(text: object) -> Markup:
    """Untrusted text escaped, then its redaction and truncation markers shown as such."""
    escaped = str(escape(str(text or "")))
    return Markup(_MARKERS.sub(lambda m: f'<mark class="redacted">{m.group(0)}</mark>', escaped))


def _short(entry_id: object) -> str:
    return str(entry_id)[:12]


ENV = Environment(
    loader=PackageLoader("lifeline_mesh.ui", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters["when"] = _when
ENV.filters["short"] = _short
ENV.filters["epoch"] = _epoch
ENV.filters["redactions"] = _redactions
ENV.filters["counted"] = count  # `{{ n|counted("entry", "entries") }}`: 1 entry, 2 entries


@dataclass(frozen=True, slots=True)
class NavItem:
    title: str
    url: str | None
    current: bool


def viewer_of(request: Request) -> Viewer:
    viewer: Viewer = request.app.state.viewer
    return viewer


def links_for(request: Request) -> Links:
    viewer = viewer_of(request)
    links = Links(request.url.path, static=viewer.static)
    if viewer.on_link is not None:
        links.on_link = viewer.on_link
    return links


def page(
    request: Request,
    template: str,
    *,
    section: str,
    title: str,
    line: str | None = None,
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    """Render ``template`` inside the site's frame."""
    viewer = viewer_of(request)
    sections: list[Section] = request.app.state.sections  # the app's (ui/sections/)
    links = links_for(request)
    current_line = line or viewer.default_line()
    nav = [
        NavItem(s.title, s.nav(links, current_line), s.key == section) for s in sections if s.title
    ]
    lines = [(name, links.truth(name), name == current_line) for name in viewer.lines()]
    html = ENV.get_template(template).render(
        links=links,
        nav=nav,
        lines=lines,
        line=current_line,
        static=viewer.static,
        title=title,
        **context,
    )
    return HTMLResponse(html, status_code=status)
