"""What sync and the node need from a line's notary storage, whatever holds it: the SQLite
file of the line (:class:`~lifeline_mesh.notary.storage.NotaryStore`) or a PostgreSQL
database (:class:`~lifeline_mesh.notary.pg_storage.PgNotaryStore`). One contract, tested
on both (tests/notary/test_notary_port.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from lifeline.entry import Entry
from lifeline.store.port import AppendResult, Store
from lifeline.store.summary import SetTotals
from lifeline_mesh.notary.provenance import SourceRow
from lifeline_mesh.notary.seals import Seal, SealMemory
from lifeline_mesh.notary.statement import Attestation
from lifeline_mesh.notary.states import StateOf

__all__ = ["Notary"]


class Notary(Protocol):
    """One line's attestations (or statements: :meth:`statements`) as a reconciled set,
    and the admission of received entries against them."""

    @property
    def store(self) -> Store:
        """The line's entry store."""
        ...

    @property
    def table(self) -> str:
        """Which set this object reconciles: ``attestations`` or ``statements``."""
        ...

    def statements(self) -> Notary:
        """The same line's second-wave statements (state, imported), as their own set."""
        ...

    async def keys(self) -> list[tuple[int, bytes]]:
        """``(sort key, id)`` of every item of the set, sorted."""
        ...

    async def totals(self) -> SetTotals:
        """Count and sum of the ids of every item of the set (kept by each write)."""
        ...

    async def fetch(self, ids: Sequence[bytes]) -> list[bytes]:
        """The items among ``ids`` that are stored, in the order asked."""
        ...

    async def prepare(self, items: Sequence[bytes | Attestation]) -> list[Attestation]:
        """The checks that need nothing stored (raises for the first bad item)."""
        ...

    async def prepare_each(
        self, items: Sequence[Attestation], vouched: Callable[[Attestation], bool] | None = None
    ) -> tuple[list[Attestation], list[str]]:
        """The same checks, each item alone: those that pass, and why each other one fails
        (the entry a refused author signature signs is then refused too, in the session).
        An item ``vouched`` says a checked seal lists keeps its own signature unchecked
        (decision 0149)."""
        ...

    def learn_seals(self, memory: SealMemory, seals: Sequence[Attestation]) -> None:
        """Received seals checked (signature, signer, clock) and kept in ``memory`` if they
        pass (decision 0149)."""
        ...

    def hold_seals(self, seals: Sequence[Seal]) -> None:
        """Seals that vouched for a received batch, stored in the transaction of the next
        :meth:`commit` or :meth:`commit_each`."""
        ...

    async def keep_seals(self, seals: Sequence[Seal]) -> None:
        """Store seals this node just made."""
        ...

    async def held_seals(self) -> list[tuple[Attestation, int, int]]:
        """Every seal held, with its span."""
        ...

    async def seals_covering(self, lo: int | None, hi: int | None) -> list[tuple[bytes, bytes]]:
        """``(id, item)`` of the seals held whose span meets the sort keys ``lo``…``hi``
        (None: no bound), in the order of their spans."""
        ...

    async def commit(self, atts: Sequence[Attestation]) -> int:
        """Checks against what is held, then store: one transaction, all or nothing."""
        ...

    async def commit_each(self, atts: Sequence[Attestation]) -> tuple[int, list[str]]:
        """:meth:`commit`, each item judged alone: the ones that fail are refused, the rest
        stored; how many were new, and why each refused one was (decision 0112)."""
        ...

    async def admit(self, items: Sequence[bytes | Attestation]) -> int:
        """:meth:`prepare` then :meth:`commit`; how many were new."""
        ...

    async def add(self, atts: Sequence[Attestation]) -> int:
        """Store attestations this node just signed."""
        ...

    async def items(self) -> list[bytes]: ...

    async def count(self) -> int: ...

    async def admit_entries(
        self, entries: Sequence[Entry], externals: Sequence[tuple[str, str]]
    ) -> AppendResult:
        """Received entries checked against the attestations held and stored, with their
        cross-line declarations, in one transaction; a copy whose ts its author did not
        sign is refused (not stored) and recorded with ``source``, the rest stored."""
        ...

    async def sources(self) -> list[SourceRow]:
        """Who sent which copy of an entry, and what became of it (provenance.py)."""
        ...

    async def enrollments_of(self, node_ids: Sequence[str]) -> dict[str, bytes]:
        """The ``enrolled`` statement held for each of ``node_ids`` that has one."""
        ...

    async def sign_state(
        self,
        node_id: str,
        line: str,
        make: Callable[[StateOf, Attestation | None], list[Attestation]],
    ) -> list[Attestation]:
        """In one write transaction: the line's state now and ``node_id``'s newest state
        statement about it, given to ``make``; what it returns is stored."""
        ...
