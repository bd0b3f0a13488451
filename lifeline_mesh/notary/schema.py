"""The notary's tables in a line's SQLite file, as schema migrations of the component
``notary`` (named in the ``lifeline.schema`` entry-point group, so every line is opened with them;
lifeline/store/schema.py, line_schema)."""

from __future__ import annotations

from lifeline_mesh.notary.seals import SEALS_MIGRATION

__all__ = ["NOTARY_COMPONENT", "NOTARY_MIGRATIONS", "items_table"]

NOTARY_COMPONENT = "notary"


def items_table(name: str, *, unique_id: bool = True) -> str:
    """The definition of a table of signed items (``attestations``, ``statements``), the
    id's uniqueness inline as the migrations made it, or left to an index of its own
    (decision 0143)."""
    unique = " UNIQUE" if unique_id else ""
    return f"""
            CREATE TABLE {name} (
                seq      INTEGER PRIMARY KEY AUTOINCREMENT,
                id       BLOB NOT NULL{unique},
                sort_key INTEGER NOT NULL,
                role     TEXT NOT NULL,
                subject  TEXT NOT NULL,
                node_id  TEXT NOT NULL,
                ts       TEXT NOT NULL,
                item     BLOB NOT NULL
            );
"""


NOTARY_MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        items_table("attestations")
        + """
            CREATE INDEX attestations_order ON attestations(sort_key, id);
            CREATE INDEX attestations_subject ON attestations(role, subject);
            CREATE TABLE witnessed (
                entry_id TEXT NOT NULL,
                att_id   BLOB NOT NULL,
                node_id  TEXT NOT NULL,
                ts       TEXT NOT NULL,
                PRIMARY KEY (entry_id, att_id)
            ) WITHOUT ROWID;
            """,
    ),
    (
        2,
        # Receipts indexed by a 16-hex-character key of each entry they name and the
        # receipt's row, instead of (entry id, receipt id, node, ts) per row: ~30 bytes
        # an index row instead of ~180, so a received batch rewrites far fewer index
        # pages. A key names candidates; the receipt itself says whether it names the
        # entry (see receipts_naming).
        """
            CREATE TABLE witnessed_keys (
                entry_key TEXT NOT NULL,
                att_seq   INTEGER NOT NULL,
                PRIMARY KEY (entry_key, att_seq)
            ) WITHOUT ROWID;
            INSERT OR IGNORE INTO witnessed_keys
                SELECT substr(w.entry_id, 1, 16), a.seq FROM witnessed w
                JOIN attestations a ON a.id = w.att_id;
            DROP TABLE witnessed;
            """,
    ),
    (
        3,
        # Attestations found by role and a 16-character key of their subject (entry ids
        # are random: the shorter the key, the fewer index pages a batch rewrites).
        # Queries use SUBJECT_KEY verbatim, so that SQLite uses this index, and then
        # compare the whole subject.
        """
            CREATE INDEX attestations_subject_key ON attestations(role, substr(subject, 1, 16));
            DROP INDEX attestations_subject;
            """,
    ),
    (
        4,
        # The second wave's statements (state, imported) in their own table: they are
        # reconciled as the set `statements`, which first-wave peers do not open, so
        # they never receive a kind they would refuse. Nothing signed is converted.
        items_table("statements")
        + """
            CREATE INDEX statements_order ON statements(sort_key, id);
            CREATE INDEX statements_signer ON statements(role, node_id, sort_key);
            CREATE INDEX statements_subject_key ON statements(role, substr(subject, 1, 16));
            """,
    ),
    (
        6,
        # Each table's whole-set fingerprint (ledger migration 3's set_summaries) is
        # recomputed from the rows after the migrations before this one, which may
        # have changed the tables without keeping it (decision 0016); an empty table's
        # row is known at once and kept from the first insert.
        """
            DELETE FROM set_summaries WHERE name IN ('attestations', 'statements');
            INSERT INTO set_summaries
                SELECT 'attestations', 0, zeroblob(32), 0
                WHERE NOT EXISTS (SELECT 1 FROM attestations);
            INSERT INTO set_summaries
                SELECT 'statements', 0, zeroblob(32), 0
                WHERE NOT EXISTS (SELECT 1 FROM statements);
            """,
    ),
    (
        8,
        # Who sent which copy of an entry (notary/provenance.py, decision 0048): an
        # unsigned copy's sender (its attributable source), a copy refused because its
        # author did not sign its ts, an unsigned ts replaced by the author's signed one.
        # Local to this node; never synced.
        """
            CREATE TABLE entry_sources (
                entry_id TEXT NOT NULL,
                ts       TEXT NOT NULL,
                source   TEXT NOT NULL,
                outcome  TEXT NOT NULL,
                at       TEXT NOT NULL,
                detail   TEXT NOT NULL,
                PRIMARY KEY (entry_id, ts, source, outcome)
            ) WITHOUT ROWID;
            """,
    ),
    (
        9,
        # Seals (decision 0149): an author's one signature over a batch of its author
        # signatures, kept with the span of sort keys they vouch for; never reconciled.
        SEALS_MIGRATION,
    ),
]
