"""Where the MCP server meets the notary: the signatures recorded for an entry.

This build has no notary yet, so :func:`entry_signatures` reports that plainly instead of
an empty list (which would read as "unsigned").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lifeline.store.sqlite import SqliteStore

__all__ = ["entry_signatures"]


async def entry_signatures(root: Path, store: SqliteStore, entry_id: str) -> dict[str, Any]:
    """The attestations on ``entry_id`` in ``store``: {"available": bool, "items": [...]}."""
    del root, store, entry_id
    return {"available": False, "items": [], "note": "this node has no notary installed"}
