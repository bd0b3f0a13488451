"""A line's fingerprint per bucket of heights, kept by every write (PostgreSQL hub).

``lines`` holds the whole line's count and token sum, so an in-sync check reads one row.
When the sums differ, sync needs the line's sorted snapshot (``(height, id, token)`` of
every entry). ``fp_buckets`` keeps the same two numbers per bucket of
:data:`BUCKET_HEIGHTS` consecutive heights, updated in the admission transaction under the
line lock; a hub process that holds an earlier snapshot of the line compares the buckets
and reads the entry rows of the buckets that differ only (lifeline_mesh/sync/pg_snapshots.py).
Buckets follow sync's key order (height first), so a bucket is one contiguous run of the
snapshot, and a range whose bounds fall on bucket edges is summed from bucket rows alone.

A bucket's sum is kept exact (``numeric``, not reduced mod 2^256): adding a batch is then
one ``INSERT … ON CONFLICT DO UPDATE`` with no read first. Decision 0033.
"""

from __future__ import annotations

from lifeline.store.pg_schema import BUCKET_HEIGHTS, Conn

__all__ = [
    "BUCKET_HEIGHTS",
    "BucketSums",
    "bucket_of",
    "bucket_sums",
    "bump_buckets",
    "rows_between",
]

_MOD = 1 << 256

# bucket -> (count, sum of tokens mod 2^256)
BucketSums = dict[int, tuple[int, int]]


def bucket_of(height: int) -> int:
    return height // BUCKET_HEIGHTS


async def bump_buckets(conn: Conn, line_id: int, added: dict[int, tuple[int, int]]) -> None:
    """Add ``{bucket: (count, token sum)}`` to the line's buckets (inside the locked
    transaction; a sum may be negative: an entry's ts lowered in place)."""
    if not added:
        return
    keys = sorted(added)
    await conn.execute(
        "INSERT INTO fp_buckets (line_id, bucket, n, token_sum)"
        " SELECT $1, b, n, s::numeric FROM unnest($2::int[], $3::bigint[], $4::text[])"
        " AS u(b, n, s)"
        " ON CONFLICT (line_id, bucket) DO UPDATE SET n = fp_buckets.n + excluded.n,"
        " token_sum = fp_buckets.token_sum + excluded.token_sum",
        line_id,
        keys,
        [added[k][0] for k in keys],
        [str(added[k][1]) for k in keys],
    )


async def bucket_sums(conn: Conn, line_id: int) -> BucketSums:
    """Every non-empty bucket of the line: ``(count, token sum mod 2^256)``; no entry read."""
    rows = await conn.fetch(
        "SELECT bucket, n, token_sum::text FROM fp_buckets WHERE line_id = $1 AND n > 0",
        line_id,
    )
    return {int(b): (int(n), int(s) % _MOD) for b, n, s in rows}


async def rows_between(
    conn: Conn, line_id: int, buckets: tuple[int, int]
) -> list[tuple[int, bytes, bytes]]:
    """``(height, id, token)`` of the entries of buckets ``first..last`` (inclusive), in
    key order: one range scan of the ``(line_id, height, id) INCLUDE (token)`` index."""
    first, last = buckets
    rows = await conn.fetch(
        "SELECT height, id, token FROM entries WHERE line_id = $1"
        " AND height >= $2 AND height < $3 ORDER BY height, id",
        line_id,
        first * BUCKET_HEIGHTS,
        (last + 1) * BUCKET_HEIGHTS,
    )
    return [(int(h), bytes(i), bytes(t)) for h, i, t in rows]
