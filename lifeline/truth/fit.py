"""Fitting sections into a budget: shrink the *why* first, then omit, never silently.

Order of sacrifice: every item's why excerpt shrinks level by level; then whole items go,
section by section in ``DROP_ORDER``, by each section's policy. Each omitted id is recorded
on its section, which renders a marker listing them (when even the markers do not fit, they
name fewer ids and count the rest; the count is always there).
"""

from __future__ import annotations

from collections.abc import Callable

from lifeline.truth.pieces import Piece, Policy, Section

__all__ = ["DROP_ORDER", "fit", "omit_certain"]

DROP_ORDER = ("recent", "relevant", "resume", "open", "decisions")


def _victim(section: Section) -> int | None:
    """Index of the next piece to omit from ``section``, or None."""
    n = len(section.pieces)
    if section.policy is Policy.KEEP or n == 0:
        return None
    if section.policy is Policy.NEWEST:
        return 0
    if section.policy is Policy.BEST:
        return n - 1
    # ENDS: the survivors are always the first n//2 and the last n - n//2 items of the
    # section, so the cut is one contiguous middle run, whatever the count.
    return n // 2 - 1 if n % 2 == 0 else n // 2


def omit_certain(sections: list[Section], limit: int) -> None:
    """Omit up front what :func:`fit` is certain to omit, in characters: a section whose
    pieces, each at its shortest, are over ``limit`` alone loses its next victims while it
    stays over ``limit`` without them. No level can then fit, and every section before it in
    ``DROP_ORDER`` is emptied first whatever this one holds, so :func:`fit` reaches this
    state on its way and goes on from it the same: the same text, the same omissions in the
    same order, without rendering and measuring the thousands of items of a large line one
    at a time (decision 0078)."""
    for section in sections:
        if section.key not in DROP_ORDER:
            continue
        total = sum(len(p.levels[-1]) + 1 for p in section.pieces)
        while total > limit:
            index = _victim(section)
            if index is None:
                break
            rest = total - len(section.pieces[index].levels[-1]) - 1
            if rest <= limit:
                break
            section.omitted.append(section.pieces.pop(index).entry_id)
            total = rest


def fit(
    sections: list[Section],
    render: Callable[[list[Section]], str],
    measure: Callable[[str], int],
    limit: int,
) -> str:
    """Shrink and omit until ``render(sections)`` measures within ``limit``; return it."""
    if measure is len:
        omit_certain(sections, limit)
    pieces = [p for s in sections for p in s.pieces]
    depth = max((len(p.levels) for p in pieces), default=1)
    text = ""
    for level in range(depth):
        for piece in pieces:
            piece.level = level
        # In characters a text is at least as long as the pieces in it: a level whose
        # pieces alone are over the limit cannot fit, and is not rendered to find out.
        if measure is len and level < depth - 1 and sum(len(p.text) for p in pieces) > limit:
            continue
        text = render(sections)
        if measure(text) <= limit:
            return text
    by_key = {s.key: s for s in sections}
    for key in DROP_ORDER:
        section = by_key.get(key)
        if section is None:
            continue
        over = measure(text) - limit
        while over > 0:
            index = _victim(section)
            if index is None:
                break
            gone: Piece = section.pieces.pop(index)
            section.omitted.append(gone.entry_id)
            # Optimistic on purpose (the marker's growth is left out): the text is rendered
            # and measured exactly whenever the estimate says it fits, so the first count
            # of omissions that really fits is never skipped.
            over -= measure(gone.text + "\n")
            if over <= 0:
                text = render(sections)
                over = measure(text) - limit
        text = render(sections)
        if measure(text) <= limit:
            return text
    # Only the kept items and the markers are left: name fewer omitted ids, count the rest.
    for listed in (10, 0):
        for section in sections:
            section.listed = min(section.listed, listed)
        text = render(sections)
        if measure(text) <= limit:
            break
    return text
