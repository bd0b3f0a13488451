"""What a line's own tables say about its state, read inside a transaction.

* :func:`state_of`: the line's count, fingerprint and tips (what a state statement signs).
* :func:`last_state`: the newest state statement a node signed about the line.
* :func:`unsigned_entries`: entries no author signed and no node attested as imported.
* :func:`covering_states`: for one entry, each node's first state that witnesses it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from lifeline.errors import InvalidEntry
from lifeline.store.shallow import boundary_size
from lifeline.store.summary import ENTRIES_SET, read_totals, table_mark
from lifeline_mesh.notary.claims import file_key
from lifeline_mesh.notary.statement import Attestation, Role, decode

__all__ = [
    "IdSums",
    "StateOf",
    "covering_states",
    "fingerprint",
    "last_state",
    "state_of",
    "sum_fingerprint",
    "unsigned_entries",
]


def fingerprint(ids: Iterable[str]) -> str:
    """First 16 bytes (hex) of sha256(sum of ids mod 2^256 ‖ count as 8 bytes big-endian)."""
    total = 0
    count = 0
    for entry_id in ids:
        total += int(entry_id, 16)
        count += 1
    return _fingerprint(total, count)


def sum_fingerprint(total: int, count: int) -> str:
    """:func:`fingerprint` of ids whose sum (mod 2^256) and count are known."""
    return _fingerprint(total, count)


def _fingerprint(total: int, count: int) -> str:
    data = (total % (1 << 256)).to_bytes(32, "big") + count.to_bytes(8, "big")
    return hashlib.sha256(data).digest()[:16].hex()


# Per line file (path, device, inode): the highest entry row summed, the count and the sum
# of the ids. Entries are never removed and ids never change, so the sum of a line that
# grew is the one before plus the rows added since: a state statement after a session
# reads the new rows, not the whole line. Held by whoever opens the lines for many
# sessions (the node's line opener, node/lines.py); a caller without one sums them all.
IdSums = dict[tuple[str, int, int], tuple[int, int, int]]


def _id_sums(conn: sqlite3.Connection, sums: IdSums) -> tuple[int, int]:
    """(count, sum of ids) of the line's entries, from the rows added since last time."""
    key = file_key(conn)
    mark = table_mark(conn, "entries")
    held = sums.get(key) if key is not None else None
    if held is not None and held[0] > mark:
        held = None  # not the line it was: sum them all
    if held is not None:
        _, count, total = held
        for (entry_id,) in conn.execute("SELECT id FROM entries WHERE seq > ?", (held[0],)):
            total += int(entry_id, 16)
            count += 1
        if count != _entry_count(conn):
            held = None  # not the line it was (rows removed by hand): sum them all
    if held is None:
        count, total = 0, 0
        for (entry_id,) in conn.execute("SELECT id FROM entries"):
            total += int(entry_id, 16)
            count += 1
    total %= 1 << 256
    if key is not None:
        sums[key] = (mark, count, total)
    return count, total


def _entry_count(conn: sqlite3.Connection) -> int:
    """The line's entries, from its kept totals when they are up to date (one row; a
    count(*) walks an index of the whole line, ~5 ms at 100k, at every state signed)."""
    totals = read_totals(conn, ENTRIES_SET, "entries")
    if totals is not None:
        return totals.count
    return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])


@dataclass(frozen=True, slots=True)
class StateOf:
    count: int
    fingerprint: str
    tips: tuple[str, ...]
    shallow: bool = False  # the line holds what is in force, not its history (0063)


def state_of(conn: sqlite3.Connection, sums: IdSums | None = None) -> StateOf:
    """The line's state now (the fingerprint is a sum over every id: kept in ``sums`` per
    line file and brought up to date from the rows added since, see ``_id_sums``)."""
    count, total = _id_sums(conn, {} if sums is None else sums)
    tips = tuple(r[0] for r in conn.execute("SELECT id FROM tips ORDER BY id"))
    return StateOf(count, _fingerprint(total, count), tips, boundary_size(conn) > 0)


def last_state(conn: sqlite3.Connection, node_id: str, line: str) -> Attestation | None:
    """The newest well-formed state statement by ``node_id`` about ``line`` (any part)."""
    rows = conn.execute(
        "SELECT item FROM statements WHERE role = 'state' AND node_id = ?"
        " ORDER BY sort_key DESC LIMIT 8",
        (node_id,),
    )
    for (item,) in rows:
        try:
            att = decode(bytes(item))
        except InvalidEntry:
            continue  # a damaged row is no state; `verify` reports it
        if att.subject == line:
            return att
    return None


def unsigned_entries(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(id, ts) of the entries without an author attestation or an import statement."""
    signed = {
        r[0]
        for table, role in (("attestations", Role.AUTHOR), ("statements", Role.IMPORTED))
        for r in conn.execute(f"SELECT subject FROM {table} WHERE role = ?", (role.value,))
    }
    rows = conn.execute("SELECT id, ts FROM entries ORDER BY seq")
    return [(i, ts) for i, ts in rows if i not in signed]


# Entries a covering-state lookup may visit before it gives up (one entry's MCP view).
COVER_BUDGET = 200_000


def covering_states(
    conn: sqlite3.Connection, entry_id: str, budget: int = COVER_BUDGET
) -> list[Attestation]:
    """The earliest state statement of each node whose tips descend from (or are) the entry.

    Walks down from each statement's tips, earliest statement first, only through entries
    higher than the entry (an ancestor is always lower); what a walk explored without
    reaching the entry is not walked again. Gives up after ``budget`` entries.
    """
    row = conn.execute("SELECT height FROM entries WHERE id = ?", (entry_id,)).fetchone()
    if row is None:
        return []
    walk = _Walk(conn, entry_id, int(row[0]), budget)
    found: list[Attestation] = []
    rows = conn.execute("SELECT item FROM statements WHERE role = 'state' ORDER BY sort_key, id")
    for (item,) in rows:
        try:
            att = decode(bytes(item))
        except InvalidEntry:
            continue
        if all(f.node_id != att.node_id for f in found) and walk.reaches(att.summary_tips):
            found.append(att)
    return found


class _Walk:
    def __init__(self, conn: sqlite3.Connection, target: str, height: int, budget: int) -> None:
        self.conn, self.target, self.height, self.budget = conn, target, height, budget
        self.dead: set[str] = set()  # explored: the target is not below them

    def reaches(self, tips: Iterable[str]) -> bool:
        frontier = {t for t in tips if t not in self.dead}
        seen: set[str] = set()
        while frontier and self.budget > 0:
            if self.target in frontier:
                return True
            seen |= frontier
            self.budget -= len(frontier)
            frontier = self._parents(sorted(frontier)) - seen - self.dead
        if not frontier:
            self.dead |= seen  # fully explored without the target
        return False

    def _parents(self, ids: list[str]) -> set[str]:
        out: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT parents FROM entries WHERE id IN ({marks}) AND height > ?"
            for (plist,) in self.conn.execute(sql, (*chunk, self.height)):
                out.update(json.loads(plist))
        return out
