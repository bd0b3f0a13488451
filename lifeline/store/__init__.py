"""Storage of lines: the port, the SQLite adapter and the in-memory twin."""

from __future__ import annotations

from lifeline.store.memory import MemoryStore
from lifeline.store.port import AppendResult, RowProblem, Store
from lifeline.store.sqlite import SqliteStore

__all__ = ["AppendResult", "MemoryStore", "RowProblem", "SqliteStore", "Store"]
