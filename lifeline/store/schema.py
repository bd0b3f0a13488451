"""The SQLite schema as numbered migrations, per component.

Each migration runs in the same transaction that records it in ``schema_migrations``, so a
crash leaves a database either before or after a migration, never half-way.

A line's schema is passed to the store when the line is opened (``SqliteStore.open(path,
schema=...)``): the ledger's migrations (here) plus those of the components that keep
tables beside the entries (truth, recall, the notary). :func:`line_schema` is the schema
every line gets: the ledger's and each component named in the ``lifeline.schema`` entry-point
group, so whichever command opens a line first creates every table, and nothing depends on
which modules happen to be imported (decision 0029).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from functools import lru_cache

__all__ = [
    "LEDGER",
    "Schema",
    "apply_migrations",
    "line_schema",
    "migrations_pending",
]

# component -> ordered (version, sql script)
Schema = Mapping[str, Sequence[tuple[int, str]]]

LEDGER: dict[str, list[tuple[int, str]]] = {
    "ledger": [
        (
            1,
            """
            CREATE TABLE entries (
                seq       INTEGER PRIMARY KEY AUTOINCREMENT,
                id        TEXT NOT NULL UNIQUE,
                ts        TEXT NOT NULL,
                kind      TEXT NOT NULL,
                author    TEXT NOT NULL,
                agent     TEXT NOT NULL,
                provider  TEXT NOT NULL,
                model     TEXT NOT NULL,
                summary   TEXT NOT NULL,
                body      TEXT NOT NULL,
                parents   TEXT NOT NULL,
                dedup_key TEXT,
                height    INTEGER NOT NULL
            );
            CREATE UNIQUE INDEX entries_dedup ON entries(dedup_key) WHERE dedup_key IS NOT NULL;
            CREATE INDEX entries_order ON entries(height, ts, id);
            CREATE TABLE edges (
                parent_id TEXT NOT NULL,
                child_id  TEXT NOT NULL,
                PRIMARY KEY (parent_id, child_id)
            ) WITHOUT ROWID;
            -- no index on child_id: no query looks edges up by child (parents are a column)
            CREATE TABLE tips (id TEXT PRIMARY KEY) WITHOUT ROWID;
            CREATE TABLE externals (id TEXT PRIMARY KEY, line TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            """,
        ),
        (
            2,
            # Parent links keyed by row number instead of by two 64-hex ids: a new entry's
            # parents are usually recent rows, so its link lands at the end of the index
            # instead of on a random page (at 100k entries the id-keyed table cost more than
            # the rest of a batched write). Links to parents not stored in this line
            # (cross-line) keep the parent's id. See
            # docs/decisions/0012-row-keyed-links-and-in-place-writes.md.
            """
            CREATE TABLE links (
                parent_seq INTEGER NOT NULL,
                child_seq  INTEGER NOT NULL,
                PRIMARY KEY (parent_seq, child_seq)
            ) WITHOUT ROWID;
            CREATE TABLE foreign_links (
                parent_id TEXT NOT NULL,
                child_seq INTEGER NOT NULL,
                PRIMARY KEY (parent_id, child_seq)
            ) WITHOUT ROWID;
            INSERT OR IGNORE INTO links
                SELECT p.seq, c.seq FROM edges e
                JOIN entries p ON p.id = e.parent_id
                JOIN entries c ON c.id = e.child_id;
            INSERT OR IGNORE INTO foreign_links
                SELECT e.parent_id, c.seq FROM edges e
                JOIN entries c ON c.id = e.child_id
                WHERE NOT EXISTS (SELECT 1 FROM entries p WHERE p.id = e.parent_id);
            DROP TABLE edges;
            """,
        ),
        (
            3,
            # Each synced set's whole-set fingerprint (count and sum of tokens), kept up to
            # date by every write in the same transaction, so an in-sync check reads one row
            # instead of the line (lifeline/store/summary.py; decision 0016). A line that
            # holds entries already gets its row computed from them on first use.
            """
            CREATE TABLE set_summaries (
                name  TEXT PRIMARY KEY,
                count INTEGER NOT NULL,
                total BLOB NOT NULL,
                mark  INTEGER NOT NULL
            ) WITHOUT ROWID;
            -- a new line's summary is known (empty) and kept from its first write on
            INSERT INTO set_summaries
                SELECT 'entries', 0, zeroblob(32), 0 WHERE NOT EXISTS (SELECT 1 FROM entries);
            """,
        ),
        (
            4,
            # The shallow boundary (git's .git/shallow): parents that entries of this line
            # name but that a shallow sync did not bring, with their heights, so those
            # entries are stored with their true heights and nothing takes the absent
            # parents for corruption. A parent that arrives later (a full sync deepens the
            # line) leaves the table; an empty table is a complete line. See
            # docs/decisions/0063-shallow-join.md.
            """
            CREATE TABLE shallow_boundary (
                id     TEXT PRIMARY KEY,
                height INTEGER NOT NULL
            ) WITHOUT ROWID;
            """,
        ),
        (
            5,
            # The dedup keys of this node's own writes, the only ones a local write with a
            # key looks up: a key that arrived with a peer's entry never makes a local
            # write return that entry (a member could squat MCP idempotency keys). The
            # keys held before count as the node's own. See
            # docs/decisions/0115-a-dedup-key-answers-only-this-nodes-writes.md.
            """
            CREATE TABLE own_keys (key TEXT PRIMARY KEY, id TEXT NOT NULL) WITHOUT ROWID;
            INSERT OR IGNORE INTO own_keys
                SELECT dedup_key, id FROM entries WHERE dedup_key IS NOT NULL;
            """,
        ),
    ],
}


def line_schema() -> dict[str, Sequence[tuple[int, str]]]:
    """The schema of a line: the ledger's, plus every installed component's."""
    return dict(_components())


@lru_cache(maxsize=1)
def _components() -> tuple[tuple[str, tuple[tuple[int, str], ...]], ...]:
    from importlib.metadata import entry_points  # ~50 ms of CPU: only once a line opens

    found: dict[str, tuple[tuple[int, str], ...]] = {
        name: tuple(steps) for name, steps in LEDGER.items()
    }
    for point in sorted(entry_points(group="lifeline.schema"), key=lambda p: p.name):
        steps = point.load()
        if steps:  # e.g. recall without FTS5 in this SQLite: no tables
            found[point.name] = tuple(sorted(steps))
    return tuple(found.items())


def migrations_pending(
    conn: sqlite3.Connection, schema: Schema, component: str | None = None
) -> bool:
    """Whether ``conn``'s file lacks a migration of ``schema`` (of ``component`` only,
    when given); a read-only check."""
    try:
        done = set(conn.execute("SELECT component, version FROM schema_migrations").fetchall())
    except sqlite3.OperationalError:
        return True
    return any(
        (c, v) not in done
        for c, steps in schema.items()
        if component in (None, c)
        for v, _ in steps
    )


def apply_migrations(conn: sqlite3.Connection, schema: Schema) -> None:
    """Bring ``conn`` (autocommit mode) up to the newest version of every component of
    ``schema`` (the ledger's first, whether named or not)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " component TEXT NOT NULL, version INTEGER NOT NULL, applied_at REAL NOT NULL,"
        " PRIMARY KEY (component, version))"
    )
    for component, steps in sorted({**schema, **LEDGER}.items(), key=_ledger_first):
        for version, script in steps:
            done = conn.execute(
                "SELECT 1 FROM schema_migrations WHERE component = ? AND version = ?",
                (component, version),
            ).fetchone()
            if done:
                continue
            conn.execute("BEGIN IMMEDIATE")
            try:
                again = conn.execute(
                    "SELECT 1 FROM schema_migrations WHERE component = ? AND version = ?",
                    (component, version),
                ).fetchone()
                if not again:
                    for statement in _statements(script):
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                        (component, version, time.time()),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite ended it itself (SQLITE_FULL): say that
                    conn.execute("ROLLBACK")
                raise


def _ledger_first(item: tuple[str, Sequence[tuple[int, str]]]) -> tuple[bool, str]:
    return item[0] != "ledger", item[0]


def _statements(script: str) -> list[str]:
    # executescript() would commit our transaction; split on complete statements instead.
    out: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
