"""The closing round: the state statements a session's admissions made, exchanged in it,
and what each side refused of the other's items.

Each side that admitted new entries signs one state statement as the session ends (DESIGN
§6). Sent only on the next session, those statements made the sync after a real sync cost
a second round trip and ~640 B instead of a one-round no-op, and each pair of sessions
signed again. When both hellos say ``closing`` and the session moved entries either way
(both sides count the same items, so both know), each side, once its
admissions are stored, signs (nothing if it admitted nothing new, or its state is the one it
signed last), sends the statements as ``Items`` of the ``statements`` set and an
``EndOfTurn``, and then reads the peer's the same way and stores them: both sides end with
the same statements, and the next session's summaries match in its first round. Both
sides send before they read, so the round costs one crossing, not a round trip. With an
older peer nothing changes: the next session carries the statements. A failure here never
fails the session (its entries are stored): the statements then travel next time.

Each side's ``EndOfTurn`` in this round also says how many of the items the peer sent it
refused alone, and why the first few were (decision 0112): the node that sent a damaged
row or an entry dated before its parent hears of it (an older peer sends nothing there).
When both hellos say :data:`CLOSING_ANY_CAPABILITY` (which implies ``closing``: a responder
names it alone to an initiator that offered it), the round follows a session that moved
items of any set, not only entries (decision 0126): a member whose lone author signature
was refused hears of it too. Such a round signs nothing (no entry was admitted), so it
costs the two ``EndOfTurn`` frames and one crossing, and the next session is still the
no-op; a session that moved nothing has none. With a peer whose hello lacks it, both sides
keep the first rule (each decides from both hellos, so both decide alike).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass

from lifeline.errors import LifelineError, RemoteProtocolError
from lifeline_mesh.recon.entry_codec import ENTRIES
from lifeline_mesh.recon.frames import EndOfTurn, Frame, Items, KeepAlive
from lifeline_mesh.recon.session import Session
from lifeline_mesh.recon.session_state import CLOSING_ANY_CAPABILITY, closing_offered
from lifeline_mesh.recon.sets import ParsedItems
from lifeline_mesh.sync.port import Closing, ReconSet

__all__ = ["MAX_CLOSING_ITEMS", "Closed", "closing_round", "wanted"]

log = logging.getLogger(__name__)

# notary/attestation_set.py's STATEMENTS (not imported: the notary sits above sync/ and
# plugs its sets into this driver)
STATEMENTS = "statements"

MAX_CLOSING_ITEMS = 256  # statements a peer may send in its closing round
BATCH = 64  # statements per Items frame at most
NOTHING_REFUSED = EndOfTurn()  # a closing turn's end that refused nothing the peer sent


@dataclass(frozen=True, slots=True)
class Closed:
    """What a closing round moved: statements sent, received, and newly stored here; and
    what the peer said it refused of the items this side sent (its ``EndOfTurn``)."""

    sent: int = 0
    received: int = 0
    added: int = 0
    told: EndOfTurn = NOTHING_REFUSED


def wanted(session: Session, sets: Sequence[ReconSet]) -> bool:
    """Whether this session ends with a closing round (both sides compute the same: both
    reconcile the statements set, both offered the round, and entries moved; or, when both
    offered :data:`CLOSING_ANY_CAPABILITY`, items of any set moved)."""
    peer = session.peer_hello
    if not session.limits.closing_round or peer is None:
        return False
    if not closing_offered(peer) or STATEMENTS not in peer.sets:
        return False
    if not any(s.name == STATEMENTS for s in sets):
        return False
    stats = session.stats
    moved = {name for name, n in (*stats.sent_by_set.items(), *stats.received_by_set.items()) if n}
    if session.limits.closing_any and CLOSING_ANY_CAPABILITY in peer.capabilities:
        return bool(moved)
    return ENTRIES in moved


async def closing_round(
    session: Session,
    sets: Sequence[ReconSet],
    send: Callable[[Frame], Awaitable[None]],
    recv: Callable[[], Awaitable[Frame | ParsedItems | None]],
    timeout: float,
    tell: EndOfTurn = NOTHING_REFUSED,
) -> Closed:
    """Send what this side signs, store what the peer signed. ``tell``: the end of this
    side's turn, saying what it refused of the items the peer sent (decision 0112)."""
    index = session.set_names.index(STATEMENTS)
    target = next(s for s in sets if s.name == STATEMENTS)
    own = next((s for s in sets if isinstance(s, Closing)), None)
    try:
        raws = list(await own.closing_items(session.line)) if own is not None else []
        peer_cap = session.peer_hello.max_frame_bytes if session.peer_hello else 0
        budget = min(session.limits.max_frame_bytes, peer_cap or session.limits.max_frame_bytes)
        for batch in _batches(raws, budget // 2):
            await send(Items(index, batch))
        await send(tell)
        async with asyncio.timeout(timeout):
            received, told = await _read(recv)
        if not received:
            return Closed(len(raws), told=told)
        parsed = [target.codec.parse(raw) for raw in received]
        added = (await target.admit(parsed, ())).added
        return Closed(len(raws), len(received), added, told)
    except (LifelineError, TimeoutError) as exc:
        log.warning("line %s: closing round given up (%s); the next session sends its "
                    "statements", session.line, str(exc) or "the peer sent nothing")  # fmt: skip
        return Closed()


def _batches(raws: Sequence[bytes], budget: int) -> Iterator[tuple[bytes, ...]]:
    """``raws`` in frames of at most ``BATCH`` items and ``budget`` bytes (one item over it
    goes alone: a state statement's part is under the item cap, far under a frame)."""
    batch: list[bytes] = []
    size = 0
    for raw in raws:
        if batch and (len(batch) == BATCH or size + len(raw) > budget):
            yield tuple(batch)
            batch, size = [], 0
        batch.append(raw)
        size += len(raw)
    if batch:
        yield tuple(batch)


async def _read(
    recv: Callable[[], Awaitable[Frame | ParsedItems | None]],
) -> tuple[list[bytes], EndOfTurn]:
    """The peer's closing statements: ``Items`` frames up to its ``EndOfTurn``, and that."""
    received: list[bytes] = []
    while True:
        frame = await recv()
        if isinstance(frame, ParsedItems):
            frame = frame.frame
        if isinstance(frame, EndOfTurn):
            return received, frame
        if isinstance(frame, KeepAlive):
            continue
        if not isinstance(frame, Items):
            raise RemoteProtocolError(f"expected the peer's closing statements, got {frame!r:.60}")
        received.extend(frame.items)
        if len(received) > MAX_CLOSING_ITEMS:
            raise RemoteProtocolError(f"the peer's closing round is over {MAX_CLOSING_ITEMS} items")
