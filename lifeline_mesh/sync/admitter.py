"""Received batches stored in arrival order, the store overlapped with the next reads.

Split from the driver (``sync/driver.py``), which hands each ``Deliver`` of the session
here and settles what is in flight before it hands the turn over.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable

from lifeline.errors import LifelineError, Refused, RemoteProtocolError
from lifeline_mesh.recon.entry_codec import ENTRIES
from lifeline_mesh.recon.frames import REFUSED_CODE, Deliver, Effect
from lifeline_mesh.recon.incoming import REFUSALS_KEPT
from lifeline_mesh.recon.session import Session
from lifeline_mesh.recon.sets import ParsedItem
from lifeline_mesh.sync.memory import SESSIONS
from lifeline_mesh.sync.port import AdmitResult, Preparing, ReconSet
from lifeline_mesh.sync.report import SyncReport

__all__ = ["ADMIT_DEPTH", "TRIM_EVERY", "Admitter"]

ADMIT_DEPTH = 2  # received batches in flight: one being stored, the next being checked
TRIM_EVERY = 16  # received batches stored between two returns of free heap memory


class Admitter:
    """Stores received batches in arrival order, overlapping the store with the next reads.

    At most ``depth`` batches are in flight. Each batch is stored (one transaction) only
    after the one before it is, so parents are stored before children. A set that is
    :class:`Preparing` checks a batch (signatures) while the batch before it is stored;
    once a batch fails, no later batch is stored. Without ``overlap`` (no fast paths) each
    batch is admitted in one call before the driver goes on.
    """

    def __init__(self, report: SyncReport, depth: int = ADMIT_DEPTH, *, overlap: bool = True):
        self._report = report
        self._depth = depth
        self._overlap = overlap
        # each batch's store, and whether it holds entries (else signatures or statements)
        self._tasks: deque[tuple[asyncio.Task[AdmitResult | None], bool]] = deque()
        self._settled = 0
        self.progress: Callable[[SyncReport], None] | None = (
            None  # told of the report after each batch stored
        )

    @property
    def in_flight(self) -> bool:
        """Batches received and not yet stored."""
        return bool(self._tasks)

    async def submit(self, session: Session, target: ReconSet, eff: Deliver) -> list[Effect]:
        # A batch with nothing to check before it is stored would only wait for the one
        # ahead of it: it is taken when that one is stored, not held meanwhile. (Two
        # entry batches in flight: no faster at 1M and 16 MB more, decision 0148.)
        depth = self._depth if isinstance(target, Preparing) else 1
        while len(self._tasks) >= depth:
            failed = await self._settle_oldest(session)
            if failed:
                return failed
        items = [i for i in eff.items if isinstance(i, ParsedItem)]
        is_entries = target.name == ENTRIES
        if not self._overlap:
            self._tasks.append((asyncio.ensure_future(_admit(target, items, eff)), is_entries))
            return await self.drain(session)
        before = self._tasks[-1][0] if self._tasks else None
        task = asyncio.ensure_future(_admit_after(before, target, items, eff))
        self._tasks.append((task, is_entries))
        return []

    async def drain(self, session: Session) -> list[Effect]:
        while self._tasks:
            failed = await self._settle_oldest(session)
            if failed:
                return failed
        return []

    async def _settle_oldest(self, session: Session) -> list[Effect]:
        task, is_entries = self._tasks.popleft()
        try:
            result = await task
        except RemoteProtocolError as exc:
            return session.fail(exc, "item")
        except Refused as exc:
            return session.fail(exc, REFUSED_CODE)
        except LifelineError as exc:
            return session.fail(exc, "store")
        if result is not None:
            if is_entries:
                self._report.entries_added += result.added
            else:
                self._report.attestations_added += result.added
            self._report.ts_lowered += result.updated
            if result.refused:
                failed = self._refused(session, result.refused)
                if failed:
                    return failed
        self._settled += 1
        if self.progress is not None:
            self.progress(self._report)
        if self._settled % TRIM_EVERY == 0:
            SESSIONS.trim()  # freed batches, spread over several threads' heaps
        return []

    def _refused(self, session: Session, reasons: tuple[str, ...]) -> list[Effect]:
        """Items of a stored batch refused alone (decision 0111): counted with those the
        session refused; past ``max_refused`` in all, the session fails."""
        report = self._report
        report.refused += len(reasons)
        room = max(0, REFUSALS_KEPT - len(report.refusals))
        report.refusals += [f"the peer sent {r}" for r in reasons[:room]]
        cap = session.limits.max_refused
        if report.refused + session.stats.refused > cap:
            error = RemoteProtocolError(
                f"the peer sent {reasons[-1]} (more than {cap} inadmissible items in one "
                "session, cap max_refused)"
            )
            return session.fail(error, "item")
        return []

    async def cancel(self) -> None:
        """On failure: let batches already in flight finish (each is atomic; those after a
        failed one store nothing)."""
        while self._tasks:
            with contextlib.suppress(Exception):
                await self._tasks.popleft()[0]


async def _admit_after(
    before: asyncio.Task[AdmitResult | None] | None,
    target: ReconSet,
    items: list[ParsedItem],
    eff: Deliver,
) -> AdmitResult | None:
    """Admit one batch once the batch ``before`` it is stored; None if that one failed."""
    prepared = await target.prepare(items, eff.externals) if isinstance(target, Preparing) else None
    if before is not None:
        await asyncio.wait([before])
        if before.cancelled() or before.exception() is not None:
            return None  # the session fails on the earlier batch; store nothing after it
    if prepared is not None:
        return await prepared.commit()
    return await target.admit(items, eff.externals)


async def _admit(target: ReconSet, items: list[ParsedItem], eff: Deliver) -> AdmitResult | None:
    """Admit one batch in one call (no fast paths)."""
    return await target.admit(items, eff.externals)
