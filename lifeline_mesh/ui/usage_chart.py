"""Token usage as an SVG bar chart, drawn on the server: pure, no I/O (as the DAG is).

One horizontal bar per row of a usage report (a day, a model, a project, a tool or a
session), its length the row's total tokens on one scale, split into uncached input, cached
input, cache writes and output (classes ``seg-input`` … for the stylesheet: the content
security policy allows no inline style). Each bar carries a ``<title>`` with its figures and
cost for tooltips and screen readers; labels are escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

from lifeline.sessions.usage import UsageLine
from lifeline.wording import count, noun

__all__ = ["SEGMENTS", "render_usage_chart"]

SEGMENTS = (  # (field of Tokens, label, css class)
    ("input", "input", "seg-input"),
    ("cached", "cached input", "seg-cached"),
    ("cache_write", "cache writes", "seg-write"),
    ("output", "output", "seg-output"),
)
LABEL_W = 240
BAR_W = 560
ROW_H = 22
BAR_H = 14
MARGIN = 10
LABEL_CHARS = 34
MAX_ROWS = 200


def _label(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= LABEL_CHARS else flat[: LABEL_CHARS - 1] + "…"


def _tooltip(line: UsageLine, currency: str) -> str:
    t = line.tokens
    parts = [f"{label} {getattr(t, name):,}" for name, label, _c in SEGMENTS]
    cost = f"{line.cost:,.2f} {currency}" + (" + unpriced tokens" if line.unpriced else "")
    return (
        f"{line.label}: {t.total:,} {noun(t.total, 'token')} ({', '.join(parts)}; "
        f"reasoning {t.reasoning:,}); {cost}"
    )


def render_usage_chart(lines: Sequence[UsageLine], currency: str = "USD") -> Markup:
    """The SVG of ``lines`` (at most :data:`MAX_ROWS` bars), or nothing when empty."""
    shown = list(lines)[:MAX_ROWS]
    if not shown:
        return Markup("")
    top = max(line.tokens.total for line in shown) or 1
    body: list[str] = []
    for row, line in enumerate(shown):
        y = MARGIN + row * ROW_H
        x = LABEL_W
        bars = []
        for name, _label_text, css in SEGMENTS:
            value = getattr(line.tokens, name)
            width = value * BAR_W / top
            if value:
                bars.append(
                    f'<rect class="{css}" x="{x:.1f}" y="{y}" width="{max(width, 0.5):.1f}" '
                    f'height="{BAR_H}"/>'
                )
            x += width
        body.append(
            f'<g class="bar"><title>{escape(_tooltip(line, currency))}</title>'
            f'<text x="{LABEL_W - 6}" y="{y + BAR_H - 3}" text-anchor="end">'
            f"{escape(_label(line.label))}</text>{''.join(bars)}"
            f'<text x="{x + 4:.1f}" y="{y + BAR_H - 3}" class="figure">'
            f"{line.tokens.total:,}</text></g>"
        )
    width = LABEL_W + BAR_W + 120
    height = MARGIN * 2 + len(shown) * ROW_H
    label = f"Tokens by row: {count(len(shown), 'bar')}, the longest {top:,} {noun(top, 'token')}"
    return Markup(  # every label above went through escape()
        f'<svg xmlns="http://www.w3.org/2000/svg" class="usage" role="img" '
        f'aria-label="{escape(label)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">{"".join(body)}</svg>'
    )
