"""The viewer's sections: one route module each, listed once here.

A section (``ui/section.py``) has a navigation slot (its title and where it starts for the
current line) and its routes. Adding one (as the Sessions pages were) is a new module with a
``SECTION`` and one more name in :data:`SECTIONS`; nothing else changes.
"""

from __future__ import annotations

from lifeline_mesh.ui.section import Section
from lifeline_mesh.ui.sections import entry, history, mesh, sessions, sessions_find, truth

__all__ = ["SECTIONS"]

SECTIONS: list[Section] = [
    truth.SECTION,
    history.SECTION,
    sessions.SECTION,
    sessions_find.SECTION,
    mesh.SECTION,
    entry.SECTION,
]
