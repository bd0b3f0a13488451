"""Which backend an open line is on, read in one place (issue 33, decision 0088).

The opener chose the backend: ``home.lines`` opens line files as
:class:`~lifeline.store.sqlite.SqliteStore` and a hub's lines as
:class:`~lifeline.store.postgres.PgStore` (decision 0060), the node's line objects hold one
of them (``lifeline_mesh/node/lines.py``), and a test or a tool may hold any other
:class:`~lifeline.store.port.Store` (memory). The store it handed out is the object held and
passed down; what a component does differently per backend — the truth tables, recall's
index, the notary's tables, the sessions' queries — is that component's :class:`PerBackend`:
one implementation per backend, next to each other in the component, given the store typed
as its adapter. :func:`on_backend` is the only place that tells the adapters apart; nothing
else tests a store's class or asks it for a capability (``tests/docs/test_backend_choice.py``).

Why a dispatch function and not a method of each adapter: the store layer may not import
the components above it, and a method typed with :class:`PerBackend` would tie the port,
this module and every adapter into one import cycle (``TYPE_CHECKING`` imports count:
``tests/docs/test_import_cycles.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from lifeline.store.port import Store
from lifeline.store.sqlite import SqliteStore
from lifeline.store.tiers import Summarized

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore

__all__ = ["FileOrEntries", "PerBackend", "on_backend", "summarized"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class PerBackend(Protocol[T_co]):
    """One component's work on a line, an implementation per backend."""

    def sqlite(self, store: SqliteStore) -> T_co:
        """A line file: SQLite, with the tables of the schema it was opened with."""
        ...

    def postgres(self, store: PgStore) -> T_co:
        """A line of a hub's PostgreSQL database, with its components' tables."""
        ...

    def plain(self, store: Store) -> T_co:
        """Any other store (memory): the entries alone, no table beside them."""
        ...


@dataclass(frozen=True, slots=True)
class FileOrEntries(Generic[T]):
    """A :class:`PerBackend` for work a line file does in its SQL (``file``) and any other
    line does from its entries through the store port (``entries``: a hub's line, memory)."""

    file: Callable[[SqliteStore], T]
    entries: Callable[[Store], T]

    def sqlite(self, store: SqliteStore) -> T:
        return self.file(store)

    def postgres(self, store: PgStore) -> T:
        return self.entries(store)

    def plain(self, store: Store) -> T:
        return self.entries(store)


def on_backend(store: Store, per: PerBackend[T]) -> T:
    """``per``'s implementation for the backend ``store`` was opened on."""
    if isinstance(store, SqliteStore):
        return per.sqlite(store)
    # Imported only past a line file: a laptop's command never loads the database driver.
    from lifeline.store.postgres import PgStore

    if isinstance(store, PgStore):
        return per.postgres(store)
    return per.plain(store)


class _Summaries:
    """The line's whole-set fingerprint, kept by each write (:class:`~lifeline.store.tiers.
    Summarized`): a line file's and a hub line's; a memory store keeps none."""

    def sqlite(self, store: SqliteStore) -> Summarized | None:
        return store

    def postgres(self, store: PgStore) -> Summarized | None:
        return store

    def plain(self, store: Store) -> Summarized | None:
        return None


_SUMMARIES = _Summaries()


def summarized(store: Store) -> Summarized | None:
    """``store`` as the keeper of its line's fingerprint (None: it keeps none)."""
    return on_backend(store, _SUMMARIES)
