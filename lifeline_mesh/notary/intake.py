"""The checks of a received batch of attestations that need nothing stored: shape,
signature, signer, not future-dated, and the set it belongs to. Shared by every notary
storage (SQLite, lifeline_mesh/notary/storage.py; PostgreSQL, pg_storage.py), with
``NotarySet``, the settings both are made with."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, NamedTuple, Self, TypeVar

from lifeline.errors import BadSignature, EntryTooLarge, InvalidEntry
from lifeline.ledger import utc_now
from lifeline.wording import count
from lifeline_mesh.notary.admission import (
    MAX_ADMIT_ITEMS,
    StoredContext,
    UnknownSigner,
    check_items,
    check_timing,
    timing_faults,
)
from lifeline_mesh.notary.claims import Claims
from lifeline_mesh.notary.enrollment import learn_held
from lifeline_mesh.notary.rules import DEFAULT_BACKDATE_WINDOW_S, DEFAULT_SKEW_S
from lifeline_mesh.notary.seals import Seal, SealMemory
from lifeline_mesh.notary.signers import KnownSigners
from lifeline_mesh.notary.statement import IN_ATTESTATIONS, Attestation, Role
from lifeline_mesh.notary.verifier import first_bad_signature

__all__ = [
    "ATTESTATIONS_TABLE",
    "SEALS_TABLE",
    "STATEMENTS_TABLE",
    "NotarySet",
    "Refusal",
    "Vouched",
    "held_rules",
    "table_of",
    "verify_batch",
    "verify_each",
]

ATTESTATIONS_TABLE = "attestations"  # first-wave kinds (author, witness, summary), enrolled
log = logging.getLogger(__name__)

STATEMENTS_TABLE = "statements"  # second-wave kinds: state, imported
SEALS_TABLE = "seals"  # seals (decision 0149): kept beside the sets, never reconciled


StoreT = TypeVar("StoreT")
# Whether a seal this session checked lists a received item (notary/seals.py)
Vouched = Callable[[Attestation], bool]


class Refusal(NamedTuple):
    """A received attestation refused alone (decision 0111): why, and the entry it signs as
    its author's signature, if it is one (that entry is then refused too, in the session)."""

    reason: str
    signs: str | None


class NotarySet(Generic[StoreT]):
    """What both notary storages are made with: the line's store, which of its two sets
    (``table``), the signers known and the admission clock and windows."""

    def __init__(
        self,
        store: StoreT,
        *,
        signers: KnownSigners | None = None,
        clock: Callable[[], str] = utc_now,
        skew_s: float = DEFAULT_SKEW_S,
        backdate_window_s: float = DEFAULT_BACKDATE_WINDOW_S,
        table: str = ATTESTATIONS_TABLE,
        source: str | None = None,
        claims: Claims | None = None,
    ) -> None:
        self.store = store
        # the claims read back at admission, verified once (the node's line opener's)
        self.claims = claims if claims is not None else Claims()
        # The node the session's items come from (its certificate's node id), or the
        # address of a peer without TLS: named with what it sent (notary/provenance.py).
        self.source = source
        self.table = table  # which of the two sets this object reconciles
        self.signers = signers
        self._clock = clock
        self.skew_s = skew_s
        self.backdate_window_s = backdate_window_s
        # The entries whose author signature this object refused, with why (decision 0111):
        # a copy of one arriving later in the session is refused too, not stored unsigned.
        self.refused_signatures: dict[str, str] = {}
        self._seals_held: list[Seal] = []  # seals stored with the next commit (hold_seals)

    async def held_enrollments(self) -> list[Attestation]:
        """Every well-formed ``enrolled`` statement the line holds (each storage reads its own)."""
        raise NotImplementedError

    async def prepare(self, items: Sequence[bytes | Attestation]) -> list[Attestation]:
        """The checks that need nothing stored: shape, signature, signer, not future-dated.

        No store access, so a sync verifies one batch while the previous one is written.
        Raises for the first bad item in batch order. The result is for ``commit``.
        """
        return await verify_batch(items, **self._checks())

    async def prepare_each(
        self, items: Sequence[Attestation], vouched: Vouched | None = None
    ) -> tuple[list[Attestation], list[str]]:
        """:meth:`prepare`, each item alone: those that pass, and why each other one is
        refused (a session stores the rest, decision 0111). The entry a refused author
        signature signs is remembered: a copy of it arriving later in the session is refused
        too, rather than stored as an unsigned copy. An item ``vouched`` says a checked seal
        lists is not checked for its own signature (decision 0149)."""
        kept, refused = await verify_each(items, {**self._checks(), "vouched": vouched})
        return kept, self._refused(refused)

    async def admit(self, items: Sequence[bytes | Attestation]) -> int:
        """Verify every received item and store them all in one transaction.

        Raises BadSignature / InvalidEntry (naming the item) and stores nothing when any
        item fails. Returns how many were new.
        """
        return await self.commit(await self.prepare(items))

    async def commit(self, atts: Sequence[Attestation]) -> int:
        """Store attestations that passed :meth:`prepare`, after the checks against what is
        held (timing, summaries), in one transaction; stores nothing if one fails."""
        added, _ = await self._commit(atts, each=False)
        return added

    async def commit_each(self, atts: Sequence[Attestation]) -> tuple[int, list[str]]:
        """:meth:`commit`, each item judged alone against what is held: one that fails a
        rule (a backdate, a time a witness contradicts, a rolled-back state) is refused and
        the rest stored (decision 0112). How many were new, and why each other one was
        refused; the entry a refused author signature signs is remembered, as by
        :meth:`prepare_each`."""
        added, refused = await self._commit(atts, each=True)
        return added, self._refused(refused)

    async def _commit(
        self, atts: Sequence[Attestation], *, each: bool
    ) -> tuple[int, list[Refusal]]:
        """The storage's transaction: the rules against what is held, then the insert.
        With ``each``, the items that fail are left out and returned; else the first
        failure raises and nothing is stored."""
        raise NotImplementedError

    def _refused(self, refused: Sequence[Refusal]) -> list[str]:
        for refusal in refused:
            if refusal.signs is not None:
                self.refused_signatures.setdefault(refusal.signs, refusal.reason)
        return [r.reason for r in refused]

    def hold_seals(self, seals: Sequence[Seal]) -> None:
        """Seals that vouched for a received batch: each storage stores them in the
        transaction of its next commit (decision 0149)."""
        self._seals_held = [*self._seals_held, *seals]

    def _take_held_seals(self) -> list[Seal]:
        held, self._seals_held = self._seals_held, []
        return held

    def learn_seals(self, memory: SealMemory, seals: Sequence[Attestation]) -> None:
        """Seals received in a session, checked as any statement is (its signature, a known
        signer, not dated ahead of this node's clock) and kept in ``memory`` if they pass
        (decision 0149)."""
        memory.learn(seals, self._clock(), self.signers, self.skew_s)

    def _checks(self) -> dict[str, Any]:
        return {
            "now": self._clock(),
            "signers": self.signers,
            "skew_s": self.skew_s,
            "table": self.table,
            "held": self.held_enrollments,
            "source": self.source,
        }

    def statements(self) -> Self:
        """The same line's second-wave statements (state, imported), as their own set."""
        return type(self)(
            self.store,
            signers=self.signers,
            clock=self._clock,
            skew_s=self.skew_s,
            backdate_window_s=self.backdate_window_s,
            table=STATEMENTS_TABLE,
            source=self.source,
            claims=self.claims,
        )


def table_of(role: Role) -> str:
    """The table (and reconciled set) that holds statements of ``role``. A seal is in
    neither set: it travels ahead of the signatures it vouches for (decision 0149), and
    one sent as a member of a set is refused there."""
    if role is Role.SEALED:
        return SEALS_TABLE
    return ATTESTATIONS_TABLE if role in IN_ATTESTATIONS else STATEMENTS_TABLE


async def verify_batch(
    items: Sequence[bytes | Attestation],
    *,
    now: str,
    signers: KnownSigners | None,
    skew_s: float,
    table: str,
    held: Callable[[], Awaitable[list[Attestation]]],
    source: str | None = None,
    vouched: Vouched | None = None,
) -> list[Attestation]:
    """The batch decoded and checked; raises for the first bad item in batch order.

    An item ``vouched`` says a seal lists (decision 0149) is not checked for its own
    signature: the seal's, checked, covers its exact bytes. Every other rule applies.

    ``held`` reads the ``enrolled`` statements the line holds: a runner proven by one of
    them is known (decision 0024). An item dated after ``now`` plus ``skew_s`` is left
    out, not refused with the batch: its signer's clock is ahead, and it is taken by a
    later session, once within the tolerance (decision 0084; its entry is held back too,
    recorded with ``source``, the node that sent it)."""
    if len(items) > MAX_ADMIT_ITEMS:
        raise EntryTooLarge(
            f"{len(items)} attestations in one batch, over the cap of {MAX_ADMIT_ITEMS}; "
            "send smaller batches"
        )
    raws = [i.item if isinstance(i, Attestation) else i for i in items]
    # The signatures are checked in a worker process (large batches) while this one
    # decodes and stores; the other rules here.
    if vouched is None:
        bad = await first_bad_signature(raws)
    else:
        alone = [n for n, i in enumerate(items) if not (isinstance(i, Attestation) and vouched(i))]
        first = await first_bad_signature([raws[n] for n in alone]) if alone else -1
        bad = alone[first] if first >= 0 else -1
    if bad >= 0:
        # Re-check up to the bad one here: the refusal names the first bad item in batch
        # order, with its reason, exactly as a check in-process would.
        check_items(items[: bad + 1], now, signers, skew_s)
        raise BadSignature(f"attestation {bad} of the batch refused: it does not verify")
    future: list[Attestation] = []
    try:
        atts = check_items(items, now, signers, skew_s, signatures=False, future=future)
    except UnknownSigner:
        if not await learn_held(held, signers):
            raise
        future.clear()
        atts = check_items(items, now, signers, skew_s, signatures=False, future=future)
    if future:
        log.info(
            "held back %s from %s dated after this node's clock (%s) plus the "
            "%gs skew tolerance (first by %s at %s): its clock is ahead",
            count(len(future), "attestation"),
            source or "a peer",
            now,
            skew_s,
            future[0].node_id,
            future[0].ts,
        )
    for n, att in enumerate(atts):
        if table_of(att.role) != table:
            raise InvalidEntry(
                f"attestation {n} of the batch refused: a {att.role.value} statement "
                f"belongs to the set {table_of(att.role)!r}, not {table!r}"
            )
    return atts


def held_rules(
    atts: Sequence[Attestation],
    ctx: StoredContext,
    skew_s: float,
    window_s: float,
    *,
    each: bool,
) -> tuple[list[Attestation], list[Refusal]]:
    """The rules checked against what is held (``ctx``: a backdate, a time a witness
    contradicts, a rolled-back state). With ``each``, the items that fail are left out,
    each with a :class:`Refusal` (decision 0112); else the first failure raises."""
    if not each:
        check_timing(atts, ctx, skew_s, window_s)
        return list(atts), []
    faults = timing_faults(atts, ctx, skew_s, window_s)
    kept = [a for n, a in enumerate(atts) if n not in faults]
    return kept, [_refusal(n, atts[n], why) for n, why in sorted(faults.items())]


def _refusal(n: int, att: Attestation, detail: str) -> Refusal:
    """Item ``n`` of its batch refused alone, with why and the entry it signs, if any."""
    signs = att.subject if att.role is Role.AUTHOR else None
    return Refusal(f"an inadmissible attestation (#{n} of its batch): {detail}", signs)


async def verify_each(
    items: Sequence[Attestation], checks: Mapping[str, Any]
) -> tuple[list[Attestation], list[Refusal]]:
    """:func:`verify_batch` with ``checks`` (its keyword arguments), each item alone when the
    batch does not pass whole: the items that pass, and a :class:`Refusal` for each other
    one (decision 0111). A sound batch is checked once, as a batch; a batch over
    ``MAX_ADMIT_ITEMS`` is still refused whole."""
    try:
        return await verify_batch(items, **checks), []
    except UnknownSigner:
        # A signer this node has not learned of yet (the membership it pulls lags): the
        # session fails loudly, naming it, as before; the next one, once it knows, passes.
        raise
    except EntryTooLarge:
        if len(items) > MAX_ADMIT_ITEMS:
            raise
    except InvalidEntry:  # a bad signature (a damaged row, a forgery), another set's item
        pass
    kept: list[Attestation] = []
    refused: list[Refusal] = []
    for n, att in enumerate(items):
        try:
            kept += await verify_batch([att], **checks)
        except UnknownSigner:
            raise
        except InvalidEntry as exc:
            detail = str(exc).removeprefix("attestation 0 of the batch refused: ")
            refused.append(_refusal(n, att, detail))
    return kept, refused
