"""Append hooks contributed by installed packages (e.g. lifeline_mesh's signer).

The ledger never imports the layers above it. A package that wants to act on every local
write (sign it, index it) declares a factory under the ``lifeline.append_hooks`` entry-point
group; ``factory(home)`` (the project's :class:`lifeline.home.Home`) returns a hook, or None
when it has nothing to do for that project (for instance no node identity there).

A hook that must commit with the write itself (a signature that may never be missing from
a stored entry) is a :class:`TransactionalHook`: on a store that can run it inside the
write's transaction (``lifeline.ledger.HookedAppender``), the ledger calls
``in_transaction(conn, new_entries)`` there, so the entries and the hook's rows commit
together or not at all; on any other store it is called after the write like a plain hook.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lifeline.entry import Entry
from lifeline.store.port import Store

if TYPE_CHECKING:
    from lifeline.home import Home

__all__ = ["AppendHook", "InTransaction", "TransactionalHook", "load_append_hooks"]

log = logging.getLogger(__name__)

AppendHook = Callable[[Store, Sequence[Entry]], Awaitable[None]]
# Runs inside a write transaction: (the store's connection, the entries newly stored). On
# a line file the connection is SQLite's and the work is done when it returns; on a hub's
# PostgreSQL line it is a ``lifeline.store.line_write.LineWrite`` and the work is the
# awaitable returned, which the store awaits inside the write.
InTransaction = Callable[[Any, Sequence[Entry]], Awaitable[None] | None]


@runtime_checkable
class TransactionalHook(Protocol):
    """An append hook whose work commits in the same transaction as the entries."""

    async def __call__(self, store: Store, entries: Sequence[Entry]) -> None:
        """After the write, for a store that cannot run :meth:`in_transaction`."""

    async def prepare(self, store: Store) -> None:
        """Once per store, before its first write (e.g. create the hook's tables)."""

    def in_transaction(self, conn: Any, entries: Sequence[Entry]) -> Awaitable[None] | None:
        """Inside the write transaction; raising rolls the whole write back (see
        :data:`InTransaction` for what ``conn`` is and when an awaitable is returned)."""


def load_append_hooks(home: Home) -> list[AppendHook]:
    # Imported here: importlib.metadata (and the email package under it) costs every
    # process that imports the ledger ~50 ms of CPU, and most never load a hook.
    from importlib.metadata import entry_points

    hooks: list[AppendHook] = []
    for point in sorted(entry_points(group="lifeline.append_hooks"), key=lambda p: p.name):
        factory = point.load()
        hook = factory(home)
        if hook is not None:
            log.debug("append hook %s active for %s", point.name, home.root)
            hooks.append(hook)
    return hooks
