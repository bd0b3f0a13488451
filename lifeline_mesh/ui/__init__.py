"""The read-only web viewer (``lifeline-mesh ui``, ``serve --ui``): server-rendered pages
over the truth, the entries, the history and the mesh. See docs/viewer.md."""

from __future__ import annotations

from lifeline_mesh.ui.app import create_app
from lifeline_mesh.ui.viewer import Viewer

__all__ = ["Viewer", "create_app"]
