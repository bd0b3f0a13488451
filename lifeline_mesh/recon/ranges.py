"""Answering a range list against a snapshot: the heart of range-based reconciliation.

For each incoming range ``[lower, upper)`` (lower = the previous range's upper):

* SKIP: nothing.
* FINGERPRINT equal: SKIP. The peer holds nothing there: send ours, SKIP. We hold nothing:
  WANT_ALL. We hold few (≤ ``leaf``): ID_LIST of our token prefixes. Otherwise split our
  items into sub-ranges of equal count, each a FINGERPRINT: ``branch`` of them, or fewer
  for a small range (about ``leaf`` items each).
* ID_LIST: ours missing from the list are sent; theirs missing from ours are wanted; SKIP.
* WANT_ALL: send every item of ours in the range; SKIP.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lifeline.errors import RemoteProtocolError
from lifeline_mesh.recon.frames import Bound, Mode, Range
from lifeline_mesh.recon.sets import FINGERPRINT_BYTES, LIST_TOKEN_BYTES, Snapshot

__all__ = ["RangeReply", "Responder", "initial_ranges"]

_ORIGIN = Bound(0, b"")


def initial_ranges(snap: Snapshot) -> list[Range]:
    """The opening message: one fingerprint over the whole set."""
    n = len(snap)
    return [Range(None, Mode.FINGERPRINT, snap.fingerprint(0, n), n)]


@dataclass(slots=True)
class RangeReply:
    """What answering one turn's ranges produced for one set."""

    ranges: list[Range] = field(default_factory=list)
    send: list[tuple[int, int]] = field(default_factory=list)  # index intervals to send
    want_tokens: list[bytes] = field(default_factory=list)

    def add(self, rng: Range) -> None:
        last = self.ranges[-1] if self.ranges else None
        if rng.mode is Mode.SKIP and last is not None and last.mode is Mode.SKIP:
            self.ranges[-1] = rng  # merge adjacent skips: only the upper end matters
        else:
            self.ranges.append(rng)

    def trimmed(self) -> list[Range]:
        """The range list without trailing skips (implicit); empty when all resolved."""
        out = list(self.ranges)
        while out and out[-1].mode is Mode.SKIP:
            out.pop()
        return out


class Responder:
    """Answers the ranges of one set for one turn; keeps what was offered in id lists."""

    def __init__(self, snap: Snapshot, *, branch: int = 16, leaf: int = 12) -> None:
        self.snap = snap
        self.branch = branch
        self.leaf = leaf
        self.offered: dict[bytes, int] = {}  # token prefix -> index, for later Wants
        self._cursor = _ORIGIN
        self.reply = RangeReply()

    def start_turn(self) -> None:
        self._cursor = _ORIGIN
        self.reply = RangeReply()

    def answer(self, ranges: tuple[Range, ...]) -> None:
        for rng in ranges:
            lo = self.snap.index_of(self._cursor)
            hi = self.snap.index_of(rng.upper)
            if rng.upper is not None and rng.upper < self._cursor:
                raise RemoteProtocolError(
                    f"range bound {rng.upper} goes backwards (after {self._cursor}); "
                    "the peer's range list is out of order"
                )
            self._answer_one(rng, lo, hi)
            self._cursor = rng.upper if rng.upper is not None else Bound(1 << 63, b"")

    def _answer_one(self, rng: Range, lo: int, hi: int) -> None:
        skip = Range(rng.upper, Mode.SKIP)
        if rng.mode is Mode.SKIP:
            self.reply.add(skip)
        elif rng.mode is Mode.WANT_ALL:
            self._send(lo, hi)
            self.reply.add(skip)
        elif rng.mode is Mode.ID_LIST:
            self._compare_list(rng.tokens, lo, hi)
            self.reply.add(skip)
        elif rng.mode is Mode.FINGERPRINT:
            self._answer_fingerprint(rng, lo, hi)
        else:
            raise RemoteProtocolError(f"unknown range mode {rng.mode!r}; upgrade this node")

    def _answer_fingerprint(self, rng: Range, lo: int, hi: int) -> None:
        if len(rng.fingerprint) != FINGERPRINT_BYTES:
            raise RemoteProtocolError(
                f"fingerprint is {len(rng.fingerprint)} bytes, expected {FINGERPRINT_BYTES}"
            )
        mine = hi - lo
        if mine == rng.count and self.snap.fingerprint(lo, hi) == rng.fingerprint:
            self.reply.add(Range(rng.upper, Mode.SKIP))
        elif rng.count == 0:
            self._send(lo, hi)
            self.reply.add(Range(rng.upper, Mode.SKIP))
        elif mine == 0:
            self.reply.add(Range(rng.upper, Mode.WANT_ALL))
        elif mine <= self.leaf:
            self.reply.add(Range(rng.upper, Mode.ID_LIST, tokens=self._offer(lo, hi)))
        else:
            self._split(lo, hi, rng.upper)

    def _split(self, lo: int, hi: int, upper: Bound | None) -> None:
        count = hi - lo
        # A small range splits into fewer parts, each about one id list long: an isolated
        # difference then costs a few fingerprints instead of `branch` of them.
        parts = min(self.branch, max(2, -(-count // self.leaf)))
        step, extra = divmod(count, parts)
        start = lo
        for part in range(parts):
            end = start + step + (1 if part < extra else 0)
            if end == start:
                continue
            bound = upper if end == hi else self.snap.bound_before(end)
            self.reply.add(
                Range(bound, Mode.FINGERPRINT, self.snap.fingerprint(start, end), end - start)
            )
            start = end

    def _offer(self, lo: int, hi: int) -> bytes:
        parts = []
        for i in range(lo, hi):
            prefix = self.snap.token(i)[:LIST_TOKEN_BYTES]
            self.offered[prefix] = i
            parts.append(prefix)
        return b"".join(parts)

    def _compare_list(self, tokens: bytes, lo: int, hi: int) -> None:
        if len(tokens) % LIST_TOKEN_BYTES:
            raise RemoteProtocolError(
                f"id list is {len(tokens)} bytes, not a multiple of {LIST_TOKEN_BYTES}"
            )
        theirs = {tokens[k : k + LIST_TOKEN_BYTES] for k in range(0, len(tokens), LIST_TOKEN_BYTES)}
        ours: set[bytes] = set()
        for i in range(lo, hi):
            prefix = self.snap.token(i)[:LIST_TOKEN_BYTES]
            ours.add(prefix)
            if prefix not in theirs:
                self._send(i, i + 1)
        self.reply.want_tokens.extend(sorted(theirs - ours))

    def _send(self, lo: int, hi: int) -> None:
        if hi > lo:
            self.reply.send.append((lo, hi))
