"""The asyncio driver: pumps one reconciliation session over a frame channel.

It performs the session's effects against the sets (load snapshot, fetch, admit) and the
channel (send), in order, and hands the session the next frame only when the effects are
done. Ahead of a fetched batch it sends what the set says must precede it (``Accompanied``:
the signatures of entries stored while the session ran, decision 0106). With its fast
paths (:mod:`lifeline_mesh.sync.fast`), bounded overlaps keep both peers busy: frames are
read ahead (two at most; a large batch of entries is parsed meanwhile in the helper
processes), and one received batch is stored while the next is parsed and, for a set that
checks signatures before storing, verified. Without them it is the plain loop, and stores
exactly the same. A slow store still slows the peer, through the transport's flow
control. Input from the peer never escapes as anything but our error tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence

from lifeline.errors import (
    LifelineError,
    LocalProtocolError,
    PeerError,
    ProtocolError,
    Refused,
)
from lifeline_mesh.recon.entry_codec import ENTRIES
from lifeline_mesh.recon.frames import (
    REFUSED_CODE,
    Deliver,
    Done,
    Effect,
    EndOfTurn,
    Failed,
    Fetch,
    FetchRun,
    Fin,
    Frame,
    Items,
    KeepAlive,
    LoadSnapshot,
    LoadSummary,
    SendFrame,
)
from lifeline_mesh.recon.incoming import REFUSALS_KEPT
from lifeline_mesh.recon.outbox import item_cap
from lifeline_mesh.recon.session import Session
from lifeline_mesh.recon.session_state import KEEP_ALIVE_CAPABILITY
from lifeline_mesh.recon.sets import ParsedItems
from lifeline_mesh.sync import closing
from lifeline_mesh.sync.admitter import ADMIT_DEPTH, Admitter
from lifeline_mesh.sync.driver_types import Channel
from lifeline_mesh.sync.entry_offload import preparse
from lifeline_mesh.sync.fast import FAST, FastPaths
from lifeline_mesh.sync.guards import refusing_items
from lifeline_mesh.sync.memory import SESSIONS
from lifeline_mesh.sync.port import (
    Accompanied,
    HelloAware,
    ReconSet,
    Running,
    Summarizing,
)
from lifeline_mesh.sync.readahead import ReadAhead
from lifeline_mesh.sync.report import SyncReport

__all__ = ["IDLE_TIMEOUT", "Channel", "Progress", "SyncReport", "drive"]

log = logging.getLogger(__name__)

IDLE_TIMEOUT = 60.0  # seconds without a frame from the peer before the session gives up
# While this side is busy (a snapshot, a fetch, received batches not yet stored) and has sent
# nothing for this long, it sends a KeepAlive to a peer that reads them, so a long build on a
# large line, or a backlog stored after a long transfer, is not taken for a dead peer.
KEEP_ALIVE_EVERY = 15.0
Progress = Callable[["SyncReport"], None]  # e.g. `lifeline-mesh sync`'s counter on a terminal
READ_AHEAD = 2  # frames received ahead of the session


async def drive(
    session: Session,
    channel: Channel,
    sets: Sequence[ReconSet],
    *,
    first: Frame | None = None,
    clock: Callable[[], float] = time.monotonic,
    idle_timeout: float | None = None,
    fast: FastPaths = FAST,
    progress: Progress | None = None,
) -> SyncReport:
    """Run ``session`` to the end; raise a ProtocolError/PeerError when it fails.
    ``progress`` is told of the report after each received batch is stored."""
    with fast.applied():
        return await _drive(session, channel, sets, first, clock, idle_timeout, fast, progress)


async def _drive(
    session: Session,
    channel: Channel,
    sets: Sequence[ReconSet],
    first: Frame | None,
    clock: Callable[[], float],
    idle_timeout: float | None,
    fast: FastPaths,
    progress: Progress | None = None,
) -> SyncReport:
    idle = IDLE_TIMEOUT if idle_timeout is None else idle_timeout
    started = clock()
    report = SyncReport(line=session.line, role=session.role.value)
    effects: deque[Effect] = deque(session.start(started))
    if first is not None:
        effects.extend(session.receive(first, clock()))
    by_name = {s.name: s for s in sets}
    admitter = Admitter(report, ADMIT_DEPTH if fast.pipelined else 1, overlap=fast.pipelined)
    admitter.progress = progress
    reader = ReadAhead(
        refusing_items(channel, lambda: session.set_names, sets),  # a reader's items
        depth=READ_AHEAD if fast.read_ahead else 0,
        prepare=(lambda f: _preparse(session, f)) if fast.helpers else None,
    )
    busy = KeepingAlive(session, channel, lambda: admitter.in_flight or reader.holding)
    clean = False
    SESSIONS.enter()
    try:
        while True:
            while effects:
                eff = effects.popleft()
                if isinstance(eff, Done):
                    effects.extend(await admitter.drain(session))
                    if effects:
                        continue
                    report.orphans_dropped = eff.orphans_dropped
                    closed = closing.Closed()
                    if closing.wanted(session, sets):
                        closed = await closing.closing_round(
                            session, sets, busy.send, reader.recv_after_end, idle,
                            _refusals_told(report, session),
                        )  # fmt: skip
                    clean = True
                    return _finish(report, session, channel, clock() - started, closed)
                if isinstance(eff, Failed):
                    raise eff.error
                if isinstance(eff, Deliver):
                    target = by_name[session.set_names[eff.set_index]]
                    async with busy:
                        effects.extend(await admitter.submit(session, target, eff))
                    continue
                if _ends_turn(eff):
                    # Finish storing what arrived before handing the turn over: a refusal
                    # must reach the peer while it still listens, not after it has ended.
                    async with busy:
                        failed = await admitter.drain(session)
                    if failed:
                        effects = deque(failed)
                        continue
                if isinstance(eff, SendFrame):
                    await busy.send(eff.frame)
                    continue
                async with busy:
                    effects.extend(await _perform(eff, session, by_name, clock))
            effects.extend(await _next_frame(session, reader, clock, idle))
            busy.watch()
    finally:
        await busy.close()
        await reader.close(clean=clean)
        await admitter.cancel()
        session.release_snapshots()
        SESSIONS.leave(built_snapshots=session.stats.snapshots_loaded > 0)


async def _preparse(session: Session, frame: Frame) -> Frame | ParsedItems:
    """A large batch of entries parsed in the helper processes, while the session works on
    the frames before it; anything unexpected leaves the frame to the session."""
    if not isinstance(frame, Items):
        return frame
    try:
        return await preparse(frame, session.codec_of(frame.set_index))
    except Exception:  # the session parses it and words any refusal
        log.debug("parsing a batch in the helper processes failed", exc_info=True)
        return frame


class KeepingAlive:
    """Keeps a waiting peer from taking this side for dead: while this side has work the
    peer waits on, a KeepAlive goes out whenever nothing was sent for ``KEEP_ALIVE_EVERY``
    seconds, if the peer's hello said it reads them. Work is a block under ``async with
    busy:`` (a snapshot, a fetch, a batch being stored) or ``pending()``: batches received
    and not yet stored, which after a long transfer on a loaded machine kept the receiver
    silent for over a minute while the sender waited for its turn (issue 21's initial sync
    of 1M). Every frame of the session goes through :meth:`send`, one at a time, so they
    never interleave; a send in progress is finished, never cancelled (that would cancel
    the whole call)."""

    def __init__(
        self, session: Session, channel: Channel, pending: Callable[[], bool] = lambda: False
    ) -> None:
        self._session = session
        self._channel = channel
        self._pending = pending
        self._lock = asyncio.Lock()
        self._last = time.monotonic()  # when this side last sent a frame
        self._busy = 0
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.sent = 0

    async def send(self, frame: Frame) -> None:
        async with self._lock:
            await self._channel.send(frame)
            self._last = time.monotonic()

    async def __aenter__(self) -> None:
        self._busy += 1
        self.watch()

    async def __aexit__(self, *exc: object) -> None:
        self._busy -= 1

    def watch(self) -> None:
        """Start sending keep-alives when due (once the peer's hello says it reads them)."""
        peer = self._session.peer_hello
        if self._task is None and peer is not None and KEEP_ALIVE_CAPABILITY in peer.capabilities:
            self._task = asyncio.create_task(self._tick())

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            self._stop.set()
            with contextlib.suppress(LifelineError):
                await task  # a failed send: the next frame's send or read reports it

    async def _tick(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), KEEP_ALIVE_EVERY / 4)
                return
            except TimeoutError:
                due = time.monotonic() - self._last >= KEEP_ALIVE_EVERY
                if due and (self._busy or self._pending()):
                    await self.send(KeepAlive())
                    self.sent += 1


def _ends_turn(eff: Effect) -> bool:
    return isinstance(eff, SendFrame) and isinstance(eff.frame, EndOfTurn | Fin)


async def _perform(
    eff: Effect,
    session: Session,
    sets: dict[str, ReconSet],
    clock: Callable[[], float],
) -> list[Effect]:
    names = session.set_names
    if isinstance(eff, LoadSummary):
        target = sets[names[eff.set_index]]
        summary = await target.summary() if isinstance(target, Summarizing) else None
        return session.summary_loaded(eff.set_index, summary, clock())
    if isinstance(eff, LoadSnapshot):
        snap = await sets[names[eff.set_index]].snapshot()
        return session.snapshot_loaded(eff.set_index, snap, clock())
    if isinstance(eff, Fetch):
        target = sets[names[eff.set_index]]
        got = await target.fetch(eff.ids)
        ahead = await _ahead(session, target, eff.ids, got.raws)
        if session.finished:
            return ahead  # they did not fit a frame: the session failed
        return ahead + session.fetched(eff.set_index, got.raws, got.externals, clock())
    if isinstance(eff, FetchRun):
        target = sets[names[eff.set_index]]
        if not isinstance(target, Running):
            error = LocalProtocolError(f"the {target.name} set is not read in runs")
            return session.fail(error, "internal")
        if isinstance(target, HelloAware) and session.peer_hello is not None:
            target.peer_capabilities(
                session.peer_hello.capabilities, item_cap(session.peer_frame_cap)
            )
        run = await target.fetch_run(eff.after, eff.limit)
        ahead = await _ahead(session, target, run.ids, run.raws)
        if session.finished:
            return ahead
        return ahead + session.fetched_run(
            eff.set_index, run.raws, run.externals, run.after, clock()
        )
    return []


async def _ahead(
    session: Session, target: ReconSet, ids: Sequence[bytes], raws: Sequence[bytes]
) -> list[Effect]:
    """The items of another set that go ahead of ``raws`` (decision 0106), if any."""
    if not raws or not isinstance(target, Accompanied):
        return []
    return session.send_ahead(*await target.ahead_of(ids))


async def _next_frame(
    session: Session, channel: ReadAhead, clock: Callable[[], float], idle_timeout: float
) -> list[Effect]:
    # A silent peer is given up at the idle timeout, or at the session's deadline if that
    # comes first (session_timeout counts from the start, however the peer paces frames).
    until_deadline = session.deadline - clock()
    try:
        async with asyncio.timeout(max(0.0, min(idle_timeout, until_deadline))):
            frame = await channel.recv()
    except TimeoutError:
        if until_deadline <= idle_timeout:
            return session.tick(max(clock(), session.deadline) + 1e-3)  # past the deadline
        return session.fail(
            PeerError(f"the peer sent nothing for {idle_timeout:.0f}s; it may be overloaded"),
            "timeout",
        )
    except ProtocolError as exc:
        return session.fail(exc, "protocol")
    except Refused as exc:  # a frame the caller may not send (a reader's items)
        return session.fail(exc, REFUSED_CODE)
    if frame is None:
        raise PeerError("the peer closed the stream in the middle of the session; sync again")
    return session.receive(frame, clock())


def _all_refused(report: SyncReport, session: Session) -> tuple[int, list[str]]:
    """What this side refused of the items the peer sent: while parsing (the session's
    count) and while storing (the admitter's), and the first reasons of both."""
    reasons = (list(session.stats.refusals) + report.refusals)[:REFUSALS_KEPT]
    return report.refused + session.stats.refused, reasons


def _refusals_told(report: SyncReport, session: Session) -> EndOfTurn:
    """The end of this side's closing turn: what it refused of the items the peer sent."""
    refused, reasons = _all_refused(report, session)
    return EndOfTurn(refused, tuple(r.removeprefix("the peer sent ") for r in reasons))


def _finish(
    report: SyncReport, session: Session, channel: Channel, seconds: float, closed: closing.Closed
) -> SyncReport:
    stats = session.stats
    report.entries_sent = stats.sent_by_set.get(ENTRIES, 0)
    report.entries_received = stats.received_by_set.get(ENTRIES, 0)
    # signatures and statements, those of the closing round included
    report.signatures_sent = stats.items_sent - report.entries_sent + closed.sent
    report.signatures_received = stats.items_received - report.entries_received + closed.received
    report.attestations_added += closed.added
    report.round_trips = session.stats.rounds
    report.snapshots = stats.snapshots_loaded
    report.refused, report.refusals = _all_refused(report, session)
    report.refused_there = closed.told.refused
    report.refusals_there = list(closed.told.refusals)
    report.bytes_sent = channel.bytes_sent
    report.bytes_received = channel.bytes_received
    report.seconds = round(seconds, 4)
    return report
