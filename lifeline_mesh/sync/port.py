"""The port a reconciled set implements so the session can sync it (DESIGN §5).

A set has a name, a pure :class:`~lifeline_mesh.recon.sets.ItemCodec`, and three async
operations: a sorted snapshot of its keys and tokens, fetching raw items by id, and admitting
received items in one atomic batch. Entries implement it today (``EntrySet``); the notary's
attestations plug in the same way, without touching the protocol core.

A set whose admission starts with checks that read nothing stored (signatures) may also be
:class:`Preparing`: the driver then runs ``prepare`` on a batch while the previous batch is
still being stored, and ``commit`` strictly after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from lifeline_mesh.recon.sets import ItemCodec, ParsedItem, SetSummary, Snapshot

__all__ = [
    "Accompanied",
    "AdmitResult",
    "Closing",
    "FetchResult",
    "HelloAware",
    "KeyRuns",
    "Prepared",
    "Preparing",
    "ReconSet",
    "RunKey",
    "RunKeys",
    "RunResult",
    "Running",
    "SetSnapshots",
    "Summarizing",
    "running",
]


@dataclass(frozen=True, slots=True)
class FetchResult:
    raws: list[bytes]
    externals: list[tuple[bytes, str]]  # cross-line parents of these items: (id, line)


RunKey = tuple[object, ...]  # a set's key columns, as its store orders them


@dataclass(frozen=True, slots=True)
class RunKeys:
    """One chunk of a set's keys read in key order (a ``KeyRuns``'): the ids, the last key
    read (None: the set is over), and the rows' raw items when its table holds them whole
    (the notary's), read in the same step instead of again by id."""

    ids: list[bytes]
    after: RunKey | None
    items: list[bytes] | None = None


@dataclass(frozen=True, slots=True)
class RunResult:
    """One chunk of a set read in key order (decision 0144): the raw items, the ids read
    (those a store no longer holds are left out of ``raws``), their cross-line parents,
    and the last key read (None: the set is over)."""

    raws: list[bytes]
    ids: list[bytes]
    externals: list[tuple[bytes, str]]
    after: RunKey | None


@dataclass(frozen=True, slots=True)
class AdmitResult:
    added: int
    updated: int = 0  # items already held whose version was lowered (earlier ts)
    refused: tuple[str, ...] = ()  # why each item refused alone was (decision 0111)


class ReconSet(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def codec(self) -> ItemCodec: ...

    async def snapshot(self) -> Snapshot: ...

    async def fetch(self, ids: Sequence[bytes]) -> FetchResult: ...

    async def admit(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AdmitResult: ...


class SetSnapshots(Protocol):
    """Where one set of one line gets its sorted snapshot: chosen with the line's backend
    when the line is opened (lifeline_mesh/node/lines.py), so a set never asks which
    store it runs on."""

    async def snapshot(self, extra_known: Iterable[bytes] = ()) -> Snapshot:
        """The set's snapshot; ``extra_known`` are ids held elsewhere (another line's)."""
        ...


@runtime_checkable
class KeyRuns(Protocol):
    """Where one set's ids are read in key order, a chunk at a time (a line file's: its
    key order's index), with no snapshot (decision 0144)."""

    async def run(self, after: RunKey | None, limit: int) -> RunKeys:
        """Up to ``limit`` items after the key ``after`` (None: from the first), parents
        first."""
        ...


class Prepared(Protocol):
    """A batch that passed the checks that need nothing stored; not stored yet."""

    async def commit(self) -> AdmitResult:
        """The checks against what is stored, then store the batch: all or nothing."""
        ...


@runtime_checkable
class Preparing(Protocol):
    """Optional capability of a ReconSet: ``admit`` split in two stages.

    ``prepare`` must not read or write the store (it may run while an earlier batch is
    being stored); ``(await prepare(b)).commit()`` must do what ``admit(b)`` does.
    """

    async def prepare(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> Prepared: ...


@runtime_checkable
class Summarizing(Protocol):
    """Optional capability of a ReconSet: the whole set's count and sum of tokens, kept by
    the store on every write, so an in-sync check needs no snapshot (None: not available
    now; the session then loads the snapshot)."""

    async def summary(self) -> SetSummary | None: ...


@runtime_checkable
class Accompanied(Protocol):
    """Optional capability of a ReconSet: items of another set that must travel ahead of
    some of its items (the author signatures of entries the store took after the session
    read its signatures, decision 0106). The driver sends them ahead of each batch it
    fetched; ``("", [])`` when there are none."""

    async def ahead_of(self, ids: Sequence[bytes]) -> tuple[str, list[bytes]]: ...


@runtime_checkable
class HelloAware(Protocol):
    """Optional capability of a ReconSet: told the capabilities of the peer's hello before
    it sends the peer a chunk of a run (seals go ahead to a peer that takes them, decision
    0149)."""

    def peer_capabilities(self, capabilities: Sequence[str], item_cap: int) -> None:
        """``item_cap``: the largest item a frame to the peer can carry."""
        ...


@runtime_checkable
class Running(Protocol):
    """Optional capability of a ReconSet: the whole set read in key order, a chunk at a
    time, with no snapshot, for a peer that holds none of it (decision 0144). ``runs()``
    says whether this set can now (its store may not)."""

    def runs(self) -> bool: ...

    async def fetch_run(self, after: RunKey | None, limit: int) -> RunResult: ...


def running(sets: Iterable[ReconSet]) -> frozenset[str]:
    """The names of the sets that can send themselves whole as a run (a session's
    ``runs``)."""
    return frozenset(s.name for s in sets if isinstance(s, Running) and s.runs())


@runtime_checkable
class Closing(Protocol):
    """Optional capability of a ReconSet: the items this side signs as a session that moved
    items ends (its state statements; none when it admitted no new entry), sent to the peer
    in the session's closing round (decisions 0059, 0126)."""

    async def closing_items(self, line: str) -> Sequence[bytes]: ...
