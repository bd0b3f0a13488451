"""A change's rows over the Watch calls (decision 0046): read here for the peers that watch
this node, and remembered so that the same rows coming back from another peer cost no store
access.

The announcing side reads a line's new rows once per change (``read_rows``): the entries
whose row numbers the line watcher saw appear, parents first, with the author attestations
of those entries (and the enrollments of runners among their signers, as a session sends
them). The taking side admits them through the same sets and checks as a session's items
(:meth:`LiveRows.take`; the node decides first whom it takes rows from); :class:`HeldIds`
is what both sides know to be stored here. Rows this node wrote are announced on its own
tree of relays; rows taken a second time on the same tree say that their sender may leave
this node out of it (:class:`Taken`, decision 0083). A change the line watcher sees may
hold rows taken from several peers and rows written here: it is announced as runs, each
on its own tree (the last rows taken are kept with where they were stored), so that no
relayed row loses its tree and floods every link (decision 0094).
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import logging
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from lifeline.errors import BadSignature, InvalidEntry, LifelineError, RemoteProtocolError
from lifeline.home import Home
from lifeline.store.port import Store
from lifeline_mesh.notary.attestation_set import AttestationSet
from lifeline_mesh.notary.statement import Attestation, Role, decode
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.sets import ItemCodec, ParsedItem
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.port import ReconSet
from lifeline_mesh.transport.announce import MAX_CHANGE_ITEMS, ChangeItems, tree_of

if TYPE_CHECKING:
    from lifeline_mesh.node.lines import NodeLine, NodeLines

__all__ = [
    "HELD_IDS_PER_LINE",
    "TAKES_KEPT",
    "HeldIds",
    "LiveRows",
    "RawIds",
    "Taken",
    "read_rows",
]

log = logging.getLogger(__name__)

TAKES_KEPT = 16  # per line, the last rows taken kept with where they were stored


class _SessionLine(Protocol):
    async def mark(self) -> int | None: ...

    @property
    def store(self) -> Store: ...


class RowsSession(Protocol):
    """What taking rows needs of a session the node opened: its sets, its line (mark, store)."""

    @property
    def sets(self) -> Sequence[ReconSet]: ...

    @property
    def line(self) -> _SessionLine: ...


class Taken(enum.Enum):
    """What became of rows announced by a peer: stored here, held here already (taken
    first from another peer's Watch call: decision 0083; or written or synced here:
    ``OURS``), or refused (sync instead)."""

    STORED = "stored"
    HELD = "held"
    OURS = "ours"
    REFUSED = "refused"

    def __bool__(self) -> bool:
        return self is not Taken.REFUSED


HELD_IDS_PER_LINE = 8192  # recent entry ids remembered per line (a few minutes of writes)


class HeldIds:
    """Entry ids recently read or admitted here, per line, the oldest forgotten first."""

    def __init__(self, per_line: int = HELD_IDS_PER_LINE) -> None:
        self._per_line = per_line
        self._lines: dict[str, dict[str, None]] = {}

    def add(self, line: str, ids: Iterable[str]) -> None:
        held = self._lines.setdefault(line, {})
        for entry_id in ids:
            held.pop(entry_id, None)
            held[entry_id] = None
        while len(held) > self._per_line:
            del held[next(iter(held))]

    def holds(self, line: str, ids: Iterable[str]) -> bool:
        held = self._lines.get(line, {})
        return all(entry_id in held for entry_id in ids)


class RawIds:
    """The entry ids of raw entries parsed here lately, by a digest of their exact bytes,
    per line, the oldest forgotten first: a copy of rows already taken (a relay heard from
    several peers) is recognised without parsing it again (decision 0100). Only ids this
    node computed itself from those very bytes are kept, so a digest names its entry."""

    def __init__(self, per_line: int = HELD_IDS_PER_LINE) -> None:
        self._per_line = per_line
        self._lines: dict[str, dict[bytes, str]] = {}

    @staticmethod
    def digest(raw: bytes) -> bytes:
        return hashlib.blake2b(raw, digest_size=16).digest()

    def add(self, line: str, items: Iterable[ParsedItem]) -> None:
        known = self._lines.setdefault(line, {})
        for item in items:
            key = self.digest(item.raw)
            known.pop(key, None)
            known[key] = item.id.hex()
        while len(known) > self._per_line:
            del known[next(iter(known))]

    def ids(self, line: str, raws: Sequence[bytes]) -> list[str] | None:
        """The ids of ``raws`` when every one was parsed here lately, else None."""
        known = self._lines.get(line, {})
        out = [known.get(self.digest(raw)) for raw in raws]
        return None if None in out else [i for i in out if i is not None]


def _new_ids(conn: sqlite3.Connection, after: int, upto: int) -> list[str]:
    sql = "SELECT id FROM entries WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
    return [row[0] for row in conn.execute(sql, (after, upto, MAX_CHANGE_ITEMS + 1))]


async def read_rows(
    line: NodeLine, codec: EntryCodec, after: int, upto: int
) -> tuple[ChangeItems, list[str]] | None:
    """``line``'s rows ``after < seq <= upto`` to announce, with their entry ids; None
    when there are none or too many."""
    sql = line.sql_tables("announcing its rows")
    ids = await sql.run_read(lambda conn: _new_ids(conn, after, upto))
    if not ids or len(ids) > MAX_CHANGE_ITEMS:
        return None
    entries = await EntrySet(sql, codec).fetch([bytes.fromhex(i) for i in ids])
    notary = NotaryStore(sql)
    signed = await AttestationSet(notary).fetch(await notary.author_ids(ids))
    rows = ChangeItems(line.name, tuple(signed.raws), tuple(entries.raws), tuple(entries.externals))
    return (rows, ids) if rows.fits() else None


def _tree_key(rows: ChangeItems) -> str:
    return f"{rows.line}\0{rows.tree.hex()}"


class LiveRows:
    """A node's rows over the Watch calls: read once per change to announce, and taken from
    the peers it watches. ``session`` is the node's (``Node.session``: a session we dialed,
    which signs one state statement when anything was new)."""

    def __init__(
        self,
        home: Home,
        *,
        lines: NodeLines,
        session: Callable[..., AbstractAsyncContextManager[RowsSession]],
        max_item_bytes: int,
        node_id: str | None = None,
    ) -> None:
        self.home = home
        self._lines = lines  # the node's opener: its line files hold the rows announced
        self.node_id = node_id
        self.tree = tree_of(node_id)  # names the tree of our own writes (decision 0083)
        self._session = session
        self._max_item_bytes = max_item_bytes
        self.held = HeldIds()  # entry ids recently announced or taken: an echo is free
        # Of those, the ids taken over a Watch call, per (line, tree): a second copy of
        # them on the same tree came over a link that is not on that tree (a copy of rows
        # a session brought, or of another tree, says nothing)
        self._took = HeldIds()
        # Per line, the rows last taken and the row numbers they were stored at: announcing
        # a change made of them to our own watchers needs no read (nor to their senders),
        # and each keeps its tree when two were stored between two polls of the line.
        self._takes: dict[str, list[tuple[int, int, ChangeItems]]] = {}
        self._raw = RawIds()  # the rows parsed in takes, by their bytes: a copy is not parsed
        self.taken = {"changes": 0, "entries": 0, "refused": 0, "held": 0}
        self._take_locks: dict[str, asyncio.Lock] = {}  # per line: held while rows are admitted

    def taken_span(self, rows: ChangeItems) -> tuple[int, int] | None:
        """The rows (after, up to] at which ``rows``, just taken, were stored, when
        nothing else was written meanwhile (else None)."""
        for start, end, taken in reversed(self._takes.get(rows.line, ())):
            if taken.entries is rows.entries:
                return start, end
        return None

    async def read(self, line: str, after: int, upto: int) -> list[ChangeItems]:
        """A change's rows (``after < seq <= upto``), for the peers that take them over
        their Watch calls, in order: each run of rows taken from a peer's Watch call as it
        was taken (its tree, its sender), the rows between read from the line (on our tree
        when this node wrote them all, else on none: they go to every watcher), in slices
        of at most ``MAX_CHANGE_ITEMS`` rows. Empty when some cannot be read (then the change
        is announced without rows)."""
        takes = {
            start: (end, rows)
            for start, end, rows in self._takes.get(line, ())
            if after <= start < end <= upto
        }
        if list(takes) == [after] and takes[after][0] == upto:
            return [takes[after][1]]  # exactly rows just taken: no read
        out: list[ChangeItems] = []
        codec = EntryCodec(self.home.limits())
        async with self._lines.open(line) as opened:
            at = after
            while at < upto:
                if at in takes:
                    at, rows = takes[at]
                    out.append(rows)  # rows just taken from a peer's watch, as they came
                    continue
                until = min((start for start in takes if start > at), default=upto)
                until = min(until, at + MAX_CHANGE_ITEMS)  # a slice per announcement (0099)
                found = await read_rows(opened, codec, at, until)
                if found is None:
                    return []
                rows, ids = found
                self.held.add(line, ids)
                out.append(replace(rows, tree=self.tree if self._all_ours(rows) else b""))
                at = until
        return out

    async def take(self, source: str, rows: ChangeItems) -> Taken:
        """Admit rows announced by ``source``, as a session we dialed would (the same sets
        and checks). REFUSED when they cannot all be admitted here — a missing parent, a
        refused signature, an item over the cap — and the caller should sync instead;
        HELD when every entry was taken from another peer's call (first, or while this
        call waited for that take to end); OURS when every entry is held here otherwise
        (written here, or read to announce)."""
        line = rows.line
        try:
            if not rows.entries:
                return Taken.STORED
            # A copy of rows taken already is known by its bytes: no parse (decision 0100)
            entries: list[ParsedItem] | None = None
            ids = self._raw.ids(line, rows.entries)
            if ids is None:
                entries = self._parse_all(rows)
                ids = [item.id.hex() for item in entries]
            key = _tree_key(rows)
            # One take of a line at a time (decision 0099): rows announced by several peers
            # at once are verified and stored once, and a later slice finds its parents.
            async with self._lock(line):
                if rows.tree and self._took.holds(key, ids):
                    self.taken["held"] += 1  # taken from another peer first
                    return Taken.HELD
                if self.held.holds(line, ids):
                    self.taken["held"] += 1
                    return Taken.OURS
                if entries is None:  # known bytes, but not all held: admit them anew
                    entries = self._parse_all(rows)
                authored = await self._admit(source, rows, entries)
                self._raw.add(line, entries)
                self.held.add(line, [i for i in ids if i in authored])
                if rows.tree:
                    self._took.add(key, [i for i in ids if i in authored])
        except LifelineError as exc:
            self.taken["refused"] += 1
            log.debug("rows of %s from %s not taken (syncing instead): %s", line, source, exc)
            return Taken.REFUSED
        self.taken["changes"] += 1
        self.taken["entries"] += len(ids)
        return Taken.STORED

    def _all_ours(self, rows: ChangeItems) -> bool:
        """Whether every entry of ``rows`` was signed by this node as its author (rows
        read from the line may be a session's, or several trees' taken together: those
        belong to no tree and go to every watcher)."""
        if self.node_id is None:
            return False
        authors = [decode(raw) for raw in rows.attestations]
        mine = {a.subject for a in authors if a.role is Role.AUTHOR and a.node_id == self.node_id}
        return len(mine) == len(rows.entries) == sum(a.role is Role.AUTHOR for a in authors)

    def _lock(self, line: str) -> asyncio.Lock:
        return self._take_locks.setdefault(line, asyncio.Lock())

    async def _admit(self, source: str, rows: ChangeItems, entries: list[ParsedItem]) -> set[str]:
        """Store ``rows`` in one session of ours; the ids of the entries stored with their
        author's signature."""
        line = rows.line
        async with self._session(line, None, source, live=True) as session:
            atts, _, entry_set = session.sets
            signed = [self._parse(atts.codec, raw) for raw in rows.attestations]
            # An entry announced without its author's signature is not "held" for good:
            # its signature, announced later, must reach the notary (decision 0048).
            authored = {
                i.value.subject
                for i in signed
                if isinstance(i.value, Attestation) and i.value.role is Role.AUTHOR
            }
            if signed:
                taken = await atts.admit(signed, [])
                if taken.refused:  # a session would store the rest; rows are taken whole
                    raise BadSignature(f"the rows carry {taken.refused[0]}")
            start = await session.line.mark()
            admitted = await entry_set.admit(entries, rows.externals)
            if admitted.refused:  # the rest is stored; the refusal is a session's to report
                raise InvalidEntry(f"the rows carry {admitted.refused[0]}")
            end = await session.line.mark()
            self._keep_take(line, start, end, admitted.added, replace(rows, source=source))
            if admitted.added == len(entries):
                return authored
            # Some were stored already (a session brought them meanwhile: decision 0099)
            # or are held back (decision 0084): held for good are those stored now.
            return authored & await session.line.store.contains(authored)

    def _keep_take(
        self, line: str, start: int | None, end: int | None, added: int, rows: ChangeItems
    ) -> None:
        """Keep ``rows`` as stored at rows (start, end] when they were, with nothing else
        stored meanwhile."""
        if not added or start is None or end is None or end - start != added:
            return
        takes = self._takes.setdefault(line, [])
        takes.append((start, end, rows))
        del takes[:-TAKES_KEPT]

    def _parse_all(self, rows: ChangeItems) -> list[ParsedItem]:
        codec = EntryCodec(self.home.limits())
        return [self._parse(codec, raw) for raw in rows.entries]

    def _parse(self, codec: ItemCodec, raw: bytes) -> ParsedItem:
        if len(raw) > self._max_item_bytes:
            raise RemoteProtocolError(
                f"an announced item of {len(raw)} bytes is over the cap of {self._max_item_bytes}"
            )
        return codec.parse(raw)
