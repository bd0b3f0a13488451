"""The storage tiers above the store port, named (decision 0029).

Tier 1 is :class:`~lifeline.store.port.Store`: the entries of one line, with the same
semantics on every adapter (memory, SQLite, PostgreSQL). Two more capabilities are named
here, so callers ask for a capability instead of testing for one adapter class:

* :class:`Summarized` — the store keeps the line's whole-set fingerprint (count and sum of
  tokens) beside the entries, in the same transaction as each write, and gives back the
  JSON a sync sends without decoding it. Sync's in-sync check then reads no entry.
  SQLite (``set_summaries``) and PostgreSQL (the ``lines`` row) have it; memory does not.
* :class:`SqlLine` — the second tier: the line is a SQL database that other components
  (the truth tables, recall's index, the notary's attestations) keep their own tables in,
  created from the schema passed when the line is opened (``schema``, see
  :func:`~lifeline.store.schema.line_schema`), and whose transactions they join, so an
  admitted batch and its checks commit together. Its dialect is SQLite's: callbacks get a
  ``sqlite3.Connection``. Only :class:`~lifeline.store.sqlite.SqliteStore` has it; a hub's
  lines keep the notary's part in PostgreSQL tables of their own
  (``lifeline_mesh/notary/pg_storage.py``).

A component never tests a store for these: what it does per backend is its
:class:`~lifeline.store.backend.PerBackend`, chosen by :func:`~lifeline.store.backend.on_backend`
for the store the line was opened as (decision 0088); whether the line was opened with its
tables is the schema's (``component in store.schema``). One that cannot work without them
gets them from whoever opened the line: a node's line object hands its sessions the line
file with the notary's tables, or says that a hub line has none
(``lifeline_mesh/node/lines.py``, decision 0076).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

from lifeline.entry import Entry
from lifeline.store.port import AppendResult, Store
from lifeline.store.schema import Schema
from lifeline.store.summary import SetTotals

__all__ = ["SqlLine", "Summarized", "TokenRows"]

T = TypeVar("T")


@runtime_checkable
class Summarized(Protocol):
    """A store that keeps its whole-set fingerprint and serves a sync's JSON as stored."""

    async def entry_totals(self) -> SetTotals:
        """Count and sum of tokens of every entry: kept by each write, no entry read."""
        ...

    async def get_many_json(self, ids: Iterable[str]) -> list[bytes]:
        """``[e.to_json() for e in get_many(ids)]``, without decoding the entries."""
        ...


@runtime_checkable
class TokenRows(Protocol):
    """A store that keeps each entry's fingerprint token (PostgreSQL's generated column)."""

    async def snapshot_rows(self) -> list[tuple[int, bytes, bytes]]:
        """``(height, id bytes, token)`` of every entry, in key order."""
        ...


@runtime_checkable
class SqlLine(Store, Summarized, Protocol):
    """The second tier: one line in a SQL (SQLite) database that components share."""

    path: Path
    schema: Schema  # the components whose tables the line was opened with
    read_only: bool

    async def run_read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` outside any write transaction."""
        ...

    async def run_write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` in one write transaction (all or nothing)."""
        ...

    async def run_short_write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`run_write` for a short transaction (may run in place when idle)."""
        ...

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> Callable[[], T]:
        """``fn`` wrapped in a write transaction, to run on the store's connection."""
        ...

    def append_in(
        self,
        conn: sqlite3.Connection,
        entries: Sequence[Entry],
        externals: Sequence[tuple[str, str]] = (),
        *,
        received: bool = False,
    ) -> AppendResult:
        """``append_many`` inside a transaction of :meth:`run_write`, with ``externals``;
        ``received``: a peer's entries, whose dedup keys are not this node's."""
        ...

    async def append_hooked(
        self,
        entries: Sequence[Entry],
        within: Callable[[sqlite3.Connection, Sequence[Entry]], None],
    ) -> AppendResult:
        """``append_many`` with ``within(conn, new entries)`` in the same transaction."""
        ...
