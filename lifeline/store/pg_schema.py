"""The PostgreSQL schema of lines: one database holds many lines.

Measured design (docs/decisions/0029, research in docs/hub.md): ``lines`` has one row per
line, which is the line's write lock (``SELECT … FOR UPDATE``) and its whole-set fingerprint
(``n`` and ``token_sum``, kept by every write in the same transaction, so an in-sync check
reads one row). ``entries`` is LIST-partitioned with one partition per line, so the planner
never misjudges a young line inside a big table. Ids are ``bytea`` (32 bytes: byte order is
hex order); every compared text column is ``COLLATE "C"`` (the order SQLite and Python use);
an entry is kept as its JSON in a ``text`` column (``\\u0000`` stays escaped there, where
``text`` and ``jsonb`` refuse U+0000) and never cast.

Schemas are numbered migrations per component, as in SQLite (lifeline/store/schema.py); each
runs in one transaction with its record in ``schema_migrations``, under an advisory lock so
two processes opening the same database at once take turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import asyncpg
    from asyncpg.pool import PoolConnectionProxy

__all__ = [
    "BUCKET_HEIGHTS",
    "LEDGER",
    "Conn",
    "Migrations",
    "apply_pg_migrations",
    "line_id_of",
    "lock_key",
]

# A connection of its own or one lent by a pool.
Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"

# component -> ordered (version, list of statements)
Migrations = dict[str, Sequence[tuple[int, Sequence[str]]]]

# Heights per fingerprint bucket (lifeline/store/pg_buckets.py; decision 0033). Fixed: the
# stored buckets are sums over it.
BUCKET_HEIGHTS = 256
# A token (32 bytes, little-endian) as a number, for the buckets kept before migration 2.
_TOKEN_VALUE = (
    "(SELECT round(sum(get_byte(e.token, k)::numeric * power(256::numeric, k)))"
    " FROM generate_series(0, 31) AS k)"
)
_LOCK_KEY = 0x11FE11E  # pg_advisory_xact_lock key of schema changes and line creation


def lock_key() -> int:
    """The advisory lock key schema changes and line creation take turns on."""
    return _LOCK_KEY


LEDGER: Migrations = {
    "ledger": [
        (
            1,
            [
                """CREATE TABLE lines (
                    line_id   int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    name      text COLLATE "C" NOT NULL UNIQUE,
                    next_seq  bigint NOT NULL DEFAULT 1,
                    n         bigint NOT NULL DEFAULT 0,
                    token_sum bytea NOT NULL DEFAULT decode(repeat('00', 32), 'hex'),
                    id_sum    bytea NOT NULL DEFAULT decode(repeat('00', 32), 'hex'),
                    version   bigint NOT NULL DEFAULT 0
                )""",
                """CREATE TABLE entries (
                    line_id int NOT NULL,
                    id      bytea NOT NULL,
                    seq     bigint NOT NULL,
                    height  int NOT NULL,
                    ts      text COLLATE "C" NOT NULL,
                    dedup   bytea,
                    doc     text NOT NULL,
                    token   bytea GENERATED ALWAYS AS
                            (sha256(id || '\\x00'::bytea || decode(ts, 'escape'))) STORED,
                    PRIMARY KEY (line_id, id)
                ) PARTITION BY LIST (line_id)""",
                "CREATE UNIQUE INDEX entries_seq ON entries (line_id, seq)",
                "CREATE UNIQUE INDEX entries_dedup ON entries (line_id, dedup)"
                " WHERE dedup IS NOT NULL",
                "CREATE INDEX entries_order ON entries (line_id, height, ts, id)",
                "CREATE INDEX entries_keys ON entries (line_id, height, id) INCLUDE (token)",
                """CREATE TABLE links (
                    line_id int NOT NULL, parent bytea NOT NULL, child bytea NOT NULL,
                    PRIMARY KEY (line_id, parent, child))""",
                "CREATE INDEX links_child ON links (line_id, child)",
                """CREATE TABLE tips (
                    line_id int NOT NULL, id bytea NOT NULL, PRIMARY KEY (line_id, id))""",
                """CREATE TABLE externals (
                    line_id int NOT NULL, id bytea NOT NULL, line text COLLATE "C" NOT NULL,
                    PRIMARY KEY (line_id, id))""",
            ],
        ),
        (
            2,
            [
                """CREATE TABLE fp_buckets (
                    line_id   int NOT NULL,
                    bucket    int NOT NULL,
                    n         bigint NOT NULL,
                    token_sum numeric NOT NULL,
                    PRIMARY KEY (line_id, bucket))""",
                "INSERT INTO fp_buckets (line_id, bucket, n, token_sum)"
                f" SELECT e.line_id, e.height / {BUCKET_HEIGHTS}, count(*), sum({_TOKEN_VALUE})"
                f" FROM entries e GROUP BY e.line_id, e.height / {BUCKET_HEIGHTS}",
            ],
        ),
        (
            3,
            [
                # The dedup keys of this node's own writes (as ``dedup`` holds them), the
                # only ones a local write looks up; those held before count as its own
                # (decision 0115, as the line files' own_keys).
                """CREATE TABLE own_keys (
                    line_id int NOT NULL, key bytea NOT NULL, id bytea NOT NULL,
                    PRIMARY KEY (line_id, key))""",
                "INSERT INTO own_keys (line_id, key, id)"
                " SELECT line_id, dedup, id FROM entries WHERE dedup IS NOT NULL",
            ],
        ),
    ]
}


async def apply_pg_migrations(conn: Conn, migrations: Migrations) -> None:
    """Bring the database up to the newest version of every component in ``migrations``."""
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        ' component text COLLATE "C" NOT NULL, version int NOT NULL,'
        " applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (component, version))"
    )
    done = {
        (r[0], r[1]) for r in await conn.fetch("SELECT component, version FROM schema_migrations")
    }
    pending = [
        (component, version, statements)
        for component, steps in sorted(migrations.items())
        for version, statements in steps
        if (component, version) not in done
    ]
    for component, version, statements in pending:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
            again = await conn.fetchval(
                "SELECT 1 FROM schema_migrations WHERE component = $1 AND version = $2",
                component,
                version,
            )
            if again:
                continue
            for statement in statements:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_migrations (component, version) VALUES ($1, $2)",
                component,
                version,
            )


async def line_id_of(conn: Conn, name: str, *, create: bool) -> int | None:
    """The line's number; with ``create``, a new line gets its row and its partition in
    one transaction (two processes creating the same line at once: one makes it)."""
    found = await conn.fetchval("SELECT line_id FROM lines WHERE name = $1", name)
    if found is not None or not create:
        return None if found is None else int(found)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
        found = await conn.fetchval("SELECT line_id FROM lines WHERE name = $1", name)
        if found is None:
            found = await conn.fetchval(
                "INSERT INTO lines (name) VALUES ($1) RETURNING line_id", name
            )
            number = int(found)
            await conn.execute(
                f"CREATE TABLE entries_{number} PARTITION OF entries FOR VALUES IN ({number})"
            )
    return int(found)
