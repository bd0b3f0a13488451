"""Seals: one signature by an author over a batch of its own author signatures (decision 0149).

A node that writes many entries at once (an import, a session's ingest, a bulk load) signs
each entry as its author, as always, and then one ``sealed`` statement per
``MAX_SEAL_IDS`` of those signatures: the list of their item ids (``sha256`` of each
item's exact bytes). A receiver that has checked the seal's own signature knows that the
same key signed every item listed, byte for byte, so it need not check each item's
signature again; every other rule (the key is the node's, the signer is a member, the
times) is still applied to each item. An initial sync of a million entries then checks
about a thousand signatures instead of a million (~44 s of CPU on this machine).

Seals are kept beside the sets, in the table ``seals`` of a line file (or of a hub's
database), with the span of sort keys of the signatures each vouches for, and are never
reconciled: a peer from before them would refuse the role. A node sends them only to a peer
whose hello names the capability ``seals``, ahead of the first chunk of a whole run of the
``attestations`` set (decision 0144) that their span reaches, once a session. A receiver
remembers the last ``REMEMBERED_SEALS`` seals of a session; an item whose seal it forgot,
or never got, is checked alone, as before. A seal that does not pass (a bad signature, an
unknown signer, dated ahead of the clock) vouches for nothing: the items are checked alone.

What a seal cannot change: an item's id covers its signature too, so an item altered after
it was sealed is not the item the seal lists, and is checked (and refused) alone. A seal
vouches only for items under its own key: one member cannot vouch for another's. What it
does allow: an author could seal an item whose own signature is bad. That item then passes
where the seal travels and is refused where it does not (a peer from before seals), and
``lifeline-mesh verify``, which checks every signature, reports it, by its author.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from lifeline.errors import LifelineError
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary.admission import check_items
from lifeline_mesh.notary.signers import KnownSigners
from lifeline_mesh.notary.statement import MAX_SEAL_IDS, Attestation, Role, sign
from lifeline_mesh.recon.session_state import SEALS_CAPABILITY

__all__ = [
    "REMEMBERED_SEALS",
    "SEALS_CAPABILITY",
    "SEALS_MIGRATION",
    "SEAL_MIN",
    "Seal",
    "SealItem",
    "SealMemory",
    "covering",
    "keep_seals",
    "run_span",
    "seal",
    "span_bounds",
]

log = logging.getLogger(__name__)

SEAL_MIN = 16  # author signatures written together: fewer get no seal (it would save little)
REMEMBERED_SEALS = 32  # seals a receiving session keeps in mind (32k ids, ~4 MB)

# One row per seal, with the span of sort keys of the signatures it vouches for that this
# node holds (what a run's chunk is matched against); a seal received again widens it.
SEALS_MIGRATION = """
            CREATE TABLE seals (
                seq       INTEGER PRIMARY KEY,
                id        BLOB NOT NULL UNIQUE,
                node_id   TEXT NOT NULL,
                first_key INTEGER NOT NULL,
                last_key  INTEGER NOT NULL,
                item      BLOB NOT NULL
            );
            CREATE INDEX seals_span ON seals(first_key, last_key);
"""


class SealItem(Protocol):
    """What a row of ``seals`` stores of a seal (an :class:`Attestation` has it)."""

    @property
    def id(self) -> bytes: ...

    @property
    def node_id(self) -> str: ...

    @property
    def item(self) -> bytes: ...


Seal = tuple[SealItem, int, int]  # a seal, and the first and last sort key it vouches for

_LOWEST = -(1 << 62)
_HIGHEST = 1 << 62


def seal(
    identity: NodeIdentity, atts: Sequence[Attestation], now: str
) -> list[tuple[Attestation, int, int]]:
    """Seals by ``identity`` over its author signatures ``atts`` (none below ``SEAL_MIN``):
    taken in key order, ``MAX_SEAL_IDS`` a seal, so each seal's span is narrow and goes
    out just ahead of the signatures it vouches for."""
    own = [a for a in atts if a.role is Role.AUTHOR and a.public_key == identity.public_key]
    if len(own) < SEAL_MIN:
        return []
    own.sort(key=lambda a: (a.sort_key, a.id))
    out: list[tuple[Attestation, int, int]] = []
    for start in range(0, len(own), MAX_SEAL_IDS):
        part = own[start : start + MAX_SEAL_IDS]
        ids = sorted({a.id.hex() for a in part})
        made = sign(identity, Role.SEALED, str(len(ids)), now, *ids)
        out.append((made, part[0].sort_key, part[-1].sort_key))
    return out


def keep_seals(conn: sqlite3.Connection, seals: Sequence[Seal]) -> None:
    """Store ``seals`` inside a write transaction; one held already has its span widened."""
    conn.executemany(
        "INSERT INTO seals (id, node_id, first_key, last_key, item) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (id) DO UPDATE SET first_key = min(first_key, excluded.first_key),"
        " last_key = max(last_key, excluded.last_key)",
        [(s.id, s.node_id, lo, hi, s.item) for s, lo, hi in seals],
    )


def covering(conn: sqlite3.Connection, lo: int | None, hi: int | None) -> list[tuple[bytes, bytes]]:
    """``(id, item)`` of the seals whose span meets the sort keys ``lo``…``hi`` (None: no
    bound), in the order of their spans."""
    sql = (
        "SELECT id, item FROM seals WHERE first_key <= ? AND last_key >= ? ORDER BY first_key, seq"
    )
    low, high = span_bounds(lo, hi)
    return [(bytes(i), bytes(item)) for i, item in conn.execute(sql, (high, low))]


def span_bounds(lo: int | None, hi: int | None) -> tuple[int, int]:
    """``lo``…``hi`` with an absent bound made one no sort key passes."""
    return (_LOWEST if lo is None else lo), (_HIGHEST if hi is None else hi)


class SealMemory:
    """The seals one receiving session checked, and the ids they vouch for.

    :meth:`learn` checks a seal as any statement is checked (shape, key, signature, a
    known signer, not dated ahead of the clock) and, if it passes, remembers its ids;
    :meth:`vouched` says whether a received item is one of them, under the same key. The
    oldest seals are forgotten past ``limit`` (they arrive just ahead of their items, in
    key order): their items are then checked alone. Only what a row of ``seals`` needs is
    kept of each seal, not its decoded fields (~0.1 MB a seal of 1,000 ids, not ~0.3).
    """

    def __init__(self, limit: int = REMEMBERED_SEALS) -> None:
        self._limit = limit
        self._seals: OrderedDict[bytes, _Kept] = OrderedDict()
        self._by_item: dict[bytes, bytes] = {}  # item id -> the id of the seal vouching
        self.refused = 0  # seals that did not pass (their items were checked alone)

    def __len__(self) -> int:
        return len(self._seals)

    def learn(
        self, seals: Sequence[Attestation], now: str, signers: KnownSigners | None, skew_s: float
    ) -> None:
        for candidate in seals:
            if candidate.id in self._seals:
                continue
            try:
                future: list[Attestation] = []
                check_items([candidate], now, signers, skew_s, future=future)
            except LifelineError as exc:
                self.refused += 1
                log.info("a seal by %s vouches for nothing: %s", candidate.node_id, exc)
                continue
            if future:
                self.refused += 1
                continue
            items = [bytes.fromhex(hex_id) for hex_id in candidate.extras]
            self._seals[candidate.id] = _Kept(candidate, items)
            for item_id in items:
                self._by_item[item_id] = candidate.id
            while len(self._seals) > self._limit:
                self._forget()

    def _forget(self) -> None:
        old_id, old = self._seals.popitem(last=False)
        for item_id in old.items:
            if self._by_item.get(item_id) == old_id:
                del self._by_item[item_id]

    def _seal_of(self, att: Attestation) -> bytes | None:
        seal_id = self._by_item.get(att.id)
        if seal_id is None or self._seals[seal_id].public_key != att.public_key:
            return None
        return seal_id

    def vouched(self, att: Attestation) -> bool:
        """Whether a remembered seal lists ``att`` and was signed with ``att``'s key."""
        return self._seal_of(att) is not None

    def spans(self, atts: Sequence[Attestation]) -> list[Seal]:
        """The remembered seals that vouch for some of ``atts``, each with the span of sort
        keys of those it vouches for (what a stored seal's row records)."""
        found: dict[bytes, list[int]] = {}
        for att in atts:
            seal_id = self._seal_of(att)
            if seal_id is not None:
                span = found.setdefault(seal_id, [att.sort_key, att.sort_key])
                span[0] = min(span[0], att.sort_key)
                span[1] = max(span[1], att.sort_key)
        return [(self._seals[i], lo, hi) for i, (lo, hi) in found.items()]


class _Kept:
    """What a session keeps of a seal it checked: what its row stores, its key and the
    ids it lists."""

    __slots__ = ("id", "item", "items", "node_id", "public_key")

    def __init__(self, seal: Attestation, items: list[bytes]) -> None:
        self.id = seal.id
        self.node_id = seal.node_id
        self.item = seal.item
        self.public_key = seal.public_key
        self.items = items


def run_span(
    after: tuple[object, ...] | None, last: tuple[object, ...] | None
) -> tuple[int | None, int | None]:
    """The sort keys a run's chunk covers: from the key after which it was read to the
    last key it read (None: unbounded on that side)."""
    return _key(after), _key(last)


def _key(key: tuple[object, ...] | None) -> int | None:
    if key is None or not key or not isinstance(key[0], int):
        return None
    return key[0]
