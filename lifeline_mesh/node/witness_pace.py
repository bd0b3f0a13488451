"""How often a node witnesses what reaches it over the Watch calls (decision 0091).

A node signs a state statement after it admits new entries from a peer (DESIGN §6). Over
the Watch calls a mesh writing once a second admits a write a second on every node, so each
node signed a statement a second and every node's statements travelled to every other: on a
LAN of 20 nodes a line held 13–18 statements per entry, and each write cost every node the
statements of all the others — bytes and signature checks that grow with N. Rows taken over
a Watch call are therefore witnessed at most once per :data:`WITNESS_EVERY_S` per line: the
first at once, the next when the interval has passed (one deferred statement covers every
state in between: a statement over the tips witnesses every ancestor). A session — `sync`,
a scheduled sync, a catch-up — signs at its end, in its closing round (but see below).

Witnessing is then up to :data:`WITNESS_EVERY_S` later than it was: far inside what the
notary's rules measure with (a backdate is judged over a day, a clock over five minutes:
``notary/rules.py``).

Even so, every node of a LAN signing once per interval makes the statements a mesh
produces grow with N, and each travels to every node. On a LAN of more than
:data:`WITNESSES` nodes, a node therefore witnesses an interval's rows with the chance
``WITNESSES / N`` (drawn afresh each interval, N the nodes it hears on the LAN): about
:data:`WITNESSES` statements per interval in the whole mesh, from nodes no one chooses
(decision 0095). On such a LAN the sessions `serve` runs or answers are paced and sampled
the same way (decision 0098): there a session's entries are also held, and witnessed, by
the nodes that took them over their Watch calls, and a statement per session was most of
the statements the mesh made. With fewer nodes (and for `sync` from the command line, which
hears no LAN) a session still signs at its end, in its closing round.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

__all__ = ["WITNESSES", "WITNESS_EVERY_S", "Deferred", "WitnessPace", "witness_share"]

WITNESS_EVERY_S = 30.0
WITNESSES = 8  # about this many nodes of a LAN witness each interval (decision 0095)


def witness_share(nodes: int) -> float:
    """The chance that one of ``nodes`` (itself included) witnesses an interval's rows."""
    return min(1.0, WITNESSES / max(1, nodes))


class WitnessPace:
    """Per line, when this node last witnessed rows taken over a Watch call, and whether a
    deferred statement is due."""

    def __init__(
        self,
        every_s: float = WITNESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        *,
        share: Callable[[], float] = lambda: 1.0,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.every_s, self._clock = every_s, clock
        self.share, self.rand = share, rand  # the chance per interval, and its draw
        self._last: dict[str, float] = {}
        self._deferred: set[str] = set()
        self._passed: set[str] = set()  # lines this node does not witness this interval
        self.counts = {"signed": 0, "deferred": 0, "passed": 0}

    def now_or_later(self, line: str) -> float | None:
        """0: witness ``line`` now (and it is recorded as done); None: not this interval
        (another node's turn); else the seconds until a deferred statement is due, and
        the caller schedules one unless one is (:meth:`defer` tells)."""
        now = self._clock()
        last = self._last.get(line)
        if last is None or now - last >= self.every_s:
            self._last[line] = now
            if self.rand() >= self.share():
                self._passed.add(line)
                self.counts["passed"] += 1
                return None
            self._passed.discard(line)
            self.counts["signed"] += 1
            return 0.0
        if line in self._passed:
            return None
        return last + self.every_s - now

    def sampling(self) -> bool:
        """Whether this node hears a LAN large enough that its intervals are drawn (its
        sessions' statements are then paced and sampled too, decision 0098)."""
        return self.share() < 1.0

    def defer(self, line: str) -> bool:
        """Whether a deferred statement for ``line`` must be scheduled (not one already)."""
        if line in self._deferred:
            return False
        self._deferred.add(line)
        self.counts["deferred"] += 1
        return True

    def due(self, line: str) -> None:
        """The deferred statement of ``line`` is being signed now."""
        self._deferred.discard(line)
        self._last[line] = self._clock()


class Deferred:
    """Statements signed a while from now (:class:`WitnessPace`'s deferred ones): ``sign(line)``
    run after ``seconds``, each task kept until it ends (an event loop keeps only weak
    references to its tasks)."""

    def __init__(self, sign: Callable[[str], Awaitable[None]]) -> None:
        self._sign = sign
        self._tasks: set[asyncio.Task[None]] = set()

    def later(self, line: str, seconds: float) -> None:
        async def run() -> None:
            await asyncio.sleep(seconds)
            await self._sign(line)

        task = asyncio.get_running_loop().create_task(run(), name=f"witness {line}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
