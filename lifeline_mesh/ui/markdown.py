"""Entry bodies as HTML: CommonMark through markdown-it-py, with nothing from the text trusted.

Raw HTML in a body is shown as text (``html`` off), images are not rendered (a remote
image is a tracking beacon, and the page's policy allows none), and a link keeps its
target only when it is relative or uses one of :data:`SAFE_SCHEMES`; anything else
(``javascript:``, ``data:``, ``vbscript:``, ``file:``) stays as plain text. Bodies past
:data:`MAX_RENDERED_CHARS` are cut, with a marker saying so.

Rendering runs on the server's event loop, at up to ~8 µs a character for hostile text
(``"[" * N``: every bracket a possible link): 200,000 characters held every other request
for 2–3 s. Cut at the size a body written here may have, it is ~0.5 s at worst, once: the
last bodies rendered are kept (:data:`_KEPT`), so reloading a page, or a page of links to
one entry, renders it again for nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup, escape

__all__ = ["MAX_RENDERED_CHARS", "SAFE_SCHEMES", "is_safe_link", "render_markdown"]

SAFE_SCHEMES = ("http", "https", "mailto")
# An entry body is at most 64 KB when written here, but peers and imports may hold more;
# rendering past this many characters costs time and tells a reader nothing more.
MAX_RENDERED_CHARS = 64_000
_KEPT = 64  # bodies kept rendered: ~15 MB at most (64 KB of text, its HTML a few times that)
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")
_CONTROL = re.compile(r"[\x00-\x20\x7f]+")


def is_safe_link(url: str) -> bool:
    """True for relative links, fragments, and absolute links of :data:`SAFE_SCHEMES`."""
    # Browsers ignore control characters and spaces inside a scheme ("java\tscript:").
    squeezed = _CONTROL.sub("", url)
    found = _SCHEME.match(squeezed)
    if found is None:
        return not squeezed.startswith("//")  # protocol-relative: another host
    return found.group(1).lower() in SAFE_SCHEMES


def _link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
    return self.renderToken(tokens, idx, options, env)


def _build() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.validateLink = is_safe_link  # type: ignore[method-assign]  # the documented hook
    md.add_render_rule("link_open", _link_open)
    return md


_MD = _build()


def render_markdown(text: str, **_: Any) -> Markup:
    """HTML for an entry body (safe to insert into a page as is)."""
    more = len(text) - MAX_RENDERED_CHARS
    return _rendered(text[:MAX_RENDERED_CHARS], more) if more > 0 else _rendered(text, 0)


@lru_cache(maxsize=_KEPT)
def _rendered(text: str, more: int) -> Markup:
    html = _MD.render(text)
    if more:
        html += f'<p class="cut">… {more:,} more characters not shown.</p>'
    return Markup(html)  # markdown-it escaped every piece of the text


def plain(text: str) -> Markup:
    """Escaped text, for places that take no markup."""
    return escape(text)
