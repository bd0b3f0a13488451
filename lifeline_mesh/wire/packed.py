"""The packed encoding of compact ranges (``Recon.packed``, docs/protocol.md).

A repeated protobuf ``Range`` costs tags, lengths and a nested ``Bound`` message for every
range; a reply of thousands of ranges is mostly framing. Packed::

    packed  = varint(fingerprint_bytes) varint(short_id_bytes) range*
    range   = varint(header) [varint(height - previous height) prefix] body
    header  = mode | infinite << 2 | full << 3 | summed << 4 | len(prefix) << 5
    body    = FINGERPRINT: varint(count) fingerprint   (fingerprint_bytes)
              ID_LIST:     varint(n) n names            (short_id_bytes, 32 when full)
              SKIP, WANT_ALL: nothing

Heights are deltas from the previous bound of the same frame (from 0 for the first):
bounds only go up. A bound prefix is the shortest one separating two neighbours, usually
zero or one byte.
"""

from __future__ import annotations

from lifeline.errors import RemoteProtocolError
from lifeline_mesh.recon.frames import Bound, Mode, Range

__all__ = ["pack_opening", "pack_ranges", "unpack_opening", "unpack_ranges"]

_FULL = 32
_PLAIN_FINGERPRINT = 16  # an opening carries plain whole-set fingerprints
_MAX_U64 = (1 << 64) - 1


def _varint(value: int, out: bytearray) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def varint(self, what: str) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise RemoteProtocolError(f"packed ranges end inside a varint ({what})")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if value > _MAX_U64:
                raise RemoteProtocolError(f"packed ranges: {what} does not fit 64 bits")
            if not byte & 0x80:
                return value
            shift += 7

    def take(self, n: int, what: str) -> bytes:
        if n > len(self.data) - self.pos:
            raise RemoteProtocolError(
                f"packed ranges end early: {what} needs {n} bytes, {len(self.data) - self.pos} left"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk


def pack_ranges(ranges: tuple[Range, ...], fingerprint_bytes: int, short_id_bytes: int) -> bytes:
    out = bytearray()
    _varint(fingerprint_bytes, out)
    _varint(short_id_bytes, out)
    previous = 0
    for rng in ranges:
        upper = rng.upper
        prefix = b"" if upper is None else upper.id_prefix
        header = int(rng.mode) | (upper is None) << 2 | rng.full << 3 | rng.summed << 4
        header |= len(prefix) << 5
        _varint(header, out)
        if upper is not None:
            if upper.height < previous:
                raise ValueError("packed ranges need bounds in ascending order")
            _varint(upper.height - previous, out)
            out += prefix
            previous = upper.height
        if rng.mode is Mode.FINGERPRINT:
            if len(rng.fingerprint) != fingerprint_bytes:
                raise ValueError(f"fingerprint of {len(rng.fingerprint)} bytes in a packed frame")
            _varint(rng.count, out)
            out += rng.fingerprint
        elif rng.mode is Mode.ID_LIST:
            width = _FULL if rng.full else short_id_bytes
            if len(rng.tokens) % width:
                raise ValueError(f"id list of {len(rng.tokens)} bytes, not names of {width}")
            _varint(len(rng.tokens) // width, out)
            out += rng.tokens
    return bytes(out)


def unpack_ranges(data: bytes, max_ranges: int | None = None) -> tuple[tuple[Range, ...], int, int]:
    """Ranges and the widths the sender used; malformed input, or more than
    ``max_ranges`` ranges, is a RemoteProtocolError."""
    reader = _Reader(data)
    fingerprint_bytes = reader.varint("fingerprint width")
    short_id_bytes = reader.varint("short id width")
    if not 1 <= short_id_bytes < _FULL or not 1 <= fingerprint_bytes <= _FULL:
        raise RemoteProtocolError(
            f"packed ranges: widths {fingerprint_bytes}/{short_id_bytes} out of bounds"
        )
    ranges: list[Range] = []
    previous = 0
    while reader.pos < len(data):
        if max_ranges is not None and len(ranges) >= max_ranges:
            raise RemoteProtocolError(f"packed ranges: more than {max_ranges} in one frame")
        header = reader.varint("range header")
        mode = Mode(header & 3)
        infinite, full, summed = bool(header & 4), bool(header & 8), bool(header & 16)
        prefix_len = header >> 5
        if prefix_len > 32:
            raise RemoteProtocolError(f"range bound id prefix is {prefix_len} bytes (max 32)")
        if full and mode is not Mode.ID_LIST:
            raise RemoteProtocolError(f"whole-token flag on a {mode.name} range")
        if summed and mode is not Mode.FINGERPRINT:
            raise RemoteProtocolError(f"keyed-sum flag on a {mode.name} range")
        upper: Bound | None = None
        if infinite:
            if prefix_len:
                raise RemoteProtocolError("an infinite bound with an id prefix")
        else:
            height = previous + reader.varint("bound height")
            if height > _MAX_U64:
                raise RemoteProtocolError("packed ranges: bound height does not fit 64 bits")
            upper = Bound(height, reader.take(prefix_len, "bound prefix"))
            previous = height
        if mode is Mode.FINGERPRINT:
            count = reader.varint("count")
            fingerprint = reader.take(fingerprint_bytes, "fingerprint")
            ranges.append(Range(upper, mode, fingerprint, count, summed=summed))
        elif mode is Mode.ID_LIST:
            n = reader.varint("id list length")
            width = _FULL if full else short_id_bytes
            if n > len(data):
                raise RemoteProtocolError(f"id list of {n} names in a frame of {len(data)} bytes")
            ranges.append(Range(upper, mode, tokens=reader.take(n * width, "id list"), full=full))
        else:
            ranges.append(Range(upper, mode))
    return tuple(ranges), fingerprint_bytes, short_id_bytes


def pack_opening(opening: tuple[tuple[int, bytes], ...]) -> bytes:
    """The initiator's opening in its hello (``Hello.opening``): per set, in the order of
    its sets, ``varint(count) ‖ 16-byte plain fingerprint``."""
    out = bytearray()
    for count, fingerprint in opening:
        if len(fingerprint) != _PLAIN_FINGERPRINT:
            raise ValueError(f"an opening fingerprint of {len(fingerprint)} bytes")
        _varint(count, out)
        out += fingerprint
    return bytes(out)


def unpack_opening(data: bytes, sets: int) -> tuple[tuple[int, bytes], ...]:
    """(count, fingerprint) per set; one record per set of the hello, or an error."""
    reader = _Reader(data)
    out: list[tuple[int, bytes]] = []
    try:
        while reader.pos < len(data):
            count = reader.varint("opening count")
            out.append((count, reader.take(_PLAIN_FINGERPRINT, "opening fingerprint")))
    except RemoteProtocolError as exc:
        raise RemoteProtocolError(f"the hello's opening is malformed: {exc}") from exc
    if len(out) != sets:
        raise RemoteProtocolError(
            f"the hello's opening covers {len(out)} sets, but the hello names {sets}"
        )
    return tuple(out)
