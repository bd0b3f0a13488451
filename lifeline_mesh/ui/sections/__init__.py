"""The viewer's sections: one route module each, listed once here.

A section has a navigation slot (its title and where it starts for the current line) and
its routes. Adding one (as the Sessions pages were) is a new module with a ``SECTION`` and
one more name in :data:`SECTIONS`; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.routing import BaseRoute

from lifeline_mesh.ui.links import Links

__all__ = ["SECTIONS", "Section"]


@dataclass(frozen=True, slots=True)
class Section:
    key: str
    title: str  # "" for pages outside the navigation (an entry belongs to no one section)
    nav: Callable[[Links, str | None], str | None]
    routes: list[BaseRoute] = field(default_factory=list)


def _sections() -> list[Section]:
    from lifeline_mesh.ui.sections import entry, history, mesh, sessions, sessions_find, truth

    return [
        truth.SECTION,
        history.SECTION,
        sessions.SECTION,
        sessions_find.SECTION,
        mesh.SECTION,
        entry.SECTION,
    ]


SECTIONS: list[Section] = _sections()
