"""What a transactional hook gets on a hub's PostgreSQL line (lifeline.plugins.InTransaction).

Kept apart from the PostgreSQL store's modules, so a hook can tell a hub's write from a
line file's without importing the database driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lifeline.store.pg_schema import Conn

__all__ = ["LineWrite"]


@dataclass(frozen=True, slots=True)
class LineWrite:
    """A write of one line in progress: its connection, inside the transaction that holds
    the line's lock, and the line's number (what a transactional hook writes with)."""

    conn: Conn
    line_id: int
