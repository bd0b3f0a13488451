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

__all__ = ["FoldedTruth", "Resolver", "Superseded", "TruthSource"]

Resolver = Callable[[Iterable[str], str], str]


@dataclass(frozen=True, slots=True)
class Superseded:
    """What is superseded, and by which correction in force (all ``recall`` needs)."""

    by: dict[str, str]

    def is_superseded(self, entry_id: str) -> bool:
        return entry_id in self.by


class TruthSource(Protocol):
    """The truth of one open line, read from what its backend keeps."""

    async def state(self) -> State:
        """The whole folded state."""
        ...

    async def shown(
        self,
        *,
        thread: str | None,
        recent: int,
        max_items: int,
        resolve: Resolver,
        items: ItemMemo | None = None,
    ) -> tuple[State, Truth, str | None]:
        """The state and truth a context reads, and ``thread`` resolved by ``resolve`` (see
        :func:`~lifeline.truth.tableview.shown_state`): bounded by the budget where tables
        are kept (the items already read kept in ``items``); the whole state elsewhere."""
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

    async def shown(
        self,
        *,
        thread: str | None,
        recent: int,
        max_items: int,
        resolve: Resolver,
        items: ItemMemo | None = None,
    ) -> tuple[State, Truth, str | None]:
        state = await FoldedTruth.state(self)
        if thread is not None:
            thread = resolve(state.threads, thread)
        return state, derive(state), thread

    async def superseded(self) -> Superseded:
        return Superseded(derive(await FoldedTruth.state(self)).superseded)
