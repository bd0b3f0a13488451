"""Entries read as their wire JSON straight from SQLite, for a node sending a large batch.

A sending node used to read each row into an ``Entry`` and write its JSON again (most of a
sender's CPU in an initial sync: bench/history/figures-behind-the-code.md),
fetching the rows one by one. Here
SQLite writes the JSON of a whole chunk in one step. The text is what ``Entry.to_json``
gives, up to the escaping of a few characters, which any JSON reader reads alike: the
receiver parses the fields and recomputes the id from them (tests compare both forms).

Only rows whose columns have the shapes an entry needs are written this way (text where
text belongs, ``parents`` a JSON list of strings). The others are left to the caller,
which decodes them as ``get_many`` does: a damaged row is skipped with a note in the log,
never sent.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from lifeline.store.sqlite_writes import id_chunks

__all__ = ["entries_json"]

_ID_CHARS = 64
_JSON = (
    "json_object('agent',agent,'author',author,'body',body,'dedup_key',dedup_key,'id',id,"
    "'kind',kind,'model',model,'parents',json(parents),'provider',provider,"
    "'summary',summary,'ts',ts)"
)
_TEXT = ("id", "ts", "kind", "author", "agent", "provider", "model", "summary", "body")
_SOUND = " AND ".join(
    [
        *(f"typeof({c}) = 'text'" for c in _TEXT),
        "length(id) = 64",
        "typeof(dedup_key) IN ('text', 'null')",
        "CASE WHEN json_valid(parents) THEN json_type(parents) = 'array' AND NOT EXISTS"
        " (SELECT 1 FROM json_each(entries.parents) WHERE type <> 'text') ELSE 0 END",
    ]
)


def entries_json(
    conn: sqlite3.Connection, ids: Sequence[str]
) -> tuple[dict[str, bytes], list[str]]:
    """``(id -> JSON bytes of each sound stored entry among ids, ids to decode instead)``.

    One row per chunk of 500 ids: a row fetched gives up the interpreter lock, which a busy
    event loop holds for up to 5 ms (docs/decisions/0014). The second list holds the ids
    of a chunk SQLite could not write (e.g. text that is not UTF-8) and those not found
    sound; the caller reads them the slow way (absent ones are simply not found).
    """
    found: dict[str, bytes] = {}
    others: list[str] = []
    for chunk in id_chunks(list(ids), 500):
        marks = ",".join("?" * len(chunk))
        try:
            (text,) = conn.execute(
                f"SELECT group_concat(id || {_JSON}, char(10)) FROM entries"
                f" WHERE id IN ({marks}) AND {_SOUND}",
                chunk,
            ).fetchone()
        except (sqlite3.OperationalError, sqlite3.DataError, UnicodeDecodeError):
            others += chunk
            continue
        # JSON text holds no raw newline (SQLite escapes control characters in strings)
        for line in text.split("\n") if text else ():
            found[line[:_ID_CHARS]] = line[_ID_CHARS:].encode()
        others += [i for i in chunk if i not in found]
    return found, others
