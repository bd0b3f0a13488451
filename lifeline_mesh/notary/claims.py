"""Earlier count claims of a node, read back at each admission, verified once per process.

Admitting a state statement (or a first-wave summary) compares its count with every
earlier claim by the same node about the same line (a smaller count later is a rollback,
``admission.check_timing``). Those claims are read from the store and their signatures
checked again each time, so the cost of admitting one statement grew with the number the
node had signed: in a 30-minute soak at one write per 2 s per node, re-verifying them
became the largest share of a serving node's CPU, rising from minute to minute. A claim
is now verified once per process, remembered by the hash of its stored bytes (damaged
bytes hash differently and are checked, and refused, afresh).
"""

from __future__ import annotations

import hashlib

from lifeline.errors import InvalidEntry
from lifeline_mesh.notary.statement import decode

__all__ = ["stored_claim"]

_MAX_KEPT = 200_000
_KEPT: dict[bytes, tuple[str, int] | None] = {}


def stored_claim(raw: bytes) -> tuple[str, int] | None:
    """(ts, count) of a stored summary or state statement; None if it does not verify."""
    key = hashlib.sha256(raw).digest()
    if key in _KEPT:
        return _KEPT[key]
    try:
        held = decode(raw)
        held.verify()
        claim: tuple[str, int] | None = (held.ts, held.summary_count)
    except InvalidEntry:
        claim = None  # a damaged local row is no evidence; `verify` reports it
    if len(_KEPT) >= _MAX_KEPT:
        _KEPT.clear()
    _KEPT[key] = claim
    return claim
