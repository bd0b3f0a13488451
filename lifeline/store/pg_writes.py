"""The write side of the PostgreSQL adapter: one batch stored inside a transaction that
holds the line's lock (its ``lines`` row, ``FOR UPDATE``). Writers of one line take turns,
writers of different lines run in parallel, and nothing is retried: under the lock every
read the batch depends on (stored ids, heights, dedup keys, the next row number) is stable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.store.order import order_batch
from lifeline.store.pg_buckets import bucket_of, bump_buckets
from lifeline.store.pg_notify import notify_sql
from lifeline.store.pg_schema import Conn
from lifeline.store.port import AppendResult
from lifeline.store.summary import SetTotals, entry_token

__all__ = [
    "AppendHook",
    "append_locked",
    "declare_locked",
    "dedup_bytes",
    "dedup_forms",
    "id_bytes",
    "ids_bytes",
    "lock_line",
    "retime_locked",
]

_MOD = 1 << 256
_LONGEST_KEY = 256  # bytes of a dedup key kept as itself (dedup_bytes)


def dedup_bytes(key: str) -> bytes:
    """How a dedup key is kept in the ``dedup`` column: its UTF-8, or past
    :data:`_LONGEST_KEY` bytes 0xFF and its SHA-256 (no UTF-8 holds 0xFF). PostgreSQL
    refuses an index key over ~2.7 kB: a longer key made a hub refuse the entry, and every
    sync that carried it, where a line file took it."""
    return dedup_forms(key)[0]


def dedup_forms(key: str) -> tuple[bytes, ...]:
    """The forms a dedup key may be held in: as it is kept now (:func:`dedup_bytes`) first;
    for a long key, also its UTF-8, as a hub kept every key it could before (up to ~2.7 kB),
    so that a key held that way is still found."""
    raw = key.encode()
    if len(raw) <= _LONGEST_KEY:
        return (raw,)
    return (b"\xff" + hashlib.sha256(raw).digest(), raw)


# What another component does with new entries inside their append's transaction (after
# the line's totals are written): ``hook(conn, line_id, first row number, new entries)``;
# the truth tables' fold (lifeline/truth/pg_table.py, entry-point group lifeline.pg_append).
AppendHook = Callable[[Conn, int, int, Sequence[Entry]], Awaitable[None]]


def id_bytes(entry_id: str) -> bytes:
    """An id as the 32 bytes stored; anything that is not 64 hex digits is refused."""
    try:
        raw = bytes.fromhex(entry_id)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise InvalidEntry(f"{entry_id[:80]!r} is not an entry id (64 hex digits)")
    return raw


def ids_bytes(ids: Iterable[str]) -> list[bytes]:
    """The ids among ``ids`` that could be stored, as their 32 bytes, each once (anything
    else cannot be held: left out of a lookup)."""
    out: list[bytes] = []
    for entry_id in dict.fromkeys(ids):
        try:
            out.append(id_bytes(entry_id))
        except InvalidEntry:
            continue
    return out


async def lock_line(conn: Conn, line_id: int) -> tuple[int, SetTotals, int]:
    """Take the line's write lock (inside a transaction): its next row number, its totals
    and the sum of its ids (the notary's state fingerprint, lifeline_mesh/notary/states)."""
    row = await conn.fetchrow(
        "SELECT next_seq, n, token_sum, id_sum FROM lines WHERE line_id = $1 FOR UPDATE",
        line_id,
    )
    if row is None:
        raise InvalidEntry(f"line {line_id} is gone from the database")
    totals = SetTotals(int(row[1]), int.from_bytes(row[2], "little"))
    return int(row[0]), totals, int.from_bytes(row[3], "big")


async def declare_locked(conn: Conn, line_id: int, externals: Sequence[tuple[str, str]]) -> None:
    """Record cross-line references ``(id, line)`` (inside the locked transaction): a
    declaration already held is never replaced, and an id the line holds as an entry is
    none (a peer's declaration could otherwise move a parent to another line)."""
    await conn.execute(
        "INSERT INTO externals (line_id, id, line)"
        " SELECT $1, u.id, u.line FROM unnest($2::bytea[], $3::text[]) AS u(id, line)"
        " WHERE NOT EXISTS (SELECT 1 FROM entries e WHERE e.line_id = $1 AND e.id = u.id)"
        " ON CONFLICT (line_id, id) DO NOTHING",
        line_id,
        [id_bytes(i) for i, _ in externals],
        [line for _, line in externals],
    )


async def append_locked(
    conn: Conn,
    line_id: int,
    entries: Sequence[Entry],
    hooks: Sequence[AppendHook] = (),
    *,
    received: bool = False,
) -> AppendResult:
    """Store ``entries`` inside a transaction: takes the line lock, then writes heights, row
    numbers, links, tips, dedup keys, earliest ts and the line's totals (see PgStore), and
    runs ``hooks`` on the new entries. The dedup keys of new entries become the line's own
    keys (what a local retry finds), unless they were ``received`` from a peer (0115)."""
    next_seq, totals, id_sum = await lock_line(conn, line_id)
    if not entries:
        return AppendResult(())
    own = {e.id for e in entries}
    stored, externals = await _known(conn, line_id, own, {p for e in entries for p in e.parents})
    heights = {i: h for i, (h, _) in stored.items()}
    stamps = {i: ts for i, (_, ts) in stored.items() if i in own}
    fresh, lowered = _fresh_and_lowered(order_batch(entries, heights.get, externals), stamps)
    if lowered:
        await _lower_ts(conn, line_id, lowered)
    if fresh:
        keys = (
            [] if received else [(e.dedup_key, e.id) for e, _ in fresh if e.dedup_key is not None]
        )
        fresh = await _drop_taken_keys(conn, line_id, fresh)
        await _insert(conn, line_id, next_seq, fresh)
        if keys:  # the keys as written: the dedup column may have lost one
            await _own_keys(conn, line_id, keys)
    if fresh or lowered:
        await _bump_line(conn, line_id, (next_seq, totals, id_sum), fresh, lowered, heights)
    for hook in hooks if fresh else ():
        await hook(conn, line_id, next_seq, [e for e, _ in fresh])
    return AppendResult(tuple(e.id for e, _ in fresh), tuple(lowered))


async def _known(
    conn: Conn, line_id: int, own: set[str], named: set[str]
) -> tuple[dict[str, tuple[int, str]], dict[str, str]]:
    """The height and ts of those of a batch's ids and parents that are stored, and the
    lines of the parents stored nowhere but declared as cross-line references."""
    stored: dict[str, tuple[int, str]] = {}
    for eid, height, ts in await conn.fetch(
        "SELECT id, height, ts FROM entries WHERE line_id = $1 AND id = ANY($2::bytea[])",
        line_id,
        [id_bytes(i) for i in own | named],
    ):
        stored[eid.hex()] = (int(height), ts)
    unresolved = named - own - stored.keys()
    externals: dict[str, str] = {}
    if unresolved:
        for eid, line in await conn.fetch(
            "SELECT id, line FROM externals WHERE line_id = $1 AND id = ANY($2::bytea[])",
            line_id,
            [id_bytes(i) for i in unresolved],
        ):
            externals[eid.hex()] = line
    return stored, externals


def _fresh_and_lowered(
    ordered: Iterable[tuple[Entry, int]], stamps: dict[str, str]
) -> tuple[list[tuple[Entry, int]], dict[str, tuple[str, str]]]:
    """Of a batch in order, the entries not stored yet (with their heights), and the
    stored ones it gives an earlier ts (id -> (old ts, new ts)). ``stamps``: the stored
    ts of the batch's ids, updated as the batch is read."""
    fresh: list[tuple[Entry, int]] = []
    lowered: dict[str, tuple[str, str]] = {}
    for entry, height in ordered:
        old = stamps.get(entry.id)
        if old is not None:
            if entry.ts < old:
                lowered[entry.id] = (lowered.get(entry.id, (old, old))[0], entry.ts)
                stamps[entry.id] = entry.ts
            continue
        stamps[entry.id] = entry.ts
        fresh.append((entry, height))
    return fresh, lowered


async def _bump_line(
    conn: Conn,
    line_id: int,
    before: tuple[int, SetTotals, int],
    fresh: Sequence[tuple[Entry, int]],
    lowered: dict[str, tuple[str, str]],
    heights: dict[str, int],
) -> None:
    """The line's totals and height buckets after a batch, and its change announced to
    every hub process (at commit). ``before``: the next row number, totals and id sum the
    line lock read."""
    next_seq, totals, id_sum = before
    count, total = totals.count, totals.total
    buckets: dict[int, tuple[int, int]] = {}  # height bucket -> (count, token sum) added
    for entry, height in fresh:
        count += 1
        token = entry_token(entry.id, entry.ts)
        total += token
        id_sum += int(entry.id, 16)
        _add(buckets, height, 1, token)
    for eid, (old, new) in lowered.items():
        delta = entry_token(eid, new) - entry_token(eid, old)
        total += delta
        _add(buckets, heights[eid], 0, delta)
    await bump_buckets(conn, line_id, buckets)
    await conn.execute(
        notify_sql(
            "UPDATE lines SET next_seq = $2, n = $3, token_sum = $4, id_sum = $5,"
            " version = version + 1 WHERE line_id = $1"
        ),
        line_id,
        next_seq + len(fresh),
        count,
        (total % _MOD).to_bytes(32, "little"),
        (id_sum % _MOD).to_bytes(32, "big"),
    )


def _add(buckets: dict[int, tuple[int, int]], height: int, n: int, token: int) -> None:
    key = bucket_of(height)
    had_n, had_sum = buckets.get(key, (0, 0))
    buckets[key] = (had_n + n, had_sum + token)


async def retime_locked(conn: Conn, line_id: int, changes: dict[str, tuple[str, str]]) -> None:
    """Give stored entries another ts, ``id -> (old ts, new ts)``, later or earlier (the
    notary replaces a ts no author signed by the signed one), with the line's totals and
    bucket sums, inside a transaction that holds the line's lock."""
    if not changes:
        return
    _seq, totals, _ids = await lock_line(conn, line_id)
    rows = await conn.fetch(
        "SELECT id, height FROM entries WHERE line_id = $1 AND id = ANY($2::bytea[])",
        line_id,
        [id_bytes(i) for i in changes],
    )
    await _lower_ts(conn, line_id, changes, later=True)
    total = totals.total
    buckets: dict[int, tuple[int, int]] = {}
    for raw, height in rows:
        old, new = changes[bytes(raw).hex()]
        delta = entry_token(bytes(raw).hex(), new) - entry_token(bytes(raw).hex(), old)
        total += delta
        _add(buckets, int(height), 0, delta)
    await bump_buckets(conn, line_id, buckets)
    await conn.execute(
        notify_sql("UPDATE lines SET token_sum = $2, version = version + 1 WHERE line_id = $1"),
        line_id,
        (total % _MOD).to_bytes(32, "little"),
    )


async def _lower_ts(
    conn: Conn, line_id: int, lowered: dict[str, tuple[str, str]], *, later: bool = False
) -> None:
    """Earliest ts wins: the stored entry (its doc too: the token column follows).
    ``later``: the new ts may be later (:func:`retime_locked`)."""
    ids = [id_bytes(i) for i in lowered]
    docs = await conn.fetch(
        "SELECT id, doc FROM entries WHERE line_id = $1 AND id = ANY($2::bytea[])", line_id, ids
    )
    new_docs = [
        (raw, Entry.from_json(doc, check=False).with_ts(lowered[raw.hex()][1])) for raw, doc in docs
    ]
    await conn.execute(
        "UPDATE entries e SET ts = u.ts, doc = u.doc"
        " FROM unnest($2::bytea[], $3::text[], $4::text[]) AS u(id, ts, doc)"
        " WHERE e.line_id = $1 AND e.id = u.id" + ("" if later else " AND e.ts > u.ts"),
        line_id,
        [raw for raw, _ in new_docs],
        [e.ts for _, e in new_docs],
        [e.to_json().decode() for _, e in new_docs],
    )


async def _drop_taken_keys(
    conn: Conn, line_id: int, fresh: list[tuple[Entry, int]]
) -> list[tuple[Entry, int]]:
    """A dedup key already held (stored, or earlier in the batch) is dropped from the
    newcomer, which is still stored: the set of ids never depends on arrival order."""
    keys = [f for e, _ in fresh if e.dedup_key is not None for f in dedup_forms(e.dedup_key)]
    if not keys:
        return fresh
    taken = {
        bytes(r[0])
        for r in await conn.fetch(
            "SELECT dedup FROM entries WHERE line_id = $1 AND dedup = ANY($2::bytea[])",
            line_id,
            keys,
        )
    }
    out: list[tuple[Entry, int]] = []
    for entry, height in fresh:
        if entry.dedup_key is not None:
            forms = dedup_forms(entry.dedup_key)
            if any(f in taken for f in forms):
                entry = replace(entry, dedup_key=None)
            else:
                taken.add(forms[0])
        out.append((entry, height))
    return out


async def _own_keys(conn: Conn, line_id: int, written: Sequence[tuple[str, str]]) -> None:
    """The dedup keys ``(key, id)`` of this node's new entries, each kept by its first."""
    await conn.execute(
        "INSERT INTO own_keys (line_id, key, id) SELECT $1, * FROM unnest($2::bytea[],"
        " $3::bytea[]) ON CONFLICT DO NOTHING",
        line_id,
        [dedup_bytes(key) for key, _ in written],
        [id_bytes(entry_id) for _, entry_id in written],
    )


async def _insert(conn: Conn, line_id: int, next_seq: int, fresh: list[tuple[Entry, int]]) -> None:
    ids = [id_bytes(e.id) for e, _ in fresh]
    await conn.execute(
        "INSERT INTO entries (line_id, id, seq, height, ts, dedup, doc)"
        " SELECT $1, * FROM unnest($2::bytea[], $3::bigint[], $4::int[], $5::text[],"
        " $6::bytea[], $7::text[])",
        line_id,
        ids,
        list(range(next_seq, next_seq + len(fresh))),
        [h for _, h in fresh],
        [e.ts for e, _ in fresh],
        [None if e.dedup_key is None else dedup_bytes(e.dedup_key) for e, _ in fresh],
        [e.to_json().decode() for e, _ in fresh],
    )
    parents: list[bytes] = []
    children: list[bytes] = []
    for (entry, _), child in zip(fresh, ids, strict=True):
        for parent in set(entry.parents):
            parents.append(id_bytes(parent))
            children.append(child)
    if parents:
        await conn.execute(
            "INSERT INTO links (line_id, parent, child)"
            " SELECT $1, * FROM unnest($2::bytea[], $3::bytea[]) ON CONFLICT DO NOTHING",
            line_id,
            parents,
            children,
        )
    # The batch's net effect on the tips only.
    named = set(parents)
    new_tips = [i for i in ids if i not in named]
    await conn.execute(
        "INSERT INTO tips (line_id, id) SELECT $1, * FROM unnest($2::bytea[])"
        " ON CONFLICT DO NOTHING",
        line_id,
        new_tips,
    )
    fresh_ids = set(ids)
    gone = [p for p in named if p not in fresh_ids]
    if gone:
        await conn.execute(
            "DELETE FROM tips WHERE line_id = $1 AND id = ANY($2::bytea[])", line_id, gone
        )
