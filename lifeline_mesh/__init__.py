"""lifeline_mesh: the node that syncs lifeline ledgers across a mesh of peers."""

from __future__ import annotations

__all__: list[str] = []
__version__ = "0.1.0"
