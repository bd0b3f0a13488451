"""What an MCP session works on: the project root, its lines, who is writing.

Lines are opened per call, read-only in intent and never created: the node's sync writes
into the same SQLite files from another process, and a line that appears after start-up
(received from a peer) must be visible at once. A line that does not exist is an error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lifeline.ledger import Ledger
from lifeline.lines import DEFAULT_LINE, line_path, validate_line_name
from lifeline.plugins import AppendHook, load_append_hooks
from lifeline.store.sqlite import SqliteStore
from lifeline.validate import DEFAULT_LIMITS, Limits
from lifeline_mesh.identity import NodeIdentity, key_path

__all__ = ["Workspace"]


@dataclass(frozen=True, slots=True)
class Workspace:
    """One project seen by one writer (an agent, or a human at the CLI)."""

    root: Path
    agent: str
    author: str
    line: str = DEFAULT_LINE
    hooks: Sequence[AppendHook] = field(default_factory=tuple)
    limits: Limits = DEFAULT_LIMITS

    @classmethod
    def open(cls, root: Path, *, agent: str, author: str, line: str = DEFAULT_LINE) -> Workspace:
        """Load the append hooks once (they register their schema before any line opens)."""
        return cls(
            root=root,
            agent=agent,
            author=author,
            line=validate_line_name(line),
            hooks=tuple(load_append_hooks(root)),
        )

    def line_name(self, line: str | None) -> str:
        return validate_line_name(line) if line else self.line

    @asynccontextmanager
    async def store(self, line: str | None = None) -> AsyncIterator[SqliteStore]:
        """Open an existing line (NotFound names the lines there are)."""
        path = line_path(self.root, self.line_name(line), must_exist=True)
        store = await SqliteStore.open(path, create=False)
        try:
            yield store
        finally:
            await store.close()

    def ledger(self, store: SqliteStore) -> Ledger:
        """Local writes on ``store``, signed by the node when its notary hook is installed."""
        return Ledger(store, limits=self.limits, hooks=self.hooks)

    def node_id(self) -> str | None:
        """This node's id, or None when the project has no node identity yet."""
        path = key_path(self.root)
        if not path.exists():
            return None
        return NodeIdentity.load(path).node_id
