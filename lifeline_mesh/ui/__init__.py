"""The read-only web viewer (``lifeline-mesh ui``, ``serve --ui``): server-rendered pages
over the truth, the entries, the history and the mesh. See docs/viewer.md.

Modules: ``app`` (the routes, ``create_app``), ``viewer`` (``Viewer``: what the pages read),
``server`` (listening with uvicorn), ``defaults`` (the listen address and token variable,
read by the CLI's options), ``sections/`` (one module per page). The package imports
nothing eagerly, so `serve` reads the viewer's options without loading the viewer
(decision 0039).
"""

from __future__ import annotations

__all__: list[str] = []
