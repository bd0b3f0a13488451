"""A small picture of the mesh as this node sees it: itself in the middle, its peers around,
each link coloured by how the last sync went. Pure: rows in, SVG out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape

from lifeline.wording import count

__all__ = ["peer_health", "render_topology"]

SIZE = 320
CENTER = SIZE // 2
RING = 110
MAX_PEERS = 24


def peer_health(row: dict[str, Any]) -> str:
    """ok, failing or never (no sync yet)."""
    if row.get("failures"):
        return "failing"
    return "ok" if row.get("last_sync_at") else "never"


def render_topology(node_label: str, peers: Sequence[dict[str, Any]]) -> Markup:
    shown = list(peers)[:MAX_PEERS]
    parts: list[str] = []
    for n, row in enumerate(shown):
        angle = 2 * math.pi * n / max(len(shown), 1) - math.pi / 2
        x = round(CENTER + RING * math.cos(angle))
        y = round(CENTER + RING * math.sin(angle))
        health = peer_health(row)
        name = str(row.get("node_id") or row.get("address") or "?")
        title = f"{row.get('address')} ({name}): {health}"
        parts.append(
            f'<g class="peer {health}"><title>{escape(title)}</title>'
            f'<line class="link" x1="{CENTER}" y1="{CENTER}" x2="{x}" y2="{y}"/>'
            f'<circle cx="{x}" cy="{y}" r="9"/>'
            f'<text x="{x}" y="{y + 24}" text-anchor="middle">{escape(name[:14])}</text></g>'
        )
    label = f"This node and {count(len(shown), 'peer')}"
    me = (
        f'<g class="self"><title>{escape(node_label)}</title>'
        f'<circle cx="{CENTER}" cy="{CENTER}" r="14"/>'
        f'<text x="{CENTER}" y="{CENTER + 32}" text-anchor="middle">this node</text></g>'
    )
    return Markup(  # peer text above went through escape()
        f'<svg xmlns="http://www.w3.org/2000/svg" class="topology" role="img" '
        f'aria-label="{escape(label)}" width="{SIZE}" height="{SIZE}" '
        f'viewBox="0 0 {SIZE} {SIZE}">{"".join(parts)}{me}</svg>'
    )
