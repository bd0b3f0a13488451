"""How membership material (``NodeHome``'s mesh files) is written, read and locked.

One rule for every secret file (``node.key``, ``tls.key``, ``ca.key``, ``invites.json``):
it is written 0600 through a temp file and a rename, so a crash never leaves half a key, and
it is refused when read while other users can read it (:func:`read_private`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lifeline import fsutil
from lifeline.errors import ConfigError
from lifeline.fsutil import read_private
from lifeline_mesh.home.node_home import NodeHome

__all__ = [
    "exclusive",
    "read_json",
    "read_private",
    "write_atomic",
]


def write_atomic(path: Path, data: bytes, *, private: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically; ``private`` files get mode 0600."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fsutil.write_atomic(path, data, mode=0o600 if private else 0o644)


@contextmanager
def exclusive(home: NodeHome) -> Iterator[None]:
    """Hold the node's membership lock: one read-modify-write of its documents at a time,
    across every process sharing them (e.g. two joins spending one invite: two processes on
    one root, or two hub processes on one database). Never nest it."""
    with home.documents.exclusive():
        yield


def read_json(path: Path, default: Any, *, private: bool = False) -> Any:
    """Parse a JSON file of ours; a damaged one is a ConfigError naming the file."""
    if not path.exists():
        return default
    try:
        raw = read_private(path) if private else path.read_bytes()
        return json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # bad JSON or bad UTF-8
        raise ConfigError(
            f"{path} is not valid JSON ({exc}); restore it from a backup or another member"
        ) from exc
