"""Mapping between the core's frames and the protobuf messages of ``sync.proto``.

The only place protobuf types meet the reconciliation core. ``decode`` turns any malformed
input (garbage bytes, a missing body, an out-of-range enum) into a RemoteProtocolError that
shows what was wrong.

gRPC hands us a whole frame (up to the frame cap), already parsed; a repeated field of
tiny elements would still cost far more as Python objects than on the wire (700k set
names of a few bytes in a 6 MB hello). So every repeated field is counted, and every name
measured, against the caps below before anything is built from it (docs/protocol.md,
"Limits").
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from google.protobuf.message import DecodeError

from lifeline.errors import RemoteProtocolError
from lifeline.wording import one_line
from lifeline_mesh.recon.frames import (
    Abort,
    Bound,
    EndOfTurn,
    Fin,
    Frame,
    Hello,
    Items,
    KeepAlive,
    Mode,
    Range,
    Recon,
    Want,
)
from lifeline_mesh.wire import sync_pb2 as pb
from lifeline_mesh.wire.packed import pack_opening, pack_ranges, unpack_opening, unpack_ranges

__all__ = [
    "MAX_CAPABILITIES",
    "MAX_HELLO_SETS",
    "MAX_IDS_PER_FRAME",
    "MAX_ITEMS_PER_FRAME",
    "MAX_NAME_CHARS",
    "MAX_PEER_TEXT",
    "MAX_RANGES_PER_FRAME",
    "decode",
    "decode_bytes",
    "encode",
    "encode_bytes",
    "peer_text",
]

MAX_HELLO_SETS = 16  # sets named in a hello (this version reconciles 3)
MAX_CAPABILITIES = 64  # capabilities named in a hello
MAX_NAME_CHARS = 64  # a line, set or capability name (line names: lifeline.lines)
MAX_ITEMS_PER_FRAME = 1 << 16  # items, and cross-line parents, in one Items frame
MAX_IDS_PER_FRAME = 1 << 18  # ids in one Want frame
# Ranges in one Recon frame: a sender puts at most one per 48 bytes of its frame budget
# (recon/outbox.py), 174,762 in the largest frames a node sends (8 MiB).
MAX_RANGES_PER_FRAME = 1 << 18
MAX_PEER_TEXT = 1000  # characters kept of a peer's free text (an abort's reason, a refusal)
MAX_REFUSALS_TOLD = 3  # reasons kept of a closing EndOfTurn's refusals (REFUSALS_KEPT)


def _bound_pb(bound: Bound | None) -> pb.Bound:
    if bound is None:
        return pb.Bound(infinite=True)
    return pb.Bound(height=bound.height, id_prefix=bound.id_prefix)


def _range_pb(rng: Range) -> pb.Range:
    return pb.Range(
        upper=_bound_pb(rng.upper),
        mode=int(rng.mode),  # type: ignore[arg-type]
        fingerprint=rng.fingerprint,
        count=rng.count,
        tokens=rng.tokens,
    )


def encode(frame: Frame) -> pb.Frame:
    if isinstance(frame, Hello):
        return pb.Frame(
            hello=pb.Hello(
                protocol_version=frame.protocol_version,
                line=frame.line,
                sets=list(frame.sets),
                capabilities=list(frame.capabilities),
                max_frame_bytes=frame.max_frame_bytes,
                max_items=frame.max_items,
                salt=frame.salt,
                summaries=list(frame.summaries),
                opening=pack_opening(frame.opening),
            )
        )
    if isinstance(frame, Recon):
        if frame.compact:
            packed = pack_ranges(frame.ranges, frame.fingerprint_bytes, frame.short_id_bytes)
            return pb.Frame(recon=pb.Recon(set=frame.set_index, packed=packed))
        return pb.Frame(
            recon=pb.Recon(set=frame.set_index, ranges=[_range_pb(r) for r in frame.ranges])
        )
    if isinstance(frame, Want):
        return pb.Frame(
            want=pb.Want(
                set=frame.set_index,
                tokens=frame.tokens,
                ids=frame.ids,
                short_ids=frame.short_ids,
                full_tokens=frame.full_tokens,
            )
        )
    if isinstance(frame, Items):
        externals = [pb.External(id=i, line=line) for i, line in frame.externals]
        return pb.Frame(items=pb.Items(set=frame.set_index, items=frame.items, externals=externals))
    if isinstance(frame, Abort):
        return pb.Frame(abort=pb.Abort(code=frame.code, reason=frame.reason))
    if isinstance(frame, EndOfTurn):
        told = pb.EndOfTurn(refused=frame.refused, refusals=frame.refusals)
        return pb.Frame(end_of_turn=told)
    if isinstance(frame, KeepAlive):
        return pb.Frame(keep_alive=pb.KeepAlive())
    return pb.Frame(fin=pb.Fin())


def encode_bytes(frame: Frame) -> bytes:
    """``encode(frame).SerializeToString()``; a batch of items is written directly.

    A frame of thousands of items built as a message copied each item into it and then
    into the bytes (~1.2 µs an item, on the sender's event loop). The protobuf encoding
    of ``Frame{items: Items{set, items, externals}}`` is simple enough to write: the same
    bytes, fields in number order (tests compare both)."""
    if not isinstance(frame, Items):
        return encode(frame).SerializeToString()
    parts: list[bytes] = [] if frame.set_index == 0 else [b"\x08", _varint(frame.set_index)]
    for item in frame.items:
        parts += (b"\x12", _varint(len(item)), item)
    for ext_id, line in frame.externals:
        ext = pb.External(id=ext_id, line=line).SerializeToString()
        parts += (b"\x1a", _varint(len(ext)), ext)
    body = b"".join(parts)
    return b"\x22" + _varint(len(body)) + body


@lru_cache(maxsize=4096)  # item lengths repeat (entries of a line are alike in size)
def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bound(msg: pb.Bound) -> Bound | None:
    if msg.infinite:
        return None
    if len(msg.id_prefix) > 32:
        raise RemoteProtocolError(f"range bound id prefix is {len(msg.id_prefix)} bytes (max 32)")
    return Bound(msg.height, bytes(msg.id_prefix))


def _range(msg: pb.Range) -> Range:
    try:
        mode = Mode(msg.mode)
    except ValueError as exc:
        raise RemoteProtocolError(f"unknown range mode {msg.mode}; upgrade this node") from exc
    return Range(_bound(msg.upper), mode, bytes(msg.fingerprint), msg.count, bytes(msg.tokens))


def peer_text(text: str) -> str:
    """A peer's free text (an abort's reason, a refusal) made safe to print on one terminal
    line: control characters (ESC, CR) shown escaped, at most ``MAX_PEER_TEXT`` characters."""
    return one_line(text, MAX_PEER_TEXT)


def _at_most(count: int, cap: int, what: str) -> None:
    if count > cap:
        raise RemoteProtocolError(
            f"a frame with {count} {what} (cap {cap}); the peer is not a lifeline-mesh node "
            "or is broken"
        )


def _names(values: Sequence[str], cap: int, what: str) -> tuple[str, ...]:
    """The names of a repeated field, each checked, once their count is."""
    _at_most(len(values), cap, what)
    for value in values:
        _name(value, what)
    return tuple(values)


def _name(value: str, what: str) -> str:
    if len(value) > MAX_NAME_CHARS:
        raise RemoteProtocolError(
            f"a hello names {what} of {len(value)} characters (cap MAX_NAME_CHARS = "
            f"{MAX_NAME_CHARS}), starting {value[:16]!r}"
        )
    return value


def _hello(h: pb.Hello) -> Hello:
    sets = _names(h.sets, MAX_HELLO_SETS, "sets")
    _at_most(len(h.summaries), len(sets), "set summaries (more than sets)")
    return Hello(
        h.protocol_version,
        _name(h.line, "a line"),
        sets,
        _names(h.capabilities, MAX_CAPABILITIES, "capabilities"),
        h.max_frame_bytes,
        h.max_items,
        bytes(h.salt),
        tuple(bytes(x) for x in h.summaries),
        unpack_opening(bytes(h.opening), len(sets)) if h.opening else (),
    )


def _items(msg: pb.Items) -> Items:
    _at_most(len(msg.items), MAX_ITEMS_PER_FRAME, "items")
    _at_most(len(msg.externals), MAX_ITEMS_PER_FRAME, "cross-line parents")
    externals = []
    for ext in msg.externals:
        if len(ext.id) != 32:
            raise RemoteProtocolError(f"external reference id is {len(ext.id)} bytes, not 32")
        externals.append((bytes(ext.id), ext.line))
    return Items(msg.set, tuple(msg.items), tuple(externals))  # repeated bytes: already bytes


def decode(msg: pb.Frame) -> Frame:
    kind = msg.WhichOneof("body")
    if kind == "hello":
        return _hello(msg.hello)
    if kind == "recon":
        if msg.recon.packed:
            if msg.recon.ranges:
                raise RemoteProtocolError("a recon frame with both plain and packed ranges")
            ranges, fp_bytes, id_bytes = unpack_ranges(
                bytes(msg.recon.packed), MAX_RANGES_PER_FRAME
            )
            return Recon(msg.recon.set, ranges, True, fp_bytes, id_bytes)
        _at_most(len(msg.recon.ranges), MAX_RANGES_PER_FRAME, "ranges")
        return Recon(msg.recon.set, tuple(_range(r) for r in msg.recon.ranges))
    if kind == "want":
        _at_most(len(msg.want.ids), MAX_IDS_PER_FRAME, "wanted ids")
        ids = tuple(bytes(i) for i in msg.want.ids)
        if any(len(i) != 32 for i in ids):
            raise RemoteProtocolError("a wanted id is not 32 bytes")
        want = msg.want
        return Want(
            want.set, bytes(want.tokens), ids, bytes(want.short_ids), bytes(want.full_tokens)
        )
    if kind == "items":
        return _items(msg.items)
    if kind == "abort":
        return Abort(peer_text(msg.abort.code), peer_text(msg.abort.reason))
    if kind == "end_of_turn":
        told = msg.end_of_turn
        refusals = tuple(peer_text(r) for r in told.refusals[:MAX_REFUSALS_TOLD])
        return EndOfTurn(told.refused, refusals)
    if kind == "fin":
        return Fin()
    if kind == "keep_alive":
        return KeepAlive()
    raise RemoteProtocolError("frame has no body (empty or from a newer protocol); upgrade")


def decode_bytes(data: bytes) -> Frame:
    """Parse a serialized frame; garbage becomes a RemoteProtocolError."""
    msg = pb.Frame()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        raise RemoteProtocolError(
            f"frame of {len(data)} bytes is not a valid protobuf Frame ({exc}); "
            f"first bytes {data[:16].hex()}"
        ) from exc
    return decode(msg)
