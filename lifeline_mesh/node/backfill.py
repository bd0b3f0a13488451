"""Deepening shallow lines in the background under `serve` (decision 0082).

A new laptop takes a line shallow (`sync --shallow PEER`, decision 0063) to start work at
once; the line then names parents it does not hold. While `serve` runs, :func:`deepen`
fills each shared shallow line from the address its snapshot came from (recorded with the
snapshot, ``lifeline.store.shallow``): one full session per line, which reconciles by
ranges and streams what is missing parents first, its batches committed together as
`sync`'s own pull commits them (decision 0107) — so an interrupted deepening (a stopped
`serve`, a lost peer) keeps every group it committed and the next session resumes
there. A failed session is tried again after a growing pause; a line whose boundary is
empty is complete and left alone. The line stays readable all along (`context`, `recall`,
MCP read what it holds; SQLite's WAL lets them read while groups land).

Static and discovered peers are synced by the scheduler as before; this task only makes
sure the source of a snapshot is dialed even when it is not one of them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from lifeline.errors import LifelineError
from lifeline.store.port import Store
from lifeline.store.shallow_status import shallow_origin
from lifeline.wording import count
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.sync.driver import SyncReport

__all__ = ["BACKOFF_S", "Deepens", "deepen", "shallow_lines"]

log = logging.getLogger(__name__)

# Pauses between failed deepening sessions of a line (the last repeats).
BACKOFF_S: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


class Deepens(Protocol):
    """What deepening asks of a node (:class:`~lifeline_mesh.node.root.Node`): its shared
    lines, a line's store, and a full session with a peer."""

    def config(self) -> NodeConfig: ...

    def open_line(self, line: str) -> AbstractAsyncContextManager[Store]: ...

    async def sync(
        self, peer: str, lines: Sequence[str], *, bulk: bool = False
    ) -> list[SyncReport]: ...


async def shallow_lines(node: Deepens) -> dict[str, str]:
    """Each shared line that is shallow and knows where it came from -> that address."""
    out: dict[str, str] = {}
    for line in node.config().shared_lines:
        async with node.open_line(line) as store:
            size, peer = await shallow_origin(store)
        if size and peer is None:
            log.warning(
                "line %s is shallow (%d absent parents) and does not record where it came "
                "from: `lifeline-mesh sync PEER` deepens it",
                line,
                size,
            )
        elif size and peer is not None:
            out[line] = peer
    return out


async def _deepen_line(node: Deepens, line: str, peer: str) -> None:
    """One full session of ``line`` with ``peer``, and what it left."""
    started = time.perf_counter()
    reports = await node.sync(peer, [line], bulk=True)  # grouped commits, as `sync`'s
    async with node.open_line(line) as store:
        left, _peer = await shallow_origin(store)
        held = await store.count()
    added = sum(r.entries_added for r in reports)
    took = time.perf_counter() - started
    if left:
        log.warning(
            "line %s: deepened from %s (%s added in %.1f s), but %s still "
            "absent: %s lacks %s too; sync with a node that holds the whole line",
            line, peer, count(added, "entry", "entries"), took,
            f"{count(left, 'parent')} {'is' if left == 1 else 'are'}", peer,
            "it" if left == 1 else "them",
        )  # fmt: skip
    else:
        log.info(
            "line %s: deepened from %s: the whole history is here (%s, %d added in %.1f s)",
            line, peer, count(held, "entry", "entries"), added, took,
        )  # fmt: skip


async def deepen(node: Deepens, *, backoff: Sequence[float] = BACKOFF_S) -> None:
    """Deepen every shared shallow line of ``node`` from where it came from, until each is
    complete (or its source has nothing more); runs until then or until cancelled."""
    try:
        pending = await shallow_lines(node)
    except Exception as exc:  # a line that cannot be opened now: its sessions will say so
        log.warning("could not look for shallow lines to deepen: %s", exc)
        return
    for line, peer in sorted(pending.items()):
        log.info("line %s is shallow: deepening it from %s in the background", line, peer)
    failures = 0
    while pending:
        for line, peer in sorted(pending.items()):
            try:
                await _deepen_line(node, line, peer)
                del pending[line]
            except Exception as exc:  # serving goes on; the next attempt resumes
                pause = backoff[min(failures, len(backoff) - 1)]
                # the first failure is a warning, the repeats quieter (one line, then info)
                say = log.warning if failures == 0 else log.info
                say(
                    "line %s: deepening from %s stopped (%s); what arrived is kept, trying "
                    "again in %.0f s",
                    line, peer, exc if isinstance(exc, LifelineError) else repr(exc), pause,
                )  # fmt: skip
        if pending:
            await asyncio.sleep(backoff[min(failures, len(backoff) - 1)])
            failures += 1
