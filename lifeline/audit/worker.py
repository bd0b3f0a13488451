"""One range of a line's rows checked in a process of its own: the ledger's audit of a large
line on every core (``lifeline/audit/parallel.py`` starts one per core).

``python -m lifeline.audit.worker PATH LO HI [late] [truth=MARK]`` reads the rows whose
``seq`` is in ``(LO, HI]`` in ``seq`` order (the table in its own order: the cheapest read
SQLite has) and checks each as the serial stream of ``lifeline/audit/line.py`` does:
decoded (else a corrupt row), its ts a time (else ``invalid-ts``), its id recomputed from
its content (else an id mismatch), its parents stored. A parent not among the range's own
rows is looked up by id in the file at the end (a row that does not decode does not count,
as in the stream). The findings carry each row's stream position ``(height, ts, id)``, so
the parent process lists them in the order the serial audit does.

Output on stdout: frames, each a 4-byte big-endian length and a ``marshal``'d list of
records: ``("n", rows)`` (progress), ``("id", pos, check, entry_id, detail)``,
``("row", pos, entry_id, detail)``, ``("parent", pos, entry_id, parent)`` (a parent
stored nowhere readable), ``("end", entries)``; on a SQLite error ``("error", text)``
and exit status 1. With ``late``, also ``("late", entry_ids)``: the decoded entries whose
time against their parents' the notary must look at (``lifeline-mesh verify``; see
:class:`LateCheck`). With ``truth=MARK``, the rows up to ``MARK`` are also checked against
the truth tables they derive (:class:`~lifeline.truth.check.RowCheck`), and
``("truth", result)`` comes before ``end``.

The usual row (text columns, no parent or one, ASCII) is checked without building an
:class:`Entry`; any other row, and any row that fails, takes the serial audit's own code
(``decode_fields``, :meth:`Entry.verify`), so every finding's words are the same.
"""

from __future__ import annotations

import hashlib
import marshal
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from lifeline.audit.times import invalid_ts
from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.store.rows import decode_fields, decode_row
from lifeline.store.sqlite_open import unwritable
from lifeline.truth.check import RowCheck

__all__ = ["PROGRESS_EVERY", "LateCheck", "check_range", "connect", "main", "row_key"]

PROGRESS_EVERY = 2_000  # rows between progress records (one frame each)
LOOKUP = 500  # ids per IN (...) lookup of parents outside the range
RECENT = 20_000  # entries whose ts a late check remembers, twice (parents are usually recent)
_COLUMNS = "seq, id, ts, kind, author, agent, provider, model, summary, body, parents, dedup_key"
_RANGE = f"SELECT {_COLUMNS}, height FROM entries WHERE seq > ? AND seq <= ? ORDER BY seq"

Record = tuple[Any, ...]


def row_key(entry_id: str) -> int | str:
    """What the audit's set of seen ids keeps of an id (as ``lifeline.audit.line``)."""
    try:
        return int(entry_id[:32], 16) if len(entry_id) == 64 else entry_id
    except ValueError:
        return entry_id


def connect(path: Path) -> sqlite3.Connection:
    """A read-only connection to the line file (immutable where no -shm can be made)."""
    uri = f"file:{quote(str(path))}?mode=ro"
    wal = path.with_name(path.name + "-wal")
    if unwritable(path) and not (wal.exists() and wal.stat().st_size):
        uri += "&immutable=1"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30)
    conn.execute("PRAGMA cache_size = -4096")  # a scan in table order needs no large cache
    return conn


class LateCheck:
    """Which entries the notary's forward pass must judge against their parents' times.

    An entry is *not* late when every parent is among the last entries of the range seen
    (two generations of :data:`RECENT`) with a time in the stored form no later than the
    entry's, itself in the stored form: then no parent rule can fire (``rules.entry_findings``
    skips exactly those parents). Every other entry with a parent is listed, a superset
    that the parent process judges in full (parents read from the file, their times too):
    a parent from far back or outside the range, missing, later, or with an odd time.
    """

    __slots__ = ("ids", "older", "recent")

    def __init__(self) -> None:
        self.recent: dict[str, str] = {}
        self.older: dict[str, str] = {}
        self.ids: list[str] = []

    def see(self, eid: str, ts: str, parents: tuple[str, ...] | str) -> None:
        """Note the decoded entry ``eid`` (``parents``: its ids, or one id, or "")."""
        canonical = len(ts) == 27 and ts[26] == "Z" and ts[10] == "T"
        if parents:
            for parent in (parents,) if type(parents) is str else parents:
                other = self.recent.get(parent)
                if other is None:
                    other = self.older.get(parent)
                if other is None or other > ts or not canonical:
                    self.ids.append(eid)
                    break
        if canonical:
            recent = self.recent
            recent[eid] = ts
            if len(recent) >= RECENT:
                self.older, self.recent = recent, {}

    def take(self) -> list[str]:
        out, self.ids = self.ids, []
        return out


def check_range(
    conn: sqlite3.Connection,
    lo: int,
    hi: int,
    send: Callable[[list[Record]], None],
    late: LateCheck | None = None,
    truth_mark: int | None = None,
) -> int:
    """Check the rows with ``lo < seq <= hi``; ``send`` is given the records a page at a
    time; ``late``, when given, notes each decoded entry; with ``truth_mark``, the rows up
    to it are checked against the truth tables (:class:`~lifeline.truth.check.RowCheck`).
    Returns the number of entries decoded."""
    truth = RowCheck(conn) if truth_mark is not None else None
    mark = truth_mark if truth_mark is not None else 0
    seen: set[int | str] = set()
    later: list[tuple[str, str, tuple[Any, Any, Any]]] = []  # (entry id, parent, position)
    out: list[Record] = []
    entries = rows = 0
    sha256 = hashlib.sha256
    for row in conn.execute(_RANGE, (lo, hi)):
        rows += 1
        if rows == PROGRESS_EVERY:
            out.append(("n", rows))
            if late is not None and late.ids:
                out.append(("late", late.take()))
            send(out)
            out, rows = [], 0
        seq, eid, ts, kind, author, agent, provider, model, summary, body, parents, dedup, h = row
        # The usual row: one parent sliced from its 68 characters (or none), text columns.
        if type(parents) is str and len(parents) == 68:
            parent = parents[2:66]
            usual = (
                parents[:2] == '["'
                and parents[66:] == '"]'
                and parent.isascii()
                and parent.isalnum()
            )
        else:
            parent = ""
            usual = parents == "[]"
        if (
            usual
            and type(eid) is str
            and type(ts) is str
            and type(kind) is str
            and type(author) is str
            and type(agent) is str
            and type(provider) is str
            and type(model) is str
            and type(summary) is str
            and type(body) is str
            and (dedup is None or type(dedup) is str)
        ):
            text = body.strip()
            form = (
                f"v2\n{len(kind)}:{kind}\n{len(author)}:{author}\n{len(agent)}:{agent}\n"
                f"{len(provider)}:{provider}\n{len(model)}:{model}\n{len(summary)}:{summary}\n"
                f"{len(text)}:{text}\n"
            )
            if parent:
                form += f"64:{parent}\n"
            if form.isascii() and sha256(form.encode("ascii")).hexdigest() == eid:
                entries += 1
                bad_ts = invalid_ts(eid, ts)
                if bad_ts is not None:
                    out.append(("id", (h, ts, eid), *bad_ts))
                seen.add(int(eid[:32], 16))  # a sha256 in hex: row_key, without the call
                if late is not None:
                    late.see(eid, ts, parent)
                if truth is not None and seq <= mark:
                    truth.intact(eid, ts, kind, provider, model, summary, body,
                                 (parent,) if parent else ())  # fmt: skip
                if parent:
                    try:
                        key: int | str = int(parent[:32], 16)
                    except ValueError:
                        key = parent
                    if key not in seen:
                        later.append((eid, parent, (h, ts, eid)))
                continue
        entries += _check_row(row, seen, later, out, late, truth if seq <= mark else None)
    if rows:
        out.append(("n", rows))
    if late is not None and late.ids:
        out.append(("late", late.take()))
    out.extend(_unresolved(conn, seen, later))
    if truth is not None:
        out.append(("truth", truth.result()))
    out.append(("end", entries))
    send(out)
    return entries


def _check_row(
    row: tuple[Any, ...],
    seen: set[int | str],
    later: list[tuple[str, str, tuple[Any, Any, Any]]],
    out: list[Record],
    late: LateCheck | None,
    truth: RowCheck | None,
) -> int:
    """Any other row, as the serial audit checks it; 1 when it decoded."""
    position = (row[12], row[2], row[1])
    try:
        entry = Entry(*decode_fields(row[:12]))
    except (ValueError, TypeError) as exc:
        out.append(("row", position, str(row[1])[:64], f"row {int(row[0])}: {exc}"))
        if truth is not None:
            truth.undecoded()
        return 0
    if truth is not None:
        truth.entry(entry)
    seen.add(row_key(entry.id))
    if late is not None:
        late.see(entry.id, entry.ts, entry.parents)
    for parent in entry.parents:
        if row_key(parent) not in seen:
            later.append((entry.id, parent, position))
    bad_ts = invalid_ts(entry.id, entry.ts)
    if bad_ts is not None:
        out.append(("id", position, *bad_ts))
    try:
        entry.verify()
    except InvalidEntry as exc:
        check = "id-mismatch" if "does not match" in str(exc) else "invalid-text"
        out.append(("id", position, check, entry.id, str(exc)))
    return 1


def _unresolved(
    conn: sqlite3.Connection,
    seen: set[int | str],
    later: list[tuple[str, str, tuple[Any, Any, Any]]],
) -> list[Record]:
    """The parent links whose parent is not a decodable row of the file, in range order."""
    outside = [link for link in later if row_key(link[1]) not in seen]
    if not outside:
        return []
    stored = _decodable(conn, list(dict.fromkeys(p for _e, p, _pos in outside)))
    return [("parent", pos, eid, p) for eid, p, pos in outside if p not in stored]


def _decodable(conn: sqlite3.Connection, ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(ids), LOOKUP):
        chunk = ids[start : start + LOOKUP]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(f"SELECT {_COLUMNS} FROM entries WHERE id IN ({marks})", chunk):
            try:
                found.add(decode_row(row).id)
            except (ValueError, TypeError):
                continue
    return found


def _frame(records: list[Record]) -> None:
    data = marshal.dumps(records)
    out = sys.stdout.buffer
    out.write(len(data).to_bytes(4, "big") + data)
    out.flush()


def main(argv: Sequence[str] | None = None) -> int:
    path, lo, hi, *mode = argv if argv is not None else sys.argv[1:]
    late = LateCheck() if "late" in mode else None
    marks = [int(m.partition("=")[2]) for m in mode if m.startswith("truth=")]
    try:
        conn = connect(Path(path))
        try:
            check_range(conn, int(lo), int(hi), _frame, late, marks[0] if marks else None)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        _frame([("error", str(exc))])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
