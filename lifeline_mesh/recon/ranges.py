"""Answering a range list against a snapshot: the heart of range-based reconciliation.

For each incoming range ``[lower, upper)`` (lower = the previous range's upper):

* SKIP: nothing.
* FINGERPRINT equal: SKIP. The peer holds nothing there: send ours, SKIP. We hold nothing:
  WANT_ALL. We hold few (≤ ``leaf``): ID_LIST of our items' names. Otherwise split our
  items into sub-ranges of equal count, each a FINGERPRINT: ``branch`` of them, or fewer
  for a small range (about ``leaf`` items each).
* ID_LIST: ours missing from the list are sent; theirs missing from ours are wanted; SKIP.
  A name shared by several of our items is ambiguous: we send them all and want the
  peer's item of that name too (a duplicate is harmless; a miss is not).
* WANT_ALL: send every item of ours in the range; SKIP.

Ranges are read in the form (``Dialect``) they came in and answered in the form this side
sends (plain until both hellos agree on compact ranges). In compact form an id list whose
short ids collide among our own items is sent with whole tokens instead.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from lifeline.errors import RemoteProtocolError
from lifeline_mesh.recon import dialect as forms
from lifeline_mesh.recon.dialect import FULL_TOKEN_BYTES, PLAIN, Dialect
from lifeline_mesh.recon.frames import Bound, Mode, Range
from lifeline_mesh.recon.sets import Snapshot

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
    want_tokens: list[bytes] = field(default_factory=list)  # 16-byte prefixes (plain lists)
    want_short: list[bytes] = field(default_factory=list)  # short ids (compact lists)
    want_full: list[bytes] = field(default_factory=list)  # whole tokens (fallback lists)

    def wants_any(self) -> bool:
        return bool(self.want_tokens or self.want_short or self.want_full)

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

    def __init__(
        self, snap: Snapshot, *, branch: int = 16, leaf: int = 12, dialect: Dialect = PLAIN
    ) -> None:
        self.snap = snap
        self.branch = branch
        self.leaf = leaf
        self.dialect = dialect  # the form of the ranges this side sends
        # name offered in an id list -> indices, for later Wants. Names of different forms
        # have different lengths (16, short, 32); a name offered for several items (a short
        # id shared across ranges) resolves to all of them.
        self.offered: dict[bytes, list[int]] = {}
        self._cursor = _ORIGIN
        self.reply = RangeReply()

    def start_turn(self) -> None:
        self._cursor = _ORIGIN
        self.reply = RangeReply()

    def answer(self, ranges: tuple[Range, ...], incoming: Dialect = PLAIN) -> None:
        """Answer ranges that came in form ``incoming``, in this side's own form."""
        for rng in ranges:
            lo = self.snap.index_of(self._cursor)
            hi = self.snap.index_of(rng.upper)
            if rng.upper is not None and rng.upper < self._cursor:
                raise RemoteProtocolError(
                    f"range bound {rng.upper} goes backwards (after {self._cursor}); "
                    "the peer's range list is out of order"
                )
            self._answer_one(rng, lo, hi, incoming)
            self._cursor = rng.upper if rng.upper is not None else Bound(1 << 63, b"")

    def _answer_one(self, rng: Range, lo: int, hi: int, incoming: Dialect) -> None:
        skip = Range(rng.upper, Mode.SKIP)
        if rng.mode is Mode.SKIP:
            self.reply.add(skip)
        elif rng.mode is Mode.WANT_ALL:
            self._send(lo, hi)
            self.reply.add(skip)
        elif rng.mode is Mode.ID_LIST:
            self._compare_list(rng, lo, hi, incoming)
            self.reply.add(skip)
        elif rng.mode is Mode.FINGERPRINT:
            self._answer_fingerprint(rng, lo, hi, incoming)
        else:
            raise RemoteProtocolError(f"unknown range mode {rng.mode!r}; upgrade this node")

    def _answer_fingerprint(self, rng: Range, lo: int, hi: int, incoming: Dialect) -> None:
        if len(rng.fingerprint) != incoming.fingerprint_bytes:
            raise RemoteProtocolError(
                f"fingerprint is {len(rng.fingerprint)} bytes, "
                f"expected {incoming.fingerprint_bytes}"
            )
        mine = hi - lo
        if rng.summed and not incoming.compact:
            raise RemoteProtocolError("a plain fingerprint cannot be a keyed sum")
        if (
            mine == rng.count
            and incoming.fingerprint(self.snap, lo, hi, rng.summed) == rng.fingerprint
        ):
            self.reply.add(Range(rng.upper, Mode.SKIP))
        elif rng.count == 0:
            self._send(lo, hi)
            self.reply.add(Range(rng.upper, Mode.SKIP))
        elif mine == 0:
            self.reply.add(Range(rng.upper, Mode.WANT_ALL))
        elif rng.summed and mine == rng.count + 1 and self._decode_one(rng, lo, hi, incoming):
            self.reply.add(Range(rng.upper, Mode.SKIP))
        elif self._narrows(rng, mine):
            # One item apart in a wide range: a keyed sum of it would hash every item on
            # both sides. Parts of about NARROW_PART items, each a keyed hash of its plain
            # sum (no hashing per item), leave one part one apart, which is echoed.
            parts = min(forms.NARROW_BRANCH, -(-mine // forms.NARROW_PART))
            self._split(lo, hi, rng.upper, parts=parts, summed=False)
        elif self._echoes(rng, mine, incoming):
            # One item apart: most likely a single difference. Our keyed sum of the whole
            # range lets the side holding the item find it from the difference of the sums.
            fingerprint = self.dialect.fingerprint(self.snap, lo, hi, summed=True)
            self.reply.add(Range(rng.upper, Mode.FINGERPRINT, fingerprint, mine, summed=True))
        elif mine <= self.leaf:
            self.reply.add(self._offer(lo, hi, rng.upper))
        else:
            self._split(lo, hi, rng.upper)

    def _echoes(self, rng: Range, mine: int, incoming: Dialect) -> bool:
        """Whether to answer a range one item apart with our keyed sum, unsplit.

        The side holding one fewer always may; the side holding one more only when the
        peer's fingerprint was not a keyed sum (else it decodes, or splits when that
        fails): so a range comes back at most twice before it is decoded or split.
        """
        if not (self.dialect.compact and incoming.compact) or mine > forms.ECHO_LIMIT:
            return False
        return mine + 1 == rng.count or (mine == rng.count + 1 and not rng.summed)

    def _narrows(self, rng: Range, mine: int) -> bool:
        """Whether a range one item apart is too wide to echo cheaply: split it finely
        instead. Only our own fingerprints are sent, so the form it came in does not
        matter (a plain opening is narrowed too)."""
        if not self.dialect.compact or mine <= forms.NARROW_ABOVE:
            return False
        return abs(mine - rng.count) == 1

    def _decode_one(self, rng: Range, lo: int, hi: int, incoming: Dialect) -> bool:
        """We hold one item more than the peer: if the difference of the keyed sums is the
        keyed token of exactly one of our items, the peer's items are ours without it (see
        docs/protocol.md, "One missing item"). Send it and settle the range."""
        missing = (
            incoming.keyed_sum(self.snap, lo, hi) - int.from_bytes(rng.fingerprint, "little")
        ) & incoming.mask
        found = [i for i in range(lo, hi) if incoming.keyed_token(self.snap, i) == missing]
        if len(found) != 1:
            return False  # more than one difference (or an ambiguous match): split
        self._send(found[0], found[0] + 1)
        return True

    def _split(
        self, lo: int, hi: int, upper: Bound | None, parts: int = 0, summed: bool = True
    ) -> None:
        count = hi - lo
        # A small range splits into fewer parts, each about one id list long: an isolated
        # difference then costs a few fingerprints instead of `branch` of them.
        parts = parts or min(self.branch, max(2, -(-count // self.leaf)))
        step, extra = divmod(count, parts)
        start = lo
        for part in range(parts):
            end = start + step + (1 if part < extra else 0)
            if end == start:
                continue
            bound = upper if end == hi else self.snap.bound_before(end)
            keyed = summed and self.dialect.compact and end - start <= forms.SUM_LIMIT
            fingerprint = self.dialect.fingerprint(self.snap, start, end, keyed)
            self.reply.add(Range(bound, Mode.FINGERPRINT, fingerprint, end - start, summed=keyed))
            start = end

    def _offer(self, lo: int, hi: int, upper: Bound | None) -> Range:
        """Our id list for ``lo..hi``: whole tokens when two of our short ids collide."""
        names = [self.dialect.list_id(self.snap.token(i)) for i in range(lo, hi)]
        full = self.dialect.compact and len(set(names)) < len(names)
        if full:
            names = [self.snap.token(i) for i in range(lo, hi)]
        for i, name in zip(range(lo, hi), names, strict=True):
            self.offered.setdefault(name, []).append(i)
        return Range(upper, Mode.ID_LIST, tokens=b"".join(names), full=full)

    def _compare_list(self, rng: Range, lo: int, hi: int, incoming: Dialect) -> None:
        if rng.full and not incoming.compact:
            raise RemoteProtocolError("a plain id list cannot carry whole tokens")
        width = FULL_TOKEN_BYTES if rng.full else incoming.list_id_bytes
        tokens = rng.tokens
        if len(tokens) % width:
            raise RemoteProtocolError(f"id list is {len(tokens)} bytes, not a multiple of {width}")
        listed = Counter(tokens[k : k + width] for k in range(0, len(tokens), width))
        theirs = listed.keys()
        # A name the peer listed twice (a peer that does not fall back) is ambiguous too.
        repeated = {name for name, times in listed.items() if times > 1}
        ours: dict[bytes, list[int]] = {}
        for i in range(lo, hi):
            token = self.snap.token(i)
            ours.setdefault(token if rng.full else incoming.list_id(token), []).append(i)
        wanted = sorted(theirs - ours.keys())
        for name, indices in ours.items():
            if name not in theirs:
                for i in indices:
                    self._send(i, i + 1)
            elif len(indices) > 1 or name in repeated:
                # Ambiguous: which of ours the peer holds, and whether its item of that
                # name is one of ours, is unknown. Send all of them and ask for theirs.
                for i in indices:
                    self._send(i, i + 1)
                wanted.append(name)
        if rng.full:
            self.reply.want_full.extend(wanted)
        elif incoming.compact:
            self.reply.want_short.extend(wanted)
        else:
            self.reply.want_tokens.extend(wanted)

    def _send(self, lo: int, hi: int) -> None:
        if hi > lo:
            self.reply.send.append((lo, hi))
