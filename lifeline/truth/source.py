"""What the truth layer reads of one line: the port, and the fold every backend can do.

A :class:`TruthSource` answers the state, what a context shows and what is superseded, for
one open line, from whatever the line keeps: the truth tables of a line file
(:class:`~lifeline.truth.snapshot.SqliteTruth`), the same tables in a hub's database
(:class:`~lifeline.truth.pg_view.PgTruth`, decision 0077), or nothing but the entries
(:class:`FoldedTruth`, a memory store's, and the fallback of the other two when their
tables cannot be brought up to date). Which one a line has follows the backend it was
opened on: :func:`~lifeline.truth.snapshot.truth_source` (decision 0088).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from lifeline.store.port import Store
from lifeline.truth.reducers import fold_all
from lifeline.truth.state import State
from lifeline.truth.tableview import ItemMemo
from lifeline.truth.views import Truth, derive

__all__ = ["FoldedTruth", "Resolver", "ShownQuery", "Superseded", "TruthSource"]

Resolver = Callable[[Iterable[str], str], str]


@dataclass(frozen=True, slots=True)
class Superseded:
    """What is superseded, and by which correction in force (all ``recall`` needs)."""

    by: dict[str, str]

    def is_superseded(self, entry_id: str) -> bool:
        return entry_id in self.by


@dataclass(frozen=True, slots=True, kw_only=True)
class ShownQuery:
    """What :meth:`TruthSource.shown` reads (see :func:`~lifeline.truth.tableview.shown_state`):
    ``thread`` (None for none), resolved by ``resolve(known thread names, thread)``; its
    newest ``recent`` marks; the decisions and open questions a section keeps when pruned to
    ``max_items``; ``items``, the items earlier calls on the same line read, reused and added
    to. Where no tables are kept only ``thread`` and ``resolve`` count: the state is whole."""

    thread: str | None
    recent: int
    max_items: int
    resolve: Resolver
    items: ItemMemo | None = None


class TruthSource(Protocol):
    """The truth of one open line, read from what its backend keeps."""

    async def state(self) -> State:
        """The whole folded state."""
        ...

    async def shown(self, query: ShownQuery) -> tuple[State, Truth, str | None]:
        """The state and truth a context reads, and ``query.thread`` resolved by
        ``query.resolve`` (see :func:`~lifeline.truth.tableview.shown_state`): bounded by the
        budget where tables are kept (the items already read kept in ``query.items``); the
        whole state elsewhere."""
        ...

    async def superseded(self) -> Superseded:
        """The superseded entries alone."""
        ...


class FoldedTruth:
    """The truth folded from the entries in memory: any store, without tables."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def state(self) -> State:
        return fold_all([e async for e in self.store.stream()])

    async def shown(self, query: ShownQuery) -> tuple[State, Truth, str | None]:
        state = await FoldedTruth.state(self)
        thread = query.thread
        if thread is not None:
            thread = query.resolve(state.threads, thread)
        return state, derive(state), thread

    async def superseded(self) -> Superseded:
        return Superseded(derive(await FoldedTruth.state(self)).superseded)
