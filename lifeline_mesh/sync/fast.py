"""The fast paths of a sync session, behind one switch.

Three overlaps make an initial sync of a large line fast (decisions 0009–0014), and a
fourth way of writing, for the `sync` command's own pulls; none changes what a session
stores or sends:

* ``helpers``: large received batches are checked in helper processes
  (:mod:`lifeline_mesh.helpers.pool`): entries parsed ahead of the session
  (:mod:`lifeline_mesh.sync.entry_offload`), signatures verified by the notary
  (:mod:`lifeline_mesh.notary.verifier`);
* ``read_ahead``: the next frames are received while the session works on this one
  (:mod:`lifeline_mesh.sync.readahead`);
* ``pipelined``: one received batch is stored while the next is checked (the driver's
  admitter and the :class:`~lifeline_mesh.sync.port.Preparing` capability of a set);
* ``grouped``: the received batches committed to a line file ten or more at a time
  (:mod:`lifeline.store.sqlite_group`, decision 0107). Off in ``serve``, whose sessions
  and local writes share a line; on in `sync`, which alone writes its lines.

With all three off (:data:`PLAIN`), :func:`~lifeline_mesh.sync.driver.drive` is the plain
loop: receive a frame, hand it to the session, perform its effects one after the other.
The composition root builds one :class:`FastPaths` (``serve``/``sync --no-fast-paths``,
or ``LIFELINE_FAST_PATHS=off``) and hands it to every session; docs/architecture.md,
"Fast paths", lists where each lives.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from lifeline.errors import ConfigError
from lifeline_mesh.helpers import pool

__all__ = ["ENV", "FAST", "PLAIN", "FastPaths"]

ENV = "LIFELINE_FAST_PATHS"  # "off" (or 0, no, false) turns every fast path off
_OFF_WORDS = {"off", "0", "no", "false"}
_ON_WORDS = {"", "on", "1", "yes", "true"}


@dataclass(frozen=True, slots=True)
class FastPaths:
    """Which overlaps a session uses; each one's slow path stores exactly the same."""

    helpers: bool = True  # large batches parsed and verified in helper processes
    read_ahead: bool = True  # up to two frames received ahead of the session
    pipelined: bool = True  # a batch stored while the next one is checked
    # a pull's writes committed together (lifeline/store/sqlite_group.py): `sync` only
    grouped: bool = False

    @property
    def any(self) -> bool:
        return self.helpers or self.read_ahead or self.pipelined or self.grouped

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> FastPaths:
        """All on, unless ``LIFELINE_FAST_PATHS`` says off."""
        word = (os.environ if environ is None else environ).get(ENV, "").strip().lower()
        if word in _OFF_WORDS:
            return PLAIN
        if word in _ON_WORDS:
            return FAST
        raise ConfigError(f"{ENV}={word!r} is not understood; set it to 'on' or 'off'")

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Within this block (one session's task and the tasks it starts), the notary
        verifies signatures in helper processes only if ``helpers`` is on."""
        with pool.allowed(self.helpers):
            yield


FAST = FastPaths()
PLAIN = FastPaths(helpers=False, read_ahead=False, pipelined=False)
