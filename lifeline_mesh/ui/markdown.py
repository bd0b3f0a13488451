"""Entry bodies as HTML: CommonMark through markdown-it-py, with nothing from the text trusted.

Raw HTML in a body is shown as text (``html`` off), images are not rendered (a remote
image is a tracking beacon, and the page's policy allows none), and a link keeps its
target only when it is relative or uses one of :data:`SAFE_SCHEMES`; anything else
(``javascript:``, ``data:``, ``vbscript:``, ``file:``) stays as plain text. Bodies past
:data:`MAX_RENDERED_CHARS` are cut, with a marker saying so.

Hostile text costs the parser 0.5–1.5 s for a body of 64,000 characters (``"[" * N``:
every bracket a possible link) where prose of that size takes ~0.02 s. So a body is parsed
for at most :data:`RENDER_STEPS` steps (a rule tried at a line or at a character; such
prose takes ~5,000): past them it is shown as escaped plain text with a note, after ~0.15 s
at worst. The viewer renders a body in a thread, one at a time (``Viewer.body_html``), so
a page never holds its event loop, and the last bodies rendered are kept (:data:`_KEPT`),
so reloading a page, or a page of links to one entry, renders it again for nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.ruler import RuleOptionsType
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup, escape

from lifeline.wording import noun

__all__ = ["MAX_RENDERED_CHARS", "RENDER_STEPS", "SAFE_SCHEMES", "is_safe_link", "render_markdown"]

SAFE_SCHEMES = ("http", "https", "mailto")
# An entry body is at most 64 KB when written here, but peers and imports may hold more;
# rendering past this many characters costs time and tells a reader nothing more.
MAX_RENDERED_CHARS = 64_000
# The parser's steps for one body: prose of 64,000 characters takes ~5,000, 4,000 list items
# or 5,000 links ~20,000, 64,000 characters of brackets ~125,000 (each step 4–12 µs).
RENDER_STEPS = 20_000
_STEPS_LEFT = "lifeline_steps_left"  # the count down, in the parser's env of one body
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


class _TooMuchMarkup(Exception):
    """A body took more than :data:`RENDER_STEPS` steps of the parser."""


def _step(env: EnvType) -> None:
    left: int = env[_STEPS_LEFT]
    if left <= 0:
        raise _TooMuchMarkup  # out of every rule and the parse: its state is thrown away
    env[_STEPS_LEFT] = left - 1


def _block_step(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    _step(state.env)
    return False  # matches nothing: the next rule is tried


def _inline_step(state: StateInline, silent: bool) -> bool:
    _step(state.env)
    return False


def _build() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.validateLink = is_safe_link  # type: ignore[method-assign]  # the documented hook
    md.add_render_rule("link_open", _link_open)
    # Counted first wherever the parser tries its rules: nested blocks, the lines that may
    # end a paragraph, list or quote ("alt"), and link labels too.
    alt: RuleOptionsType = {"alt": ["paragraph", "reference", "blockquote", "list"]}
    md.block.ruler.before(md.block.ruler.get_all_rules()[0], "steps", _block_step, alt)
    md.inline.ruler.before(md.inline.ruler.get_all_rules()[0], "steps", _inline_step)
    return md


_MD = _build()


def render_markdown(text: str, **_: Any) -> Markup:
    """HTML for an entry body (safe to insert into a page as is)."""
    more = len(text) - MAX_RENDERED_CHARS
    return _rendered(text[:MAX_RENDERED_CHARS], more) if more > 0 else _rendered(text, 0)


@lru_cache(maxsize=_KEPT)
def _rendered(text: str, more: int) -> Markup:
    try:
        html = _MD.render(text, {_STEPS_LEFT: RENDER_STEPS})
    except _TooMuchMarkup:
        html = (
            '<p class="cut">Shown as plain text: this body has more markup than a page '
            f"renders ({RENDER_STEPS:,} steps of the parser).</p>\n"
            f'<pre class="plain">{escape(text)}</pre>\n'
        )
    if more:
        html += f'<p class="cut">… {more:,} more {noun(more, "character")} not shown.</p>'
    return Markup(html)  # markdown-it, or escape(), escaped every piece of the text


def plain(text: str) -> Markup:
    """Escaped text, for places that take no markup."""
    return escape(text)
