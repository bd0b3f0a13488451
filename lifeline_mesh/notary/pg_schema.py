"""The notary's tables in a PostgreSQL database of lines (component ``notary``), the twin
of lifeline_mesh/notary/schema.py: every row carries its line's number, every compared text
is ``COLLATE "C"``, ids are ``bytea``. Writes take the line's lock (its ``lines`` row) first,
so the per-set totals in ``notary_totals`` stay exact with several hub processes."""

from __future__ import annotations

from lifeline.store.pg_schema import Migrations

__all__ = ["PG_NOTARY"]


def _items(table: str) -> list[str]:
    return [
        f"""CREATE TABLE {table} (
            line_id  int NOT NULL,
            id       bytea NOT NULL,
            sort_key bigint NOT NULL,
            role     text COLLATE "C" NOT NULL,
            subject  text COLLATE "C" NOT NULL,
            node_id  text COLLATE "C" NOT NULL,
            ts       text COLLATE "C" NOT NULL,
            item     bytea NOT NULL,
            PRIMARY KEY (line_id, id))""",
        f"CREATE INDEX {table}_order ON {table} (line_id, sort_key, id)",
        f"CREATE INDEX {table}_subject ON {table} (line_id, role, subject)",
        f"CREATE INDEX {table}_node ON {table} (line_id, role, node_id, sort_key)",
    ]


PG_NOTARY: Migrations = {
    "notary": [
        (
            1,
            [
                *_items("attestations"),
                *_items("statements"),
                # witness receipts by the entries they name (admission: when was it seen)
                """CREATE TABLE witnessed (
                    line_id int NOT NULL, entry_id text COLLATE "C" NOT NULL,
                    att_id bytea NOT NULL, PRIMARY KEY (line_id, entry_id, att_id))""",
                # each set's whole-set fingerprint: count and sum of ids (little-endian)
                """CREATE TABLE notary_totals (
                    line_id int NOT NULL, name text COLLATE "C" NOT NULL,
                    n bigint NOT NULL, token_sum bytea NOT NULL,
                    PRIMARY KEY (line_id, name))""",
            ],
        ),
        (
            2,
            [
                # who sent which copy of an entry (notary/provenance.py, decision 0048)
                """CREATE TABLE entry_sources (
                    line_id int NOT NULL, entry_id text COLLATE "C" NOT NULL,
                    ts text COLLATE "C" NOT NULL, source text COLLATE "C" NOT NULL,
                    outcome text COLLATE "C" NOT NULL, at text COLLATE "C" NOT NULL,
                    detail text NOT NULL,
                    PRIMARY KEY (line_id, entry_id, ts, source, outcome))""",
            ],
        ),
        (
            3,
            [
                # seals (decision 0149): never reconciled; the span of sort keys they vouch for
                """CREATE TABLE seals (
                    line_id int NOT NULL, id bytea NOT NULL, node_id text COLLATE "C" NOT NULL,
                    first_key bigint NOT NULL, last_key bigint NOT NULL, item bytea NOT NULL,
                    PRIMARY KEY (line_id, id))""",
                "CREATE INDEX seals_span ON seals (line_id, first_key, last_key)",
            ],
        ),
    ]
}
