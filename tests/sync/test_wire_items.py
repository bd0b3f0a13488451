"""A batch of items is written to the wire without building its protobuf message: the
bytes are exactly the message's, and read back as the same frame."""

from __future__ import annotations

import pytest

from lifeline_mesh.recon.frames import EndOfTurn, Frame, Items
from lifeline_mesh.wire.codec import decode_bytes, encode, encode_bytes

EXT = bytes(range(32))


@pytest.mark.parametrize(
    "frame",
    [
        Items(0, (b'{"id": 1}',), ()),  # set 0: a default, so not written
        Items(2, tuple(bytes([k]) * (k * 97) for k in range(60)), ()),
        Items(1, (b"", b"x" * 20_000, b"\x00\xff" * 9000), ((EXT, "research"),)),  # 3-byte lengths
        Items(300, (), ((EXT, ""), (bytes(32), "ledger"))),  # a 2-byte set index, no items
        EndOfTurn(),  # anything else goes through the message
    ],
)
def test_items_are_written_as_their_message(frame: Frame) -> None:
    data = encode_bytes(frame)
    assert data == encode(frame).SerializeToString()
    assert decode_bytes(data) == frame
