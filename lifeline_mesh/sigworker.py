"""A signature worker: ``python -m lifeline_mesh.sigworker`` (see lifeline_mesh.notary.verifier).

It answers one question for batches of attestation items: which is the first whose ed25519
signature does not verify over its statement (libsodium). It imports only the standard
library and PyNaCl, so each worker process stays small, and exits when its stdin closes.

Wire format on the pipes (all integers 4-byte big-endian): a request is a count, then each
item as length ‖ bytes; the reply is the index of the first bad item, or -1 (signed).
"""

from __future__ import annotations

import contextlib
import signal
import struct
import sys
from collections.abc import Sequence
from typing import IO, BinaryIO

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

__all__ = ["I32", "first_bad_in", "main", "read_exact", "request_bytes", "serve_requests"]

KEY_BYTES = 32
SIG_BYTES = 64
U32 = struct.Struct(">I")
I32 = struct.Struct(">i")


def first_bad_in(items: Sequence[bytes]) -> int:
    """Index of the first item whose signature does not verify over its statement, or -1.

    An item is ``statement ‖ public key (32) ‖ signature (64)`` (docs/notary.md).
    """
    keys: dict[bytes, VerifyKey] = {}
    for n, item in enumerate(items):
        if len(item) <= KEY_BYTES + SIG_BYTES:
            return n
        raw_key = item[-(KEY_BYTES + SIG_BYTES) : -SIG_BYTES]
        try:
            key = keys.get(raw_key) or keys.setdefault(raw_key, VerifyKey(raw_key))
            key.verify(item[: -(KEY_BYTES + SIG_BYTES)], item[-SIG_BYTES:])
        except (BadSignatureError, ValueError, TypeError):
            return n
    return -1


def read_exact(stream: IO[bytes], size: int) -> bytes:
    """Exactly ``size`` bytes from ``stream``; EOFError when it ends first."""
    data = stream.read(size)
    if len(data) != size:
        raise EOFError("signature worker pipe closed")
    return data


def request_bytes(items: Sequence[bytes]) -> bytes:
    """One request: the count, then each item as length ‖ bytes."""
    parts = [U32.pack(len(items))]
    for item in items:
        parts += (U32.pack(len(item)), item)
    return b"".join(parts)


def serve_requests(source: BinaryIO, sink: BinaryIO) -> None:
    """The worker's loop: answer requests until stdin closes."""
    while True:
        head = source.read(4)
        if len(head) < 4:
            return
        (count,) = U32.unpack(head)
        items = []
        for _ in range(count):
            (size,) = U32.unpack(read_exact(source, 4))
            items.append(read_exact(source, size))
        sink.write(I32.pack(first_bad_in(items)))
        sink.flush()


def main() -> None:
    # Ctrl-C reaches the whole process group; the node closes our stdin when it stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(EOFError):
        serve_requests(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
