"""A serving node's snapshots kept on disk, so a restarted node does not build them again.

Building the snapshot of a set of 100k items from its rows costs about half a second of
CPU (hex-decoding ids, hashing each entry's token); a node restarted after a crash paid it
for each set in its first sessions, on top of starting, while its peers waited for what it
wrote meanwhile (issue 14's soak). The cache (``snapshot_cache.py``) writes each snapshot
it holds here — after building it, then at most once every ``SAVE_EVERY_S`` while it is
brought up to date — and a fresh process starts from the file: the rows added since its
mark are merged in and the result checked against the set's whole-set summary, exactly as
for a snapshot held in memory. A file that does not match (another line under the same
name, rows changed in place, a damaged file) is built again from the rows; the file is
never trusted beyond that check and its own checksum.

Format: ``MAGIC``, then mark, item count (8 bytes each, little-endian), a SHA-256 of the
rest, then heights (8 bytes each, little-endian), ids, tokens (32 bytes each), and the
prefix sums the snapshot stores. Written to a temporary file and renamed into place.
"""

from __future__ import annotations

import hashlib
import os
import sys
from array import array
from pathlib import Path

from lifeline_mesh.recon.sets import Snapshot

__all__ = ["SAVE_EVERY_S", "load_snapshot", "save_snapshot", "snapshot_path"]

MAGIC = b"lifeline-snapshot 1\n"
SAVE_EVERY_S = 60.0
_HEAD = len(MAGIC) + 16 + 32


def snapshot_path(directory: Path, line_file: Path, set_name: str) -> Path:
    return directory / f"{line_file.stem}.{set_name}.snap"


def save_snapshot(path: Path, snap: Snapshot, mark: int) -> None:
    """Write ``snap`` (covering rows up to ``mark``) to ``path``, atomically."""
    heights, ids, tokens, sums = snap.buffers()
    height_bytes = heights.tobytes()
    if sys.byteorder != "little":
        swapped = array("Q", height_bytes)  # a copy: the snapshot's own never changes
        swapped.byteswap()
        height_bytes = swapped.tobytes()
    body: list[bytes | memoryview] = [height_bytes, ids, tokens, sums]
    digest = hashlib.sha256()
    for part in body:
        digest.update(part)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as out:
        out.write(MAGIC + mark.to_bytes(8, "little") + len(snap).to_bytes(8, "little"))
        out.write(digest.digest())
        for part in body:
            out.write(part)
    os.replace(tmp, path)


def load_snapshot(path: Path) -> tuple[Snapshot, int] | None:
    """The snapshot in ``path`` and its mark; None when there is none or it is damaged."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) < _HEAD or not data.startswith(MAGIC):
        return None
    at = len(MAGIC)
    mark = int.from_bytes(data[at : at + 8], "little")
    n = int.from_bytes(data[at + 8 : at + 16], "little")
    body = memoryview(data)[_HEAD:]
    if hashlib.sha256(body).digest() != data[at + 16 : _HEAD]:
        return None
    ends = [8 * n, 40 * n, 72 * n]
    if len(body) < ends[-1]:
        return None
    heights = array("Q")
    heights.frombytes(body[: ends[0]])
    if sys.byteorder != "little":
        heights.byteswap()
    try:
        snap = Snapshot.from_buffers(
            heights,
            bytearray(body[ends[0] : ends[1]]),
            bytearray(body[ends[1] : ends[2]]),
            bytearray(body[ends[2] :]),
        )
    except ValueError:
        return None
    return snap, mark
