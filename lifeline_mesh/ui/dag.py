"""The DAG around one entry as an SVG drawing: pure layout, no I/O.

Rows are heights (older at the top, as the ledger grows downwards), entries in a row are
ordered by ``(ts, id)``, so the same window always gives the same picture. An entry with two
or more parents is a merge (drawn as a diamond), one with two or more children in the window
a fork (a ring around it), a correction's link to what it corrects a dashed red arrow, and a
superseded entry is greyed. Parents outside the window end in a short stub. Each entry is a
link (``<a>``, keyboard-focusable) with a ``<title>`` for screen readers and tooltips.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from lifeline.wording import count

__all__ = ["DagNode", "render_dag"]

COL_W = 230
ROW_H = 64
MARGIN = 28
RADIUS = 8
LABEL_CHARS = 26


@dataclass(frozen=True, slots=True)
class DagNode:
    id: str
    kind: str
    ts: str
    summary: str
    parents: tuple[str, ...]
    height: int
    superseded: bool = False


@dataclass(frozen=True, slots=True)
class _Placed:
    node: DagNode
    x: int
    y: int


def _layout(nodes: Sequence[DagNode]) -> dict[str, _Placed]:
    rows: dict[int, list[DagNode]] = {}
    for node in nodes:
        rows.setdefault(node.height, []).append(node)
    placed: dict[str, _Placed] = {}
    for row, height in enumerate(sorted(rows)):
        for col, node in enumerate(sorted(rows[height], key=lambda n: (n.ts, n.id))):
            placed[node.id] = _Placed(node, MARGIN + col * COL_W, MARGIN + row * ROW_H)
    return placed


def _label(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= LABEL_CHARS else flat[: LABEL_CHARS - 1] + "…"


def _edges(placed: dict[str, _Placed]) -> list[str]:
    out: list[str] = []
    for child in placed.values():
        node = child.node
        correction = node.kind == "correction"
        for parent_id in node.parents:
            parent = placed.get(parent_id)
            cls = "edge correction" if correction else "edge"
            if parent is None:  # a parent outside the window: a stub upwards
                out.append(
                    f'<line class="{cls} stub" x1="{child.x}" y1="{child.y - RADIUS}" '
                    f'x2="{child.x}" y2="{child.y - ROW_H // 2}"/>'
                )
                continue
            mid = (child.y + parent.y) // 2
            marker = ' marker-end="url(#corrects)"' if correction else ""
            out.append(
                f'<path class="{cls}" d="M{child.x},{child.y - RADIUS} C{child.x},{mid} '
                f'{parent.x},{mid} {parent.x},{parent.y + RADIUS}"{marker}/>'
            )
    return out


def _shape(p: _Placed, merge: bool) -> str:
    if merge:
        r = RADIUS + 2
        points = f"{p.x},{p.y - r} {p.x + r},{p.y} {p.x},{p.y + r} {p.x - r},{p.y}"
        return f'<polygon class="dot" points="{points}"/>'
    return f'<circle class="dot" cx="{p.x}" cy="{p.y}" r="{RADIUS}"/>'


def _node(p: _Placed, children: int, focus: str, href: str) -> str:
    node = p.node
    merge, fork = len(node.parents) >= 2, children >= 2
    classes = ["node", f"kind-{_css_word(node.kind)}"]
    roles = [w for w, on in (("merge", merge), ("fork", fork)) if on]
    if node.superseded:
        classes.append("superseded")
        roles.append("superseded")
    if node.id == focus:
        classes.append("focus")
    title = f"{node.kind} {node.id[:12]} {node.ts}: {node.summary}"
    if roles:
        title += f" ({', '.join(roles)})"
    ring = f'<circle class="fork-ring" cx="{p.x}" cy="{p.y}" r="{RADIUS + 5}"/>' if fork else ""
    text = f"{node.kind} · {_label(node.summary)}"
    return (
        f'<a href="{escape(href)}" class="{" ".join(classes)}"><title>{escape(title)}</title>'
        f"{ring}{_shape(p, merge)}"
        f'<text x="{p.x + RADIUS + 8}" y="{p.y + 4}">{escape(text)}</text></a>'
    )


def _css_word(kind: str) -> str:
    return "".join(c for c in kind.lower() if c.isalnum())[:20] or "other"


_DEFS = (
    '<defs><marker id="corrects" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
    'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
    'class="arrow"/></marker></defs>'
)


def render_dag(nodes: Sequence[DagNode], focus: str, href: Callable[[str], str]) -> Markup:
    """The SVG of ``nodes`` around ``focus``; ``href(id)`` gives each entry's link."""
    placed = _layout(nodes)
    if not placed:
        return Markup("")
    children: dict[str, int] = {}
    for p in placed.values():
        for parent_id in p.node.parents:
            children[parent_id] = children.get(parent_id, 0) + 1
    width = max(p.x for p in placed.values()) + COL_W
    height = max(p.y for p in placed.values()) + MARGIN
    body = _edges(placed) + [
        _node(p, children.get(i, 0), focus, href(i)) for i, p in sorted(placed.items())
    ]
    label = f"Graph of {count(len(placed), 'entry', 'entries')} around {focus[:12]}"
    return Markup(  # every piece of entry text above went through escape()
        f'<svg xmlns="http://www.w3.org/2000/svg" class="dag" role="group" '
        f'aria-label="{escape(label)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">{_DEFS}{"".join(body)}</svg>'
    )
