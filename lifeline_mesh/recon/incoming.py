"""Items a peer sent, taken in by a session: counted against the caps, each checked for
size and parsed (or taken already parsed by the helper processes), then held until their
parents are known and delivered, parents first. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Sequence

from lifeline.errors import InvalidEntry, RemoteProtocolError
from lifeline_mesh.recon.frames import Deliver, Effect, Items
from lifeline_mesh.recon.session_state import SessionLimits, SessionStats, SetState
from lifeline_mesh.recon.sets import ParsedItem

__all__ = ["take_items"]


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
    if parsed is None or len(parsed) != len(items.items):
        ready_items = [_parse(state, raw, limits) for raw in items.items]
    else:
        for raw in items.items:
            _check_size(raw, limits)
        ready_items = list(parsed)
    state.externals.update(items.externals)
    ready = state.pool.admit(ready_items, state.known, state.received.add)
    if not ready:
        return []
    deps = {d for item in ready for d in item.deps}
    declared = tuple(sorted((d, state.externals[d]) for d in deps if d in state.externals))
    return [Deliver(items.set_index, tuple(ready), declared)]


def _check_size(raw: bytes, limits: SessionLimits) -> None:
    if len(raw) > limits.max_item_bytes:
        raise RemoteProtocolError(
            f"the peer sent an item of {len(raw)} bytes, over the cap of "
            f"{limits.max_item_bytes} (cap max_item_bytes)"
        )


def _parse(state: SetState, raw: bytes, limits: SessionLimits) -> ParsedItem:
    _check_size(raw, limits)
    try:
        return state.codec.parse(raw)
    except InvalidEntry as exc:
        # Keep the class (IdMismatch, EntryTooLarge...) so callers can tell cases apart.
        raise type(exc)(f"the peer sent an inadmissible {state.name} item: {exc}") from exc
