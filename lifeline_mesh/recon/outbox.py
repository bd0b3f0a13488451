"""What one side owes the other for one set in the current turn, packed into frames.

Collects the items to send (index intervals from range answers, token and id wants from the
peer), orders them parents first (snapshot order is ``(height, id)``; explicitly wanted
parents go first), and packs ranges and raw items into frames under the peer's size cap.
"""

from __future__ import annotations

import heapq
from collections.abc import Container, Iterator, Sequence

from lifeline.errors import LocalProtocolError, RemoteProtocolError
from lifeline_mesh.recon.closure import OrphanPool
from lifeline_mesh.recon.dialect import FULL_TOKEN_BYTES, PLAIN, Dialect
from lifeline_mesh.recon.frames import Fetch, FetchRun, Items, Mode, Range, Recon, Want
from lifeline_mesh.recon.ranges import Responder
from lifeline_mesh.recon.sets import LIST_TOKEN_BYTES, Snapshot

__all__ = ["FetchPlan", "SetOutbox", "frame_budget", "item_cap"]

_RANGE_OVERHEAD = 48  # bound, mode, count, fingerprint and protobuf tags, generously
ITEM_OVERHEAD = 8
FRAME_HEADROOM = 1024  # a frame's own framing and its items' overhead, generously


def frame_budget(frame_cap: int) -> int:
    """The bytes of items and ranges a frame under ``frame_cap`` bytes carries."""
    return frame_cap - FRAME_HEADROOM


def item_cap(frame_cap: int) -> int:
    """The largest item a frame under ``frame_cap`` bytes carries (a seal larger than that
    is not sent to the peer, decision 0149)."""
    return frame_budget(frame_cap) - ITEM_OVERHEAD


class SetOutbox:
    def __init__(self, max_wanted_ids: int = 2_000_000) -> None:
        self._indices: set[int] = set()
        self._intervals: list[tuple[int, int]] = []
        self._unplaced: dict[bytes, None] = {}  # wanted, held outside the snapshot
        self.max_wanted_ids = max_wanted_ids
        self.wanted_ids = 0  # ids the peer asked for by id this session

    def collect(self, responder: Responder) -> None:
        """Take what this turn's range answers owe, to send now or in a later turn."""
        self._intervals += responder.reply.send
        responder.reply.send = []

    @staticmethod
    def settled(responder: Responder) -> bool:
        """No fingerprint left in our answer: no range of ours will come back to split.

        Items are held until then and sent together in key order, so that children found
        in an early round do not reach the peer before parents found in a later one.
        """
        return not any(r.mode is Mode.FINGERPRINT for r in responder.reply.ranges)

    def want(
        self, responder: Responder, want: Want, received: Container[bytes] = frozenset()
    ) -> None:
        """Record what the peer asked for (names never offered are ignored: nothing to send).

        A name offered for several items (short ids of two ranges colliding) sends them all.
        An id is kept only when this side holds it (its snapshot, or ``received`` this
        session), once however often it is asked for: ids by the hundred thousand held
        until our turn took ~1.3 GB (cap ``max_wanted_ids`` counts them all).
        """
        short = responder.dialect.list_id_bytes if responder.dialect.compact else 0
        for names, width in (
            (want.tokens, LIST_TOKEN_BYTES),
            (want.short_ids, short),
            (want.full_tokens, FULL_TOKEN_BYTES),
        ):
            if not names:
                continue
            if not width or len(names) % width:
                raise RemoteProtocolError(
                    f"want of {len(names)} bytes does not match the {width}-byte names offered"
                )
            for k in range(0, len(names), width):
                self._indices.update(responder.offered.get(names[k : k + width], ()))
        self._want_ids(responder.snap, want.ids, received)

    def _want_ids(self, snap: Snapshot, ids: Sequence[bytes], received: Container[bytes]) -> None:
        self.wanted_ids += len(ids)
        if self.wanted_ids > self.max_wanted_ids:
            raise RemoteProtocolError(
                f"the peer asked for more than {self.max_wanted_ids} items by id in one "
                "session (cap max_wanted_ids); a node asks only for parents it lacks"
            )
        for item_id in ids:
            position = snap.position(item_id)
            if position is not None:
                self._indices.add(position)
            elif item_id in received or snap.knows(item_id):
                self._unplaced[item_id] = None

    @staticmethod
    def asks(responder: Responder, pool: OrphanPool) -> bool:
        """Whether our next turn needs an answer (ranges to settle or items to request)."""
        reply = responder.reply
        settled = not reply.trimmed()
        return bool(not settled or reply.wants_any() or (settled and pool.has_unasked()))

    @staticmethod
    def wants(index: int, responder: Responder, pool: OrphanPool) -> Want | None:
        reply = responder.reply
        # While ranges are still being settled, a missing parent is likely to come anyway;
        # ask for parents by id only once reconciliation of the set is over.
        settled = not reply.trimmed()
        ids = tuple(pool.unasked_parents()) if settled else ()
        if not reply.wants_any() and not ids:
            return None
        return Want(
            index,
            b"".join(reply.want_tokens),
            ids,
            short_ids=b"".join(reply.want_short),
            full_tokens=b"".join(reply.want_full),
        )

    def plan(self, index: int, responder: Responder, chunk: int) -> Iterator[Fetch] | None:
        """Fetch requests for everything owed this turn, parents first, made one at a time
        as the driver asks (None: nothing owed); clears the outbox.

        Lazy, because an initial sync owes a whole set: a million ids held at once as
        ``bytes`` took ~80 MB of a serving node for the whole session (issue 14)."""
        snap = responder.snap
        # Everything in key order, (height, id): parents before children, also for items
        # wanted by id. Ids outside the snapshot (received this session) go first.
        unplaced = list(self._unplaced)
        extra = sorted(self._indices)
        intervals = sorted((lo, hi) for lo, hi in self._intervals if hi > lo)
        self._indices.clear()
        self._intervals.clear()
        self._unplaced.clear()
        if not unplaced and not extra and not intervals:
            return None
        return _fetches(index, snap, unplaced, _positions(intervals, extra), chunk)

    @staticmethod
    def pack(
        index: int,
        raws: Sequence[bytes],
        externals: Sequence[tuple[bytes, str]],
        budget: int,
    ) -> list[Items]:
        """Raw items in frames of at most ``budget`` bytes (one item may fill a frame)."""
        frames: list[Items] = []
        batch: list[bytes] = []
        size = 0
        pending_ext = tuple(externals)
        for raw in raws:
            if len(raw) + ITEM_OVERHEAD > budget:
                raise LocalProtocolError(
                    f"an item of {len(raw)} bytes does not fit the peer's frame cap of "
                    f"{budget} bytes (cap max_frame_bytes); raise the limit on the peer"
                )
            if batch and size + len(raw) + ITEM_OVERHEAD > budget:
                frames.append(Items(index, tuple(batch), pending_ext))
                pending_ext, batch, size = (), [], 0
            batch.append(raw)
            size += len(raw) + ITEM_OVERHEAD
        if batch:
            frames.append(Items(index, tuple(batch), pending_ext))
        return frames

    @staticmethod
    def recon_frames(
        index: int, ranges: Sequence[Range], budget: int, dialect: Dialect = PLAIN
    ) -> list[Recon]:
        def recon(part: list[Range]) -> Recon:
            if not dialect.compact:
                return Recon(index, tuple(part))
            widths = (dialect.fingerprint_bytes, dialect.list_id_bytes)
            return Recon(index, tuple(part), True, *widths)

        frames: list[Recon] = []
        part: list[Range] = []
        size = 0
        for rng in ranges:
            cost = _RANGE_OVERHEAD + len(rng.tokens)
            if part and size + cost > budget:
                frames.append(recon(part))
                part, size = [], 0
            part.append(rng)
            size += cost
        if part:
            frames.append(recon(part))
        return frames


def _positions(intervals: list[tuple[int, int]], extra: list[int]) -> Iterator[int]:
    """The snapshot positions of sorted ``intervals`` and ``extra``, sorted, each once."""
    last = -1
    for n in heapq.merge(*(range(lo, hi) for lo, hi in intervals), extra):
        if n != last:
            yield n
            last = n


def _fetches(
    index: int, snap: Snapshot, first: list[bytes], positions: Iterator[int], chunk: int
) -> Iterator[Fetch]:
    ids = list(first)
    for n in positions:
        ids.append(snap.item_id(n))
        if len(ids) >= chunk:
            yield Fetch(index, tuple(ids[:chunk]))
            ids = ids[chunk:]
    for k in range(0, len(ids), chunk):
        yield Fetch(index, tuple(ids[k : k + chunk]))


class FetchPlan:
    """A turn's reads, one at a time: each set's items owed, then its whole run's chunks."""

    def __init__(self) -> None:
        self._queue: list[Iterator[Fetch | FetchRun]] = []

    def __bool__(self) -> bool:
        return bool(self._queue)

    def add(self, fetches: Iterator[Fetch | FetchRun]) -> None:
        self._queue.append(fetches)

    def clear(self) -> None:
        self._queue = []

    def next(self) -> Fetch | FetchRun | None:
        """The next read (each made once the one before it is answered); None: all made."""
        while self._queue:
            fetch = next(self._queue[0], None)
            if fetch is not None:
                return fetch
            self._queue.pop(0)
        return None
