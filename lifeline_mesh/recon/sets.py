"""What the core knows about one reconciled set: item parsing, and a sorted snapshot.

A set is a collection of opaque items, each with a 32-byte id, a sort key ``(height, id)``
derived from content, and an optional *version* (entries: their ``ts``). The fingerprint
sums *tokens*: the id itself, or ``sha256(id ‖ version)`` when the item has a version, so two
nodes holding the same id with different ts see different fingerprints and exchange both
versions (each store keeps the earliest). See docs/protocol.md, "Versions".

The snapshot keeps ids and tokens in flat ``bytes`` and heights in an ``array``, and range
sums in a flat prefix-sum buffer, so a session over 1M items stays within tens of MB.
"""

from __future__ import annotations

import contextlib
import hashlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lifeline_mesh.recon.frames import Bound, Items

__all__ = [
    "FINGERPRINT_BYTES",
    "LIST_TOKEN_BYTES",
    "ItemCodec",
    "ParsedItem",
    "ParsedItems",
    "SetSummary",
    "Snapshot",
    "token_of",
]

FINGERPRINT_BYTES = 16
LIST_TOKEN_BYTES = 16  # token prefix used in id lists: 128 bits, collision-safe in practice
_MOD = 1 << 256
SUM_STRIDE = 16  # items per stored prefix sum
# Snapshot positions in the id index: 4 bytes each where the platform has them.
_POSITION = "I" if array("I").itemsize == 4 else "L"
KEYED_TOKEN_PERSON = b"keyed-token"


def token_of(item_id: bytes, version: bytes = b"") -> bytes:
    """The 32-byte value an item contributes to fingerprints."""
    if not version:
        return item_id
    return hashlib.sha256(item_id + b"\x00" + version).digest()


def plain_fingerprint(total: int, count: int) -> bytes:
    """The plain (v1) fingerprint of ``count`` items whose tokens sum to ``total``."""
    digest = hashlib.sha256((total % _MOD).to_bytes(32, "little") + count.to_bytes(8, "little"))
    return digest.digest()[:FINGERPRINT_BYTES]


@dataclass(frozen=True, slots=True)
class SetSummary:
    """A whole set in two numbers, kept by the store on every write (no snapshot needed):
    its item count and the sum of its tokens mod 2^256."""

    count: int
    total: int

    def fingerprint(self) -> bytes:
        return plain_fingerprint(self.total, self.count)


@dataclass(frozen=True, slots=True)
class ParsedItem:
    """A received item after admission: id, version, same-set dependencies, raw bytes."""

    id: bytes
    version: bytes
    deps: tuple[bytes, ...]
    raw: bytes
    value: object = None  # the decoded object (an Entry), so admission decodes once


@dataclass(frozen=True, slots=True)
class ParsedItems:
    """An ``Items`` frame whose items were already parsed with the session's own codec for
    that set (by the driver, in helper processes). Never on the wire; the session applies
    every other rule to it as to the frame itself."""

    frame: Items
    parsed: tuple[ParsedItem, ...]


class ItemCodec(Protocol):
    """Pure parsing and admission of a raw item; raises an InvalidEntry on a bad one. A
    codec whose items never name items of their own set may say ``flat = True``: a session
    then keeps no record of the ids it received in it (decision 0102)."""

    def parse(self, raw: bytes) -> ParsedItem: ...


def _id_index(ids: bytes | bytearray) -> tuple[array[int], array[int]]:
    """Id prefixes sorted, with the snapshot position of each: a compact membership index."""
    n = len(ids) // 32
    # One sort of plain ints (C comparisons, no key function): prefix in the high bits,
    # position in the low ones.
    shift = max(n, 1).bit_length()
    packed = sorted(int.from_bytes(ids[32 * i : 32 * i + 8], "big") << shift | i for i in range(n))
    low = (1 << shift) - 1
    return array("Q", (v >> shift for v in packed)), array(_POSITION, (v & low for v in packed))


# Lookups answered by scanning the ids before the id index is built. A scan is one
# ``bytes.find`` over 32 bytes per item (~0.3 ms at 100k items), the index a sort of every
# id (~0.2 s at 100k): a session that checks a few parents, as every session of a node
# that was just restarted or whose snapshot was just brought up to date does, never pays
# for the index (decision 0039); a session that checks many builds it as before.
SCANNED_LOOKUPS = 256


def _extend(
    rows: Iterable[tuple[int, bytes, bytes]],
    n: int,
    acc: int,
    heights: array[int],
    ids: bytearray,
    tokens: bytearray,
    sums: bytearray,
) -> None:
    """Append ``(height, id, token)`` rows after the ``n`` items already summed to ``acc``:
    their heights, ids and tokens, and a prefix sum every ``SUM_STRIDE`` items."""
    for k, (height, item_id, token) in enumerate(rows, n + 1):
        heights.append(height)
        ids += item_id
        tokens += token
        acc += int.from_bytes(token, "little")
        if not k % SUM_STRIDE:
            acc %= _MOD
            sums += acc.to_bytes(32, "little")


class _Shared:
    """The id index of a snapshot's buffers, shared by every view of them (built once),
    and how many lookups were answered by scanning before it was."""

    __slots__ = ("index", "scans")

    def __init__(self) -> None:
        self.index: tuple[array[int], array[int]] | None = None
        self.scans = 0


class Snapshot:
    """The local items of one set at session start, sorted by ``(height, id)``."""

    def __init__(
        self,
        heights: Sequence[int],
        ids: Sequence[bytes],
        tokens: Sequence[bytes],
        extra_known: Iterable[bytes] = (),
    ) -> None:
        self._load(zip(heights, ids, tokens, strict=True), extra_known)

    @classmethod
    def build(
        cls, rows: Iterable[tuple[int, bytes, bytes]], extra_known: Iterable[bytes] = ()
    ) -> Snapshot:
        """From ``(height, id, token)`` rows in key order, consumed one at a time."""
        snap = cls.__new__(cls)
        snap._load(rows, extra_known)
        return snap

    def _load(self, rows: Iterable[tuple[int, bytes, bytes]], extra_known: Iterable[bytes]) -> None:
        # Built incrementally into flat buffers: no per-item Python objects survive.
        heights, ids, tokens = array("Q"), bytearray(), bytearray()
        # Prefix sums only every SUM_STRIDE items (a range sum adds at most that many
        # tokens more): 2 bytes per item instead of 32.
        sums = bytearray(32)
        _extend(rows, 0, 0, heights, ids, tokens, sums)
        self._n = len(heights)
        self._heights = heights
        # Kept as bytearrays: converting to bytes would briefly double them.
        self._ids = ids
        self._tokens = tokens
        self._sums = sums
        # The id index is built on the first lookup: a side that only sends (an initial
        # sync's source) never needs it, and building it sorts a million Python ints.
        self._shared = _Shared()
        self._start_view(extra_known)

    def _start_view(self, extra_known: Iterable[bytes]) -> None:
        self._extra: set[bytes] = set(extra_known)
        # per session key and width: keyed tokens by index, and the keyed hasher
        self._keyed: dict[tuple[bytes, int], tuple[dict[int, int], Any]] = {}

    def view(self, extra_known: Iterable[bytes] = ()) -> Snapshot:
        """The same items for another session: the buffers and the id index are shared
        (never changed once built), the per-session state is its own."""
        snap = Snapshot.__new__(Snapshot)
        snap._n, snap._heights, snap._ids = self._n, self._heights, self._ids
        snap._tokens, snap._sums, snap._shared = self._tokens, self._sums, self._shared
        snap._start_view(extra_known)
        return snap

    def whole(self) -> tuple[int, int]:
        """(count, sum of tokens mod 2^256) of every item: the set's summary, if current."""
        return self._n, self._prefix_sum(self._n) % _MOD

    def merged(self, rows: Iterable[tuple[int, bytes, bytes]]) -> Snapshot:
        """A new snapshot: these items (ids this one lacks) added to this one's, in key
        order. Items that all come after ours are appended to our buffers in place (we
        and our views still read only our own items; decision 0042); others give new
        buffers. Prefix sums are recomputed only from the first insertion on."""
        new = sorted(rows)
        if not new:
            return self.view(self._extra)
        at = [self._bisect((height, item_id)) for height, item_id, _ in new]
        snap: Snapshot | None = None
        if at[0] == self._n and self._owns_tail():
            with contextlib.suppress(BufferError):  # a buffer being written out: copy
                snap = self._grown(new)
        if snap is None:
            snap = self._copied(new, at)
        index = self._shared.index
        if index is not None:  # carried over: cheaper than sorting every id again
            prefixes = array("Q", index[0])
            if at[0] == self._n:  # all at the end: the old positions stay
                positions = array(_POSITION, index[1])
            else:  # an old item moves up by the new items placed before it
                positions = array(_POSITION, (p + bisect_right(at, p) for p in index[1]))
            for k, ((_h, item_id, _t), cut) in enumerate(zip(new, at, strict=True)):
                prefix = int.from_bytes(item_id[:8], "big")
                where = bisect_left(prefixes, prefix)
                prefixes.insert(where, prefix)
                positions.insert(where, cut + k)
            snap._shared.index = (prefixes, positions)
        snap._start_view(self._extra)
        return snap

    def _copied(self, new: list[tuple[int, bytes, bytes]], at: list[int]) -> Snapshot:
        """The successor with ``new`` placed at ``at``, in new buffers."""
        heights, ids, tokens = array("Q"), bytearray(), bytearray()
        previous = 0
        for (height, item_id, token), cut in zip(new, at, strict=True):
            heights += self._heights[previous:cut]
            ids += self._ids[32 * previous : 32 * cut]
            tokens += self._tokens[32 * previous : 32 * cut]
            heights.append(height)
            ids += item_id
            tokens += token
            previous = cut
        n = self._n  # the buffers may go on past it (a successor grown in place)
        heights += self._heights[previous:n]
        ids += self._ids[32 * previous : 32 * n]
        tokens += self._tokens[32 * previous : 32 * n]
        return self._successor(heights, ids, tokens, at[0])

    def replaced(self, lo: int, hi: int, rows: Iterable[tuple[int, bytes, bytes]]) -> Snapshot:
        """A new snapshot: items ``lo..hi`` replaced by ``rows`` (in key order, every key
        between item ``lo - 1``'s and item ``hi``'s). Buffers are copied by slices and the
        prefix sums recomputed from ``lo`` on only; the id index is built again on use."""
        heights, ids, tokens = array("Q", self._heights[:lo]), bytearray(), bytearray()
        ids += self._ids[: 32 * lo]
        tokens += self._tokens[: 32 * lo]
        for height, item_id, token in rows:
            heights.append(height)
            ids += item_id
            tokens += token
        n = self._n
        heights += self._heights[hi:n]
        ids += self._ids[32 * hi : 32 * n]
        tokens += self._tokens[32 * hi : 32 * n]
        snap = self._successor(heights, ids, tokens, lo)
        snap._start_view(self._extra)
        return snap

    def _successor(
        self, heights: array[int], ids: bytearray, tokens: bytearray, first: int
    ) -> Snapshot:
        """A snapshot of these buffers, where items before ``first`` are ours unchanged: our
        prefix sums up to there stay, the rest are summed again (no id index, no view)."""
        base = first // SUM_STRIDE
        sums = bytearray(self._sums[: 32 * (base + 1)])
        acc = int.from_bytes(sums[32 * base :], "little")
        for n in range(base * SUM_STRIDE + 1, len(heights) + 1):
            acc += int.from_bytes(tokens[32 * (n - 1) : 32 * n], "little")
            if not n % SUM_STRIDE:
                acc %= _MOD
                sums += acc.to_bytes(32, "little")
        snap = Snapshot.__new__(Snapshot)
        snap._n, snap._heights, snap._ids, snap._tokens, snap._sums = (
            len(heights), heights, ids, tokens, sums
        )  # fmt: skip
        snap._shared = _Shared()
        return snap

    def buffers(self) -> tuple[memoryview, memoryview, memoryview, memoryview]:
        """Heights, ids, tokens and stored prefix sums, as :meth:`from_buffers` takes them
        (copied): views of this snapshot's part of its buffers, which a successor may have
        grown past it; while a view is held, no successor grows them (it copies)."""
        n = self._n
        return (
            memoryview(self._heights)[:n],
            memoryview(self._ids)[: 32 * n],
            memoryview(self._tokens)[: 32 * n],
            memoryview(self._sums)[: 32 * (n // SUM_STRIDE + 1)],
        )

    def _owns_tail(self) -> bool:
        """Do the buffers end where this snapshot does (no successor grew them), and can
        they grow in place?"""
        n = self._n
        buffers = (self._ids, self._tokens, self._sums)
        return (
            all(type(b) is bytearray for b in buffers)
            and type(self._heights) is array
            and len(self._heights) == n
            and len(self._ids) == len(self._tokens) == 32 * n
            and len(self._sums) == 32 * (n // SUM_STRIDE + 1)
        )

    def _grown(self, new: list[tuple[int, bytes, bytes]]) -> Snapshot:
        """The successor with ``new`` (keys after all of ours) appended to our buffers in
        place: no copy of the set (at 100k items a copy was ~7 MB of fresh pages per set
        and session, most of a node's kernel time in issue 14's soak, decision 0042). We
        keep reading only our first ``_n`` items, so every view of us stays as it was.
        Raises BufferError, with nothing changed that we read, when a buffer cannot grow
        now (a snapshot file being written from it)."""
        n = self._n
        acc = self._prefix_sum(n)
        heights = array("Q")
        ids, tokens, sums = bytearray(), bytearray(), bytearray()
        _extend(new, n, acc, heights, ids, tokens, sums)
        grown = [(self._ids, ids), (self._tokens, tokens), (self._sums, sums)]
        sizes = [len(buffer) for buffer, _ in grown]
        try:
            for buffer, more in grown:
                buffer += more
            self._heights += heights
        except BufferError:  # no successor then; our own items are untouched
            for (buffer, _), size in zip(grown, sizes, strict=True):
                with contextlib.suppress(BufferError):
                    del buffer[size:]
            raise
        snap = Snapshot.__new__(Snapshot)
        snap._n, snap._heights, snap._ids = n + len(new), self._heights, self._ids
        snap._tokens, snap._sums, snap._shared = self._tokens, self._sums, _Shared()
        return snap

    @classmethod
    def from_buffers(
        cls, heights: array[int], ids: bytearray, tokens: bytearray, sums: bytearray
    ) -> Snapshot:
        """The snapshot whose :meth:`buffers` these were (sizes checked, not contents)."""
        n = len(heights)
        if len(ids) != 32 * n or len(tokens) != 32 * n or len(sums) != 32 * (n // SUM_STRIDE + 1):
            raise ValueError("snapshot buffers of inconsistent sizes")
        snap = cls.__new__(cls)
        snap._n, snap._heights, snap._ids, snap._tokens, snap._sums = n, heights, ids, tokens, sums
        snap._shared = _Shared()
        snap._start_view(())
        return snap

    @classmethod
    def empty(cls) -> Snapshot:
        return cls([], [], [])

    def __len__(self) -> int:
        return self._n

    def key(self, i: int) -> tuple[int, bytes]:
        return self._heights[i], bytes(self._ids[32 * i : 32 * i + 32])

    def item_id(self, i: int) -> bytes:
        return bytes(self._ids[32 * i : 32 * i + 32])

    def token(self, i: int) -> bytes:
        return bytes(self._tokens[32 * i : 32 * i + 32])

    def knows(self, item_id: bytes) -> bool:
        return item_id in self._extra or self.position(item_id) is not None

    def position(self, item_id: bytes) -> int | None:
        """The index of ``item_id`` in key order, None when the snapshot lacks it."""
        # Sorted 8-byte id prefixes (8 MB per million items, where a set of bytes would
        # take ~100 MB); equal prefixes are checked against the full id.
        shared = self._shared
        if shared.index is None:
            if shared.scans < SCANNED_LOOKUPS:
                shared.scans += 1
                return self._scan(item_id)
            self.index_ids()
        assert shared.index is not None
        prefixes, positions = shared.index
        prefix = int.from_bytes(item_id[:8], "big")
        k = bisect_left(prefixes, prefix)
        while k < len(prefixes) and prefixes[k] == prefix:
            if self.item_id(positions[k]) == item_id:
                return positions[k]
            k += 1
        return None

    def index_ids(self) -> None:
        """Build the id index now (lookups until then scan the ids)."""
        if self._shared.index is None:
            self._shared.index = _id_index(self._ids[: 32 * self._n])

    def _scan(self, item_id: bytes) -> int | None:
        if len(item_id) != 32:
            return None
        end = 32 * self._n  # the buffer may go on past it (a successor grown in place)
        at = self._ids.find(item_id, 0, end)
        while at >= 0 and at % 32:  # a match across two ids: look further on
            at = self._ids.find(item_id, at + 1, end)
        return None if at < 0 else at // 32

    def index_of(self, bound: Bound | None) -> int:
        """The first index whose key is not below ``bound`` (``len`` for +infinity)."""
        if bound is None:
            return self._n
        return self._bisect((bound.height, bound.id_prefix))

    def _bisect(self, key: tuple[int, bytes]) -> int:
        """``bisect_left`` of ``key`` among the sorted keys: the heights in C (the array),
        then the ids among the few items of that height. Nothing that refers back to the
        snapshot is kept, so a snapshot is freed as soon as its session drops it, with no
        cycle for the garbage collector to find (sync/memory.py)."""
        height, item_id = key
        lo = bisect_left(self._heights, height, 0, self._n)
        hi = bisect_right(self._heights, height, lo, self._n)
        ids = self._ids
        while lo < hi:
            mid = (lo + hi) // 2
            if ids[32 * mid : 32 * mid + 32] < item_id:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def range_sum(self, lo: int, hi: int) -> bytes:
        """The sum of the tokens of items ``lo..hi`` mod 2^256, 32 bytes little-endian."""
        return ((self._prefix_sum(hi) - self._prefix_sum(lo)) % _MOD).to_bytes(32, "little")

    def _prefix_sum(self, i: int) -> int:
        """The sum of the tokens of items ``0..i`` (not reduced)."""
        base = i // SUM_STRIDE
        total = int.from_bytes(self._sums[32 * base : 32 * base + 32], "little")
        tokens = self._tokens
        for k in range(base * SUM_STRIDE, i):
            total += int.from_bytes(tokens[32 * k : 32 * k + 32], "little")
        return total

    def keyed_sum(self, key: bytes, width: int, lo: int, hi: int) -> int:
        """The sum mod 2^(8·width) of the keyed tokens ``blake2b(token, key)`` (``width``
        ≤ 8 bytes) of items ``lo..hi``. Computed per item on demand and remembered for the
        session: only ranges that differ ever get here, so a session touching a few ranges
        of a large set hashes a few of its items, not all of them."""
        values, keyed = self._keyed_state(key, width)
        tokens = self._tokens
        total = 0
        for i in range(lo, hi):
            value = values.get(i)
            if value is None:
                hasher = keyed.copy()  # the key block is compressed once, not per item
                hasher.update(tokens[32 * i : 32 * i + 32])
                value = values[i] = int.from_bytes(hasher.digest(), "little")
            total += value
        return total & ((1 << (8 * width)) - 1)

    def keyed_token(self, key: bytes, width: int, i: int) -> int:
        return self.keyed_sum(key, width, i, i + 1)

    def _keyed_state(self, key: bytes, width: int) -> tuple[dict[int, int], Any]:
        """Keyed tokens by index, those computed so far (a session hashes a few hundred
        of a large set: no array of the whole set per session, decision 0042), and the
        keyed hasher, per session key."""
        state = self._keyed.get((key, width))
        if state is None:
            if not 1 <= width <= 8:
                raise ValueError(f"keyed tokens are 1..8 bytes, not {width}")
            hasher = hashlib.blake2b(digest_size=width, key=key, person=KEYED_TOKEN_PERSON)
            state = self._keyed[(key, width)] = ({}, hasher)
        return state

    def fingerprint(self, lo: int, hi: int) -> bytes:
        """The plain (v1) fingerprint: ``sha256(sum ‖ count)`` cut to 16 bytes."""
        return plain_fingerprint(int.from_bytes(self.range_sum(lo, hi), "little"), hi - lo)

    def bound_before(self, i: int) -> Bound:
        """The shortest bound separating item ``i - 1`` from item ``i``."""
        height, item_id = self.key(i)
        if i == 0 or self._heights[i - 1] != height:
            return Bound(height, b"")
        prev = self.item_id(i - 1)
        shared = 0
        while shared < 32 and prev[shared] == item_id[shared]:
            shared += 1
        return Bound(height, item_id[: shared + 1])
