"""Earlier count claims of a node, read back at each admission, verified once per owner.

Admitting a state statement (or a first-wave summary) compares its count with every
earlier claim by the same node about the same line (a smaller count later is a rollback,
``admission.check_timing``). Those claims are read from the store and their signatures
checked again each time, so the cost of admitting one statement grew with the number the
node had signed: in a 30-minute soak at one write per 2 s per node, re-verifying them
became the largest share of a serving node's CPU, rising from minute to minute. A claim
is now verified once by the :class:`Claims` of its notary — a node's are its line
opener's, kept for the node's life — remembered by the hash of its stored bytes (damaged
bytes hash differently and are checked, and refused, afresh).

Reading every earlier claim back still grew with their number (a node signs a state after
each session that changed its line: ~800 per node in 20 minutes of the soak, 3-5 ms to read
back per admission). :class:`ClaimMarks` keeps, per line file and signer, the highest count
the node has claimed and the last row read: an honest node's new claim counts at least as
many entries as every earlier one, so none of them can contradict it and none is read
again. Only a claim below that mark (a rollback, or two statements signed together and
dated in the other order) reads every earlier claim, as before. The mark needs no
signature check: a row that does not verify only raises it (and so sends the admission to
the full read, which drops that row), never hides a verified claim.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from dataclasses import dataclass

from lifeline.errors import InvalidEntry
from lifeline_mesh.notary.statement import decode

__all__ = ["ClaimMarks", "Claims", "file_key"]

_MAX_KEPT = 200_000


class Claims:
    """What the notaries of a node's lines remember of the claims they read back: each one
    verified once (:meth:`stored`) and the marks of :class:`ClaimMarks`. Owned by whoever
    owns the notaries' lifetime — the node's line opener, across sessions
    (lifeline_mesh/node/lines.py); a notary made alone (a tool, a test) holds its own."""

    def __init__(self) -> None:
        self._verified: dict[bytes, tuple[str, int] | None] = {}  # by sha256 of the bytes
        self.marks = ClaimMarks()

    def stored(self, raw: bytes) -> tuple[str, int] | None:
        """(ts, count) of a stored summary or state statement; None if it does not verify."""
        key = hashlib.sha256(raw).digest()
        if key in self._verified:
            return self._verified[key]
        try:
            held = decode(raw)
            held.verify()
            claim: tuple[str, int] | None = (held.ts, held.summary_count)
        except InvalidEntry:
            claim = None  # a damaged local row is no evidence; `verify` reports it
        if len(self._verified) >= _MAX_KEPT:
            self._verified.clear()
        self._verified[key] = claim
        return claim


def file_key(conn: sqlite3.Connection) -> tuple[str, int, int] | None:
    """The line file behind ``conn`` (path, device, inode); None in memory."""
    path = str(conn.execute("PRAGMA database_list").fetchone()[2] or "")
    if not path:
        return None
    info = os.stat(path)
    return (path, info.st_dev, info.st_ino)


@dataclass(slots=True)
class _Mark:
    seq: int  # the highest row of the table read for this signer
    count: int  # the highest count among its verified claims up to that row


class ClaimMarks:
    """Per (line file, table, role, signer, line): the highest count claimed so far.

    Rows are read in the admitting transaction before it inserts anything, so every row
    read is committed; a table whose highest row is below the mark (a file restored from
    a copy) is read again from the start."""

    def __init__(self) -> None:
        self._marks: dict[tuple[object, ...], _Mark] = {}

    def highest(
        self,
        conn: sqlite3.Connection,
        table: str,
        role: str,
        node_id: str,
        line: str,
        rows_after: str,
        params: tuple[object, ...],
    ) -> int:
        """The highest verified count ``node_id`` claimed about ``line``. ``rows_after`` is
        a query of ``(seq, subject, item)`` whose last parameter is the row to read after;
        ``params`` are the ones before it."""
        where = file_key(conn)
        key = (where, table, role, node_id, line)
        mark = self._marks.get(key) if where is not None else None
        top = conn.execute(f"SELECT max(seq) FROM {table}").fetchone()[0] or 0
        if mark is None or mark.seq > top:
            mark = _Mark(0, -1)
        for seq, subject, item in conn.execute(rows_after, (*params, mark.seq)):
            mark.seq = max(mark.seq, int(seq))
            if subject != line:
                continue
            try:
                count = decode(bytes(item)).summary_count
            except InvalidEntry:
                continue  # a damaged row is no claim; `verify` reports it
            mark.count = max(mark.count, count)
        if where is not None:
            if len(self._marks) >= _MAX_KEPT:
                self._marks.clear()
            self._marks[key] = mark
        return mark.count
