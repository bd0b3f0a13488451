"""Importing a ledger written by lifeline-context 0.6: same line names, ids, ts, parents.

Three steps: *read* the foreign project (its ``.lifeline/*.db`` SQLite files opened
read-only, or its ``LIFELINE*.md`` files where no database exists), *plan* (pure: every id
recomputed, mismatches set aside, parents living in another imported line declared as
cross-line references), *apply* to our stores. Every step is idempotent, so re-running an
import changes nothing.

History is kept: an entry over this project's local size caps is imported (and counted),
only :data:`~lifeline.validate.HARD_LIMITS` refuse one; a ts without a zone reads as UTC.
From a database, an entry whose parent is found nowhere is set aside with its descendants.
From markdown (lossy: some entries cannot reproduce their id), every entry that reproduces
is kept, and the parents that do not are declared *external anchors* and reported.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lifeline.entry import Entry, normalize_ts
from lifeline.errors import ConfigError, InvalidEntry, NotFound
from lifeline.home import Home
from lifeline.lines import DEFAULT_LINE, EXTERNAL_ANCHOR, validate_line_name
from lifeline.migration.markdown import Rejected, parse_lc_markdown
from lifeline.store.port import Store
from lifeline.validate import DEFAULT_LIMITS, HARD_LIMITS, Limits, check_admissible, over_limits

__all__ = [
    "ForeignLine",
    "LinePlan",
    "append_keeping_times",
    "apply_plan",
    "decode_lc_row",
    "lc_sources",
    "plan_import",
    "read_lc_project",
]


_LOOKUP = 500  # ids per read of the entries a line already holds


@dataclass(slots=True)
class ForeignLine:
    """One line as read from the old tool: verified entries, and what was refused."""

    name: str
    source: Path
    entries: list[Entry] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    lossy: bool = False  # read from markdown: missing parents become external anchors


@dataclass(slots=True)
class LinePlan:
    """What importing one line will do."""

    name: str
    source: Path
    entries: list[Entry]
    externals: dict[str, str]
    rejected: list[Rejected]
    added: int = 0
    kept: int | None = None  # entries kept, when ``entries`` was streamed, not held
    anchors: list[str] = field(default_factory=list)  # parents declared external anchors
    over_caps: list[str] = field(default_factory=list)  # ids over the local size caps

    @property
    def size(self) -> int:
        """How many entries the line keeps from its source."""
        return len(self.entries) if self.kept is None else self.kept

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.name,
            "source": str(self.source),
            "entries": self.size,
            "added": self.added,
            "externals": self.externals,
            "anchors": self.anchors,
            "over_local_caps": self.over_caps,
            "rejected": [
                {"number": r.number, "id": r.entry_id, "reason": r.reason} for r in self.rejected
            ],
        }


def _admit(line: ForeignLine, number: str, entry: Entry) -> None:
    try:
        check_admissible(entry, HARD_LIMITS)
    except InvalidEntry as exc:
        line.rejected.append(Rejected(number, entry.id, str(exc)))
        return
    line.entries.append(entry)


def decode_lc_row(row: tuple[Any, ...]) -> tuple[Entry | None, Rejected | None]:
    """One row ``(seq, id, ts, dedup_key, payload)`` of a lifeline-context 0.6 database as
    an entry (its id as stored, not yet checked), or why it cannot be decoded."""
    seq, eid, ts, dedup, payload = row
    try:
        data = json.loads(payload)
        if not isinstance(data, dict):
            raise InvalidEntry("payload is not a JSON object")
        ts = normalize_ts(ts, naive_utc=True) if isinstance(ts, str) else ts
        data = data | {"id": eid, "ts": ts, "dedup_key": dedup}
        return Entry.from_dict(data, check=False), None
    except (ValueError, TypeError, InvalidEntry) as exc:
        return None, Rejected(str(seq), str(eid)[:64], f"undecodable row: {exc}")


LC_COLUMNS = frozenset({"seq", "id", "ts", "dedup_key", "payload"})


def open_lc_db(path: Path) -> sqlite3.Connection:
    """A read-only connection to a lifeline-context database, which may come from anyone (a
    teammate's file): its schema runs no function of ours (``trusted_schema``), damaged pages
    are errors rather than reads past a cell (``cell_size_check``), and its ``entries`` must
    be a table with the columns it wrote -- a view of that name could compute rows forever."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    try:
        for pragma in ("trusted_schema = OFF", "cell_size_check = ON", "query_only = ON"):
            conn.execute(f"PRAGMA {pragma}")
        kinds = [
            t for (t,) in conn.execute("SELECT type FROM sqlite_master WHERE name = 'entries'")
        ]
        missing = LC_COLUMNS - {r[1] for r in conn.execute("PRAGMA table_info(entries)")}
        if not kinds:
            raise sqlite3.DatabaseError("it has no 'entries' table")
        if kinds != ["table"]:
            raise sqlite3.DatabaseError(f"its 'entries' is a {kinds[0]}, not a table")
        if missing:
            raise sqlite3.DatabaseError(f"its 'entries' table has no {', '.join(sorted(missing))}")
    except BaseException:
        conn.close()
        raise
    return conn


def read_lc_db(path: Path) -> ForeignLine:
    """Read one lifeline-context database, read-only (its folder may be read-only too).
    Holds the whole line: ``lifeline import`` streams instead (:mod:`lifeline.migration.stream`)."""
    line = ForeignLine(validate_line_name(path.stem), path)
    try:
        conn = open_lc_db(path)
        try:
            rows = conn.execute(
                "SELECT seq, id, ts, dedup_key, payload FROM entries ORDER BY seq"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise ConfigError(
            f"cannot read {path} as a lifeline-context 0.6 ledger ({exc}); "
            "pass its project root or one of its .lifeline/*.db files"
        ) from exc
    for row in rows:
        entry, refused = decode_lc_row(row)
        if refused is not None:
            line.rejected.append(refused)
        elif entry is not None:
            _admit(line, str(row[0]), entry)
    return line


def _read_markdown(path: Path) -> ForeignLine:
    parts = path.name.split(".")
    name = DEFAULT_LINE if len(parts) == 2 else validate_line_name(".".join(parts[1:-1]))
    line = ForeignLine(name, path, lossy=True)
    accepted, line.rejected = parse_lc_markdown(path.read_text(encoding="utf-8"))
    for entry in accepted:
        _admit(line, "md", entry)
    return line


def lc_sources(path: Path) -> tuple[list[Path], list[Path]]:
    """The ``.db`` files of a lifeline-context project root, a folder of its .db files
    (such as its .lifeline/), or one .db file; else its ``LIFELINE*.md`` files."""
    if path.is_file() and path.suffix == ".db":
        return [path], []
    if not path.is_dir():
        raise NotFound(f"{path} is neither a lifeline-context project folder nor a .db file")
    # its root (holding .lifeline/), or a folder of its .db files (its .lifeline/ itself, or
    # that folder moved aside to migrate a project in place)
    dbs = Home(path).db_files()
    mds = sorted(path.glob("LIFELINE*.md"))
    if not dbs and not mds:
        dbs = sorted(path.glob("*.db"))
    if dbs:
        return dbs, []
    if not mds:
        raise NotFound(
            f"{path} holds neither .lifeline/*.db nor LIFELINE*.md; "
            "pass the root of a project written by lifeline-context 0.6"
        )
    return [], mds


def read_lc_project(path: Path) -> list[ForeignLine]:
    """The lines of a lifeline-context project (see :func:`lc_sources`), read whole."""
    dbs, mds = lc_sources(path)
    if dbs:
        return [read_lc_db(db) for db in dbs]
    return [_read_markdown(md) for md in mds]


def _lost(
    entry: Entry, keep: Mapping[str, Entry], have: set[str], home: Mapping[str, str], line: str
) -> list[str]:
    """Parents of ``entry`` found neither in its line, among stored ids, nor in another line."""
    return [
        p for p in entry.parents if p not in keep and p not in have and home.get(p, line) == line
    ]


def _plan_line(
    ln: ForeignLine, have: set[str], home: Mapping[str, str], limits: Limits
) -> LinePlan:
    keep = {e.id: e for e in ln.entries}
    rejected = list(ln.rejected)
    anchors: set[str] = set()
    if ln.lossy:
        anchors = {p for e in keep.values() for p in _lost(e, keep, have, home, ln.name)}
    changed = not ln.lossy
    while changed:  # drop entries whose parents cannot be reached, to a fixpoint
        changed = False
        for entry in list(keep.values()):
            gone = _lost(entry, keep, have, home, ln.name)
            if gone:
                del keep[entry.id]
                changed = True
                reason = f"parent {gone[0][:12]} is in none of the imported lines"
                rejected.append(Rejected("-", entry.id, reason))
    externals = {
        p: home[p]
        for e in keep.values()
        for p in e.parents
        if p not in keep and p not in have and home.get(p, ln.name) != ln.name
    }
    plan = LinePlan(ln.name, ln.source, list(keep.values()), externals, rejected)
    plan.anchors = sorted(anchors)
    plan.over_caps = [e.id for e in keep.values() if over_limits(e, limits) is not None]
    return plan


def plan_import(
    lines: list[ForeignLine],
    stored: Mapping[str, set[str]],
    limits: Limits = DEFAULT_LIMITS,
) -> list[LinePlan]:
    """Decide, per line, what to append and which parents are cross-line (pure).

    ``stored[line]`` holds the ids among the parents already in our line. From a database,
    an entry whose parent is found nowhere (and its descendants) is set aside and reported;
    from markdown, such parents become external anchors. ``limits`` are the local caps:
    entries over them are kept and listed in ``over_caps``.
    """
    home = {e.id: ln.name for ln in lines for e in ln.entries}
    return [_plan_line(ln, stored.get(ln.name, set()), home, limits) for ln in lines]


OpenStore = Callable[[str], AbstractAsyncContextManager[Store]]


async def apply_plan(plans: list[LinePlan], open_store: OpenStore) -> AsyncIterator[LinePlan]:
    """Declare the cross-line parents, then append each line's entries in one batch."""
    for plan in plans:
        async with open_store(plan.name) as store:
            for parent, other in sorted(plan.externals.items()):
                await store.declare_external(parent, other)
            for anchor in plan.anchors:
                await store.declare_external(anchor, EXTERNAL_ANCHOR)
            plan.entries, plan.added = await append_keeping_times(
                store, plan.entries, plan.rejected
            )
        yield plan


async def append_keeping_times(
    store: Store,
    entries: Sequence[Entry],
    rejected: list[Rejected],
    numbers: Mapping[str, str] | None = None,
) -> tuple[list[Entry], int]:
    """Append ``entries`` except those ``store`` holds at another ts, each reported in
    ``rejected`` (``numbers``: where it is in its file); the entries kept, how many new.

    A ts is outside the id, and the store keeps the earliest it is given: a file is no
    sync (it carries no signature, and anyone can edit it), so a copy dated otherwise
    never moves a held entry — an earlier ts would backdate it for good, and on a signed
    line break its author's signature (decision 0048 refuses such a copy from a peer).
    The check and the append are two transactions: an entry stored in between (a sync)
    is then dated as if this append had come first, which a sync allows.
    """
    held: dict[str, str] = {}
    for start in range(0, len(entries), _LOOKUP):
        chunk = [e.id for e in entries[start : start + _LOOKUP]]
        held.update((e.id, e.ts) for e in await store.get_many(chunk))
    kept: list[Entry] = []
    for entry in entries:
        stored = held.get(entry.id, entry.ts)
        if stored == entry.ts:
            kept.append(entry)
        else:
            number = (numbers or {}).get(entry.id, "-")
            rejected.append(Rejected(number, entry.id, _redated(entry.ts, stored)))
    return kept, (await store.append_many(kept)).count if kept else 0


def _redated(ts: str, stored: str) -> str:
    return (
        f"dated {ts}, but the line holds this entry at {stored}; its ts is not part of its "
        "id, so a changed one cannot be checked: the line's is kept"
    )
