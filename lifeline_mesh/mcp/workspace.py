"""What an MCP session works on: the project's home, its lines, who is writing.

Lines are opened per call, read-only in intent and never created: the node's sync writes
into the same SQLite files from another process, and a line that appears after start-up
(received from a peer) must be visible at once. A line that does not exist is an error.
What is computed from a line (``context``) is kept in the line's
:class:`~lifeline.truth.memo.LineMemo` and answered again while no process changed it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from lifeline.ignore import refuse_tracked_databases
from lifeline.ledger import Ledger
from lifeline.lines import DEFAULT_LINE, validate_line_name
from lifeline.plugins import load_append_hooks
from lifeline.store.port import Store
from lifeline.truth.memo import LineMemo
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome

__all__ = ["Workspace"]


@dataclass(frozen=True, slots=True)
class Workspace:
    """One project seen by one writer (an agent, or a human at the CLI)."""

    home: NodeHome
    agent: str
    author: str
    line: str = DEFAULT_LINE
    memos: dict[str, LineMemo] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def open(
        cls, home: NodeHome, *, agent: str, author: str, line: str = DEFAULT_LINE
    ) -> Workspace:
        """A workspace on ``home``'s line ``line`` (the lines open with every component's
        tables: the line schema's entry points, lifeline/store/schema.py)."""
        return cls(
            home=home,
            agent=agent,
            author=author,
            line=validate_line_name(line),
        )

    def line_name(self, line: str | None) -> str:
        return validate_line_name(line) if line else self.line

    @asynccontextmanager
    async def store(self, line: str | None = None) -> AsyncIterator[Store]:
        """Open an existing line (NotFound names the lines there are)."""
        async with self.home.open_line(self.line_name(line)) as store:
            yield store

    def memo(self, line: str | None = None) -> LineMemo:
        """The memo of an existing line, made on first use (NotFound names the lines)."""
        name = self.line_name(line)
        memo = self.memos.get(name)
        if memo is None:
            memo = self.memos[name] = LineMemo.watching(self.home.lines.change_watch(name))
        return memo

    def close(self) -> None:
        """Let go of the memos' connections."""
        for memo in self.memos.values():
            memo.close()
        self.memos.clear()

    def ledger(self, store: Store) -> Ledger:
        """Local writes on ``store``, signed by the node when its notary hook is installed.

        The hooks are looked up again for each write (about 2 ms): a node identity created
        by `lifeline-mesh init` or `join` while the server runs signs the very next write.
        The size caps of `.lifeline/config.json` are read again too, as `lifeline log` does.
        An agent's write into a line git tracks is refused (decision 0141; asked once).
        """
        refuse_tracked_databases(self.home)
        return Ledger(store, limits=self.home.limits(), hooks=load_append_hooks(self.home))

    def node_id(self) -> str | None:
        """This node's id, or None when the project has no node identity yet."""
        identity = NodeIdentity.maybe_of(self.home)
        return identity.node_id if identity is not None else None
