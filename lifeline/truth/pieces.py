"""Pieces of a context: one rendered item (at several lengths) and the sections holding them.

User text (summaries, bodies, checkpoint items) is always *inline*: one line, whitespace
collapsed, and placed after markup of ours (an id in backticks), so an entry cannot open a
heading or a section of its own. The context is plain text for a model: ``a < b``,
``Vec<T>`` and ``&`` reach it as written. Only an HTML comment opener ``<!--`` is written
``&lt;!--``: where the context is shown rendered (a ``context.md`` on a forge), it would hide
everything after it. Whoever renders the text as HTML escapes it there (the viewer does).
Control characters (ESC, BEL, C1…) are shown escaped (``\\x1b``): the context is printed on
terminals, and a member's entry must not drive them (decision 0128).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from enum import Enum

from lifeline.wording import count, shown_text

__all__ = ["Piece", "Policy", "Section", "clip", "inline", "short"]

SHORT_ID = 12


class Policy(Enum):
    """Which items of a section go first when over budget."""

    ENDS = "ends"  # keep the oldest and the newest; omit from the middle
    NEWEST = "newest"  # keep the newest; omit the oldest
    BEST = "best"  # kept in rank order; omit the lowest ranked (the last)
    KEEP = "keep"  # never omitted (pinned, identity)


def short(entry_id: str) -> str:
    return entry_id[:SHORT_ID]


def inline(text: str) -> str:
    """User text as one safe inline run: as written but for ``<!--`` and control characters
    (see the docstring)."""
    return shown_text(" ".join(text.split()).replace("<!--", "&lt;!--"))


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + "…"


@dataclass
class Piece:
    """One item; ``levels`` go from the full rendering to the shortest (why shrunk first)."""

    entry_id: str
    levels: tuple[str, ...]
    level: int = 0
    capped: int | None = None  # the cap its levels already hold (see ``cap``)

    @property
    def text(self) -> str:
        return self.levels[min(self.level, len(self.levels) - 1)]

    def cap(self, limit: int) -> None:
        """Per-item cap: no level may exceed ``limit`` characters."""
        if self.capped == limit:
            return
        self.capped = limit
        self.levels = tuple(
            clip(t, limit) if "\n" not in t else _clip_lines(t, limit) for t in self.levels
        )


def _clip_lines(text: str, limit: int) -> str:
    out: list[str] = []
    used = 0
    lines = text.split("\n")
    for n, line in enumerate(lines):
        if used + len(line) + 1 > limit:
            out.append(f"  - … {count(len(lines) - n, 'more line')} (`lifeline show` for all)")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


@dataclass
class Section:
    """A titled list of pieces; ``omitted`` collects what the budget left out."""

    key: str
    title: str
    policy: Policy
    stable: bool
    pieces: list[Piece] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)
    noun: str = "items"  # what the omitted marker counts, and its singular
    one: str = "item"
    empty: str = ""
    listed: int = 40  # omitted ids named in the marker; the rest are counted
    # the smallest omitted ids seen so far, and how many of ``omitted`` that covers: the
    # list only grows and ``listed`` only shrinks, so each render sorts only what is new
    smallest: tuple[int, list[str]] = (0, [])

    def first_omitted(self) -> list[str]:
        """The ``listed`` smallest omitted ids, sorted."""
        seen, best = self.smallest
        if seen != len(self.omitted):
            best = heapq.nsmallest(self.listed, [*best, *self.omitted[seen:]])
            self.smallest = (len(self.omitted), best)
        return best[: self.listed]
