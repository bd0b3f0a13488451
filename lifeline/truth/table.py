"""The truth kept as tables in the line's own database, brought up to date past a mark.

``truth_core`` holds the small accumulators of :class:`~lifeline.truth.state.State` (count,
digest, counters, the newest entries, pins, rewordings, integrity failures) and the highest
``entries.seq`` folded. The large ones are rows: tracked items (``truth_items``, each with
its *role*: in the decisions in force, in Open, a live bootstrap, or none), thread marks
(``truth_marks``: a thread's entries, checkpoints flagged), corrections and their targets,
and what is superseded (``truth_superseded``). A reader then loads only what it shows.

New rows always get a higher ``seq`` whatever order they arrive in (sync, other processes),
so :func:`catch_up` folds the rows past the mark with the same reducers as a full fold, in
one write transaction, and merges them. Supersession is a fixpoint over the correction
graph (:mod:`lifeline.truth.views`): when a correction arrives, or an item some correction
names, the graph is derived again from the corrections and the items they touch only, and
the roles that changed are updated. Every other item's role follows from its kind. Triggers
drop ``truth_core`` on any UPDATE or DELETE of ``entries``; the next read folds again.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable
from typing import Any

from lifeline.errors import StoreError
from lifeline.store.rows import decode_row
from lifeline.store.sqlite_reads import COLUMNS
from lifeline.truth.progress import fold_progress
from lifeline.truth.reducers import fold
from lifeline.truth.state import RECENT_KEEP, STATE_VERSION, State
from lifeline.truth.views import corrections_of

__all__ = [
    "CORE_FIELDS",
    "ROLE_OF_KIND",
    "SHOWN_FOLD",
    "TABLES",
    "TRUTH_MIGRATIONS",
    "catch_up",
    "core_of",
    "core_text",
    "derive_roles",
    "is_current",
    "merge_core",
    "read_core",
    "rebuild",
    "roles_from",
    "rows_of",
    "targets_text",
]

log = logging.getLogger(__name__)
_CHUNK = 5_000
_MOD = 2**256
_VARS = 500  # ids per IN (...) list
CORE_FIELDS = ("contributors", "kinds", "recent", "integrity", "pins", "rewords")
ROLE_OF_KIND = {"decision": "d", "open": "o", "bootstrap": "b"}
# A fold of at least this many rows is reported to the progress hook: the first read of a
# line whose tables are missing or of another STATE_VERSION (after an upgrade, or a line
# written by an older tree) folds every row, ~2 minutes at a million entries.
SHOWN_FOLD = 20_000


_V1 = """
CREATE TABLE truth_snapshot (
    slot INTEGER PRIMARY KEY CHECK (slot = 0),
    last_seq INTEGER NOT NULL,
    count INTEGER NOT NULL,
    state TEXT NOT NULL
);
CREATE TABLE truth_generation (
    slot INTEGER PRIMARY KEY CHECK (slot = 0),
    n INTEGER NOT NULL
);
INSERT INTO truth_generation VALUES (0, 0);
CREATE TRIGGER truth_snapshot_on_update AFTER UPDATE ON entries
BEGIN
    DELETE FROM truth_snapshot;
    UPDATE truth_generation SET n = n + 1;
END;
CREATE TRIGGER truth_snapshot_on_delete AFTER DELETE ON entries
BEGIN
    DELETE FROM truth_snapshot;
    UPDATE truth_generation SET n = n + 1;
END;
"""

# Version 2: the whole-state JSON snapshot gives way to tables (a 1M-entry line's snapshot
# was ~100 MB of JSON, read and derived whole by every `context`). Filled on first read.
_V2 = """
DROP TRIGGER truth_snapshot_on_update;
DROP TRIGGER truth_snapshot_on_delete;
DROP TABLE truth_snapshot;
CREATE TABLE truth_core (
    slot INTEGER PRIMARY KEY CHECK (slot = 0),
    last_seq INTEGER NOT NULL,
    count INTEGER NOT NULL,
    digest TEXT NOT NULL,
    ended TEXT NOT NULL,
    state TEXT NOT NULL
);
CREATE TABLE truth_items (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    ts TEXT NOT NULL,
    summary TEXT NOT NULL,
    why TEXT NOT NULL,
    thread TEXT NOT NULL,
    role TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX truth_items_role ON truth_items(role, ts, id);
CREATE TABLE truth_marks (
    thread TEXT NOT NULL,
    ts TEXT NOT NULL,
    id TEXT NOT NULL,
    cp INTEGER NOT NULL,
    PRIMARY KEY (thread, ts, id)
) WITHOUT ROWID;
CREATE INDEX truth_marks_cp ON truth_marks(thread, ts, id) WHERE cp = 1;
CREATE TABLE truth_corrections (id TEXT PRIMARY KEY, targets TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE truth_targets (
    target TEXT NOT NULL,
    cid TEXT NOT NULL,
    PRIMARY KEY (target, cid)
) WITHOUT ROWID;
CREATE TABLE truth_superseded (id TEXT PRIMARY KEY, by TEXT NOT NULL) WITHOUT ROWID;
CREATE TRIGGER truth_on_update AFTER UPDATE ON entries
BEGIN
    DELETE FROM truth_core;
    UPDATE truth_generation SET n = n + 1;
END;
CREATE TRIGGER truth_on_delete AFTER DELETE ON entries
BEGIN
    DELETE FROM truth_core;
    UPDATE truth_generation SET n = n + 1;
END;
"""

# The truth tables in a line (component "truth"; lifeline/store/schema.py, line_schema).
TRUTH_MIGRATIONS = [(1, _V1), (2, _V2)]

TABLES = (
    "truth_items",
    "truth_marks",
    "truth_corrections",
    "truth_targets",
    "truth_superseded",
)


def targets_text(targets: list[str]) -> str:
    """A correction's targets as ``truth_corrections.targets`` holds them."""
    return json.dumps(targets)


def _top(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0])


def read_core(conn: sqlite3.Connection) -> tuple[int, State, list[str]] | None:
    """(last seq folded, the small accumulators, threads ended) or None when absent/other."""
    row = conn.execute("SELECT last_seq, count, digest, ended, state FROM truth_core").fetchone()
    if row is None:
        return None
    state = core_of(int(row[1]), str(row[2]), row[4])
    return None if state is None else (int(row[0]), state, list(json.loads(row[3])))


def core_of(count: int, digest: str, text: str | bytes) -> State | None:
    """The small accumulators as ``truth_core`` holds them (None: another version)."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        return None
    state = State(count=count, digest=int(digest, 16))
    for name in CORE_FIELDS:
        setattr(state, name, data[name])
    return state


def core_text(state: State) -> str:
    """The small accumulators of ``state`` as ``truth_core.state`` holds them."""
    data: dict[str, Any] = {name: getattr(state, name) for name in CORE_FIELDS}
    data["version"] = STATE_VERSION
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def is_current(conn: sqlite3.Connection) -> bool:
    """Whether the tables cover every row of the line (a few primary-key reads)."""
    row = conn.execute(
        "SELECT last_seq, count, json_extract(state, '$.version') FROM truth_core"
    ).fetchone()
    if row is None or int(row[0]) != _top(conn) or row[2] != STATE_VERSION:
        return False
    fresh = conn.execute("SELECT count, mark FROM set_summaries WHERE name = 'entries'").fetchone()
    # the set's own count, when it is up to date, catches rows removed below the top
    return fresh is None or int(fresh[1]) != int(row[0]) or int(fresh[0]) == int(row[1])


def _write_core(conn: sqlite3.Connection, last: int, state: State, ended: Iterable[str]) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO truth_core VALUES (0, ?, ?, ?, ?, ?)",
        (last, state.count, f"{state.digest:064x}", json.dumps(sorted(ended)), core_text(state)),
    )


def merge_core(core: State, delta: State) -> None:
    """Add the small accumulators of ``delta`` (entries not folded before) to ``core``."""
    core.count += delta.count
    core.digest = (core.digest + delta.digest) % _MOD
    for name in ("contributors", "kinds"):
        mine: dict[str, int] = getattr(core, name)
        for key, n in getattr(delta, name).items():
            mine[key] = mine.get(key, 0) + n
    core.recent = sorted(core.recent + delta.recent)[-RECENT_KEEP:]
    core.integrity.update(delta.integrity)
    core.pins.update(delta.pins)
    core.rewords = sorted(set(core.rewords) | set(delta.rewords))


def _store_rows(conn: sqlite3.Connection, delta: State) -> None:
    rows = rows_of(delta)
    conn.executemany("INSERT INTO truth_items VALUES (?, ?, ?, ?, ?, ?, ?)", rows["truth_items"])
    conn.executemany("INSERT INTO truth_marks VALUES (?, ?, ?, ?)", rows["truth_marks"])
    conn.executemany("INSERT INTO truth_corrections VALUES (?, ?)", rows["truth_corrections"])
    conn.executemany("INSERT OR IGNORE INTO truth_targets VALUES (?, ?)", rows["truth_targets"])


def rows_of(delta: State) -> dict[str, list[tuple[Any, ...]]]:
    """The rows the entries folded into ``delta`` add to each table, in column order
    (``truth_targets`` may repeat a row: insert them ignoring duplicates)."""
    points = {(t, ts, i) for t, marks in delta.checkpoints.items() for ts, i in marks}
    return {
        "truth_items": [
            (i, kind, ts, summary, why, thread, ROLE_OF_KIND.get(kind, ""))
            for i, (kind, ts, summary, why, thread) in delta.items.items()
        ],
        "truth_marks": [
            (t, ts, i, 1 if (t, ts, i) in points else 0)
            for t, marks in delta.threads.items()
            for ts, i in marks
        ],
        "truth_corrections": [(c, targets_text(ts)) for c, ts in delta.corrections.items()],
        "truth_targets": [(t, c) for c, ts in delta.corrections.items() for t in ts],
    }


def _names_a_target(conn: sqlite3.Connection, ids: list[str]) -> bool:
    for start in range(0, len(ids), _VARS):
        part = ids[start : start + _VARS]
        marks = ",".join("?" * len(part))
        sql = f"SELECT 1 FROM truth_targets WHERE target IN ({marks}) LIMIT 1"
        if conn.execute(sql, part).fetchone():
            return True
    return False


def derive_roles(
    conn: sqlite3.Connection, rewords: list[str]
) -> tuple[dict[str, str], dict[str, str], dict[str, str], list[str]]:
    """The correction graph derived from the stored corrections and the items they name:
    (role each of those items should have, the role it has, what is superseded and by
    which correction, threads ended). Reads only.

    Only corrections and the items they name take part in supersession, replacement and
    questions (:mod:`lifeline.truth.views`), so the derivation sees those items alone.
    """
    corrections = conn.execute("SELECT id, targets FROM truth_corrections").fetchall()
    named = conn.execute(
        "SELECT i.id, i.kind, i.ts, i.thread, i.role FROM truth_items i"
        " WHERE i.id IN (SELECT id FROM truth_corrections UNION SELECT target FROM truth_targets)"
    ).fetchall()
    return roles_from(corrections, named, rewords)


def roles_from(
    corrections: Iterable[tuple[str, str]],
    named: Iterable[tuple[str, str, str, str, str]],
    rewords: list[str],
) -> tuple[dict[str, str], dict[str, str], dict[str, str], list[str]]:
    """:func:`derive_roles` from what it reads, whatever the database: the stored
    corrections ``(id, targets text)`` and the items they name ``(id, kind, ts, thread,
    role)``."""
    part = State(rewords=rewords)
    for cid, targets in corrections:
        part.corrections[cid] = json.loads(targets)
    roles: dict[str, str] = {}
    for i, kind, ts, thread, role in named:
        part.items[i] = [kind, ts, "", "", thread]
        roles[i] = role
    fixes = corrections_of(part)
    superseded, closed = fixes.superseded, fixes.closed
    as_decision, as_open = fixes.as_decision, fixes.as_open
    wanted: dict[str, str] = {}
    for i, (kind, *_rest) in part.items.items():
        role = ROLE_OF_KIND.get(kind, "")
        if i in superseded:
            role = ""
        elif i in as_decision:
            role = "d"
        elif i in as_open:
            role = "o"
        wanted[i] = role
    ended = sorted(closed | {part.items[q][4] for q in closed if part.items[q][4]})
    return wanted, roles, superseded, ended


def rederive(conn: sqlite3.Connection, rewords: list[str]) -> list[str]:
    """Derive the correction graph again and store what changed; returns threads ended."""
    wanted, roles, superseded, ended = derive_roles(conn, rewords)
    changed = [(role, i) for i, role in wanted.items() if role != roles[i]]
    conn.executemany("UPDATE truth_items SET role = ? WHERE id = ?", changed)
    old = dict(conn.execute("SELECT id, by FROM truth_superseded").fetchall())
    gone = [(i,) for i in old if i not in superseded]
    conn.executemany("DELETE FROM truth_superseded WHERE id = ?", gone)
    conn.executemany(
        "INSERT OR REPLACE INTO truth_superseded VALUES (?, ?)",
        [(i, by) for i, by in superseded.items() if old.get(i) != by],
    )
    return ended


def _fold_after(
    conn: sqlite3.Connection, core: State, last: int, behind: int, limit: int | None = None
) -> tuple[int, bool]:
    """Fold the rows past ``last`` (``behind`` of them; with ``limit``, at most that many);
    returns (new last, whether the graph must be derived)."""
    again = False
    shown = fold_progress() if behind >= SHOWN_FOLD and limit is None else None
    done = 0
    while limit is None or done < limit:
        size = _CHUNK if limit is None else min(_CHUNK, limit - done)
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM entries WHERE seq > ? ORDER BY seq LIMIT ?", (last, size)
        ).fetchall()
        if not rows:
            return last, again
        delta = State()
        for row in rows:
            try:
                entry = decode_row(row)  # the audit's rule for a stored row (lifeline verify)
            except (ValueError, TypeError) as exc:
                log.warning("truth: skipping undecodable row %s: %s", row[0], exc)
                delta.count += 1
                continue
            fold(delta, entry)
        _store_rows(conn, delta)
        merge_core(core, delta)
        done += len(rows)
        if shown is not None:
            shown(done, behind)
        again = again or bool(delta.corrections) or _names_a_target(conn, list(delta.items))
        last = int(rows[-1][0])
    return last, again


def _row_count(conn: sqlite3.Connection, *, exact: bool) -> int:
    """The rows of ``entries``: the set summary's count when it is up to date (one row;
    ``count(*)`` walks an index, which after another process's commit is read again from
    the file: tens of ms at 100k rows), else, or when ``exact``, counted."""
    if not exact:
        row = conn.execute(
            "SELECT count, mark = coalesce((SELECT max(seq) FROM entries), 0)"
            " FROM set_summaries WHERE name = 'entries'"
        ).fetchone()
        if row is not None and row[1]:
            return int(row[0])
    return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])


def catch_up(conn: sqlite3.Connection, limit: int | None = None) -> int:
    """Bring the tables up to every row of the line (inside a write transaction); with
    ``limit``, fold at most that many rows past the mark and stop (a background fold in
    parts, each its own transaction: node/read_upkeep.py). Returns the rows still past
    the mark."""
    found = read_core(conn)
    ended: list[str]
    if found is None:  # none yet, another version, or dropped by a trigger: fold it all
        for table in TABLES:
            conn.execute(f"DELETE FROM {table}")
        last, core, ended, again = 0, State(), [], True
    else:
        (last, core, ended), again = found, False
    total = _row_count(conn, exact=found is None)
    last, more = _fold_after(conn, core, last, total - core.count, limit)
    left = 0 if limit is None else _top(conn) - last
    if left <= 0 and core.count != total:
        if found is None:
            raise StoreError(f"truth fold saw {core.count} rows but the line holds {total}")
        # Rows went away or changed behind the triggers' back: trust nothing, fold it all.
        conn.execute("DELETE FROM truth_core")
        return catch_up(conn, limit)
    if again or more:
        ended = rederive(conn, core.rewords)
    _write_core(conn, last, core, ended)
    return max(left, 0)


def rebuild(conn: sqlite3.Connection) -> None:
    """Fold every row of the line into the tables again (inside a write transaction).

    A new generation: whoever kept what it read from the tables (a line's memo,
    lifeline/truth/memo.py) reads them again, e.g. after `verify` found a row that lies."""
    conn.execute("UPDATE truth_generation SET n = n + 1")
    conn.execute("DELETE FROM truth_core")
    catch_up(conn)
