"""Items a peer sent, taken in by a session: counted against the caps, each checked for
size and parsed (or taken already parsed by the helper processes), then held until their
parents are known and delivered, parents first. Pure: no I/O.

An inadmissible item (an entry whose id does not match its content, text that is not an
entry: a copy the peer holds damaged) is refused alone and counted, and the rest of its
frame goes on; one damaged row on a hub no longer stops every node's sync with it. Past
``max_refused`` in a session the peer is misbehaving and the session is aborted
(decision 0111)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from lifeline.errors import InvalidEntry, RemoteProtocolError
from lifeline_mesh.recon.frames import Deliver, Effect, Items
from lifeline_mesh.recon.session_state import SessionLimits, SessionStats, SetState
from lifeline_mesh.recon.sets import ParsedItem

__all__ = ["REFUSALS_KEPT", "take_items"]


def take_items(
    state: SetState,
    items: Items,
    parsed: Sequence[ParsedItem] | None,
    stats: SessionStats,
    limits: SessionLimits,
) -> list[Effect]:
    """``items`` of ``state``'s set received: what is ready to store, as one ``Deliver``."""
    stats.items_received += len(items.items)
    by_set = stats.received_by_set
    by_set[state.name] = by_set.get(state.name, 0) + len(items.items)
    if stats.items_received > limits.max_items:
        raise RemoteProtocolError(
            f"the peer sent more than {limits.max_items} items in one session "
            "(cap max_items); sync again to continue"
        )
    _declare(state, items.externals, limits)
    if parsed is None or len(parsed) != len(items.items):
        ready_items = [
            item
            for item in (_parse(state, raw, stats, limits) for raw in items.items)
            if item is not None
        ]
    else:
        for raw in items.items:
            _check_size(raw, limits)
        ready_items = list(parsed)
    ready = state.pool.admit(ready_items, state.known, state.received.add)
    if not ready:
        return []
    deps = {d for item in ready for d in item.deps}
    declared = tuple(sorted((d, state.externals[d]) for d in deps if d in state.externals))
    return [Deliver(items.set_index, tuple(ready), declared)]


MAX_LINE_CHARS = 64  # a line's name (lifeline.lines): a cross-line parent names one


def _declare(
    state: SetState, externals: Sequence[tuple[bytes, str]], limits: SessionLimits
) -> None:
    """The cross-line parents a frame declares, kept for the session: counted (each once)
    and measured, as a frame of no item and 65,536 of them grew a node ~60 MB a frame."""
    declared = state.externals
    for ext_id, line in externals:
        if ext_id in declared:
            continue
        if len(declared) >= limits.max_externals:
            raise RemoteProtocolError(
                f"the peer declared more than {limits.max_externals} cross-line parents in "
                "one session (cap max_externals); sync again to continue"
            )
        if len(line) > MAX_LINE_CHARS:
            raise RemoteProtocolError(
                f"the peer declared a cross-line parent in a line named with {len(line)} "
                f"characters (at most {MAX_LINE_CHARS}), starting {line[:16]!r}"
            )
        declared[ext_id] = line


def _check_size(raw: bytes, limits: SessionLimits) -> None:
    if len(raw) > limits.max_item_bytes:
        raise RemoteProtocolError(
            f"the peer sent an item of {len(raw)} bytes, over the cap of "
            f"{limits.max_item_bytes} (cap max_item_bytes)"
        )


REFUSALS_KEPT = 3  # reasons a report names; the rest are counted


def _parse(
    state: SetState, raw: bytes, stats: SessionStats, limits: SessionLimits
) -> ParsedItem | None:
    """The item parsed, or None when it is refused (counted, its reason kept)."""
    _check_size(raw, limits)
    try:
        return state.codec.parse(raw)
    except InvalidEntry as exc:
        reason = f"the peer sent an inadmissible {state.name} item: {exc}"
        digest = hashlib.sha256(raw).digest()
        if digest in stats.refused_digests:
            return None  # asked for again as a missing parent: refused once
        stats.refused_digests.add(digest)
        stats.refused += 1
        if stats.refused > limits.max_refused:
            # Keep the class (IdMismatch, EntryTooLarge...) so callers can tell cases apart.
            raise type(exc)(
                f"{reason} (more than {limits.max_refused} inadmissible items in one "
                "session, cap max_refused)"
            ) from exc
        if len(stats.refusals) < REFUSALS_KEPT:
            stats.refusals.append(reason)
        return None
