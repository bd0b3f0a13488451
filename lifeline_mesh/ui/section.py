"""What a section of the viewer is: its navigation slot and its routes.

The sections themselves are ``ui/sections/`` (listed once in its ``SECTIONS``); the app
holds that list and every page draws its navigation from the app's (``render.page``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.routing import BaseRoute

from lifeline_mesh.ui.links import Links

__all__ = ["Section"]


@dataclass(frozen=True, slots=True)
class Section:
    key: str
    title: str  # "" for pages outside the navigation (an entry belongs to no one section)
    nav: Callable[[Links, str | None], str | None]
    routes: list[BaseRoute] = field(default_factory=list)
