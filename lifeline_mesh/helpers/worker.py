"""A helper process: ``python -m lifeline_mesh.helpers.worker`` (its pool: ``helpers/pool.py``).

It does the CPU-heavy checks of large received batches, so that the node's own process
decodes and stores while it works. Requests, by operation code:

* ``V`` (verify): attestation items; the answer is the index of the first item whose
  ed25519 signature does not verify over its statement (libsodium), or -1.
* ``E`` (entries): the size limits and raw entries; the answer is ``(-1, parsed)``, for each
  entry its id and parent ids as bytes and its fields, admitted exactly as
  ``EntryCodec.parse`` admits it (id recomputed from the content, size caps), or
  ``(index of the first inadmissible one, [])``.

Wire format on the pipes: a request is length (4 bytes, big-endian) ‖ code (1 byte) ‖
payload, a reply is length ‖ result; payloads and results are ``marshal`` data. Only this
package writes either side: a peer's bytes travel inside as opaque byte strings.

At start it imports only the standard library and PyNaCl (a worker stays small); the entry
parser is imported on the first ``E`` request. It exits when its stdin closes.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import signal
import struct
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any, BinaryIO

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

__all__ = [
    "ENTRIES",
    "U32",
    "VERIFY",
    "first_bad_in",
    "main",
    "parse_entries",
    "read_exact",
    "serve_requests",
]

KEY_BYTES = 32
SIG_BYTES = 64
U32 = struct.Struct(">I")
VERIFY = b"V"
ENTRIES = b"E"


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


def parse_entries(
    limits: tuple[int, ...], raws: Sequence[bytes]
) -> tuple[int, list[tuple[Any, ...]]]:
    """``(-1, [(id, parent ids, fields), ...])``; ``(n, [])`` when entry ``n`` is inadmissible.

    Ids are bytes; the fields are ``Entry``'s, in its constructor's order. ``limits`` are
    the fields of a ``lifeline.validate.Limits``.
    """
    from lifeline.entry import Entry
    from lifeline.errors import InvalidEntry
    from lifeline.validate import Limits, check_admissible

    caps = Limits(*limits)
    out: list[tuple[Any, ...]] = []
    for n, raw in enumerate(raws):
        try:
            e = Entry.from_json(raw, check=False)
            check_admissible(e, caps)
        except (InvalidEntry, ValueError, TypeError, RecursionError):
            return n, []  # the node parses the batch itself and words the refusal
        fields = (e.id, e.ts, e.kind, e.author, e.agent, e.provider, e.model, e.summary,
                  e.body, e.parents, e.dedup_key)  # fmt: skip
        out.append((bytes.fromhex(e.id), tuple(bytes.fromhex(p) for p in e.parents), fields))
    return -1, out


_OPERATIONS: dict[bytes, Callable[[Any], Any]] = {
    VERIFY: first_bad_in,
    ENTRIES: lambda payload: parse_entries(*payload),
}


def read_exact(stream: IO[bytes], size: int) -> bytes:
    """Exactly ``size`` bytes from ``stream``; EOFError when it ends first."""
    data = stream.read(size)
    if len(data) != size:
        raise EOFError("worker pipe closed")
    return data


def serve_requests(source: BinaryIO, sink: BinaryIO) -> None:
    """The worker's loop: answer requests until stdin closes."""
    while True:
        head = source.read(4)
        if len(head) < 4:
            return
        (size,) = U32.unpack(head)
        request = read_exact(source, size)
        result = marshal.dumps(_OPERATIONS[request[:1]](marshal.loads(request[1:])))
        sink.write(U32.pack(len(result)))
        sink.write(result)
        sink.flush()


# Objects between two young collections: a request builds thousands that live until its
# answer is written (Python's 700 made each collection walk them again; they hold no cycles).
GC_THRESHOLD = 50_000


def main() -> None:
    # Ctrl-C reaches the whole process group; the node closes our stdin when it stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    with contextlib.suppress(EOFError):
        serve_requests(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
