"""A stored entry row decoded and checked: the fields of an :class:`Entry`, or an error.

Every stream of a line (history, verify, the projection, the truth) reads rows through
here, so the usual shapes take the short paths: a one-parent list is sliced rather than
parsed, and the text columns are type-checked without building a generator.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from lifeline.entry import Entry, normalize_ts
from lifeline.errors import CorruptRow, InvalidEntry

__all__ = [
    "Fields",
    "Links",
    "decode_fields",
    "decode_row",
    "last_key",
    "parents_of",
    "stored_height",
    "ts_fault",
]

# The stored form with a day its month has (29 February aside): nearly every row, told
# apart by one match ([0-9], not \\d: no other script's digits).
_PLAIN_TS = re.compile(
    r"[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)"
    r"|(?:0[13578]|1[02])-31)T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z"
)

Fields = tuple[str, str, str, str, str, str, str, str, str, tuple[str, ...], str | None]


def decode_row(row: tuple[Any, ...]) -> Entry:
    """A row ``(seq, id, ts, ..., parents, dedup_key)`` as an Entry (see below)."""
    return Entry(*decode_fields(row))


def decode_fields(row: tuple[Any, ...]) -> Fields:
    """A row ``(seq, id, ts, ..., parents, dedup_key)`` as the fields of an Entry, in its
    order, checked (ValueError or TypeError when the row is damaged)."""
    _seq, eid, ts, kind, author, agent, provider, model, summary, body, parents, dedup = row
    plist = parents_of(parents)
    if not (
        type(eid) is str
        and type(ts) is str
        and type(kind) is str
        and type(author) is str
        and type(agent) is str
        and type(provider) is str
        and type(model) is str
        and type(summary) is str
        and type(body) is str
    ):
        raise ValueError("a text column holds a non-text value")
    if dedup is not None and not isinstance(dedup, str):
        raise ValueError("dedup_key column holds a non-text value")
    return (eid, ts, kind, author, agent, provider, model, summary, body, plist, dedup)


def ts_fault(ts: str) -> str | None:
    """Why a stored ts is not a time, or None when it is one. Every writer stores the form
    of :func:`lifeline.entry.format_ts`; another ISO 8601 time (lifeline-context wrote
    some) is a time too. A row whose ts is none was altered: its order in the stream, the
    projection (which ``ingest`` refuses) and the audit of its time all depend on it."""
    if _PLAIN_TS.fullmatch(ts):
        return None
    try:
        normalize_ts(ts, naive_utc=True)
    except InvalidEntry:
        return f"ts {ts[:40]!r} is not a time (ISO 8601, in the years 1 to 9999)"
    return None


def stored_height(entry_id: str, height: Any) -> int:
    """A row's height as read (:class:`CorruptRow` when it is not an integer: the row was
    altered, and the write path, the sync keys and the stream order are built on it)."""
    if type(height) is int:
        return height
    raise CorruptRow(
        f"entry {str(entry_id)[:12]}'s row holds the height {str(height)[:40]!r}, not a whole "
        "number: the row was altered; `lifeline verify` lists the damaged rows, "
        "`lifeline recover` rebuilds the line"
    )


def last_key(rows: list[tuple[Any, ...]]) -> tuple[int, str, str] | None:
    """The stream key ``(height, ts, id)`` of the last row of a page read as ``(height,
    seq, id, ts, ...)`` whose key columns hold what they should; None when none does. A
    damaged row (a text height sorts after every number) is left out of a render, so the
    last block written is the last row with a good key."""
    for row in reversed(rows):
        height, _seq, eid, ts = row[:4]
        if type(height) is int and type(eid) is str and type(ts) is str:
            return (height, ts, eid)
    return None


def parents_of(parents: Any) -> tuple[str, ...]:
    """The parents column as a tuple of ids (ValueError or TypeError when it is not a JSON
    list of strings)."""
    # The usual one-parent list is sliced rather than parsed (streams read every row).
    inner = parents[2:66] if type(parents) is str and len(parents) == 68 else ""
    if inner.isascii() and inner.isalnum() and parents[:2] == '["' and parents[66:] == '"]':
        return (inner,)
    plist = json.loads(parents)
    if not isinstance(plist, list) or not all(isinstance(p, str) for p in plist):
        raise ValueError("parents column is not a JSON list of ids")
    return tuple(plist)


class Links(NamedTuple):
    """What an audit's forward pass needs of an entry: its id, ts and parents."""

    id: str
    ts: str
    parents: tuple[str, ...]
