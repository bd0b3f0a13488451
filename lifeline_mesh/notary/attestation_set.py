"""The notary's attestations of one line as reconciled sets (DESIGN §5–§6).

Two sets, one per table: ``attestations`` (author signatures and the first wave's receipts
and summaries) and ``statements`` (state statements, imports). A first-wave peer opens only
the first: the session's set negotiation is the capability (decision 0015).

An attestation is an opaque item: its id is ``sha256`` of its bytes, its sort key the signed
time in microseconds (content-derived, so every node orders the set alike), and it has no
version and no same-set dependencies. One exception to "only what was asked": a runner's
``enrolled`` statement goes ahead of the first of its signatures a session sends, so the
receiver knows the runner before it checks them (decision 0024). Parsing decodes and
bounds it; admission (signature, signer, timing) is the notary's, all-or-nothing per batch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence

from lifeline.errors import InvalidEntry, LocalProtocolError
from lifeline_mesh.home.identity import node_id_for
from lifeline_mesh.notary.enrollment import signer_ids
from lifeline_mesh.notary.intake import ATTESTATIONS_TABLE
from lifeline_mesh.notary.port import Notary
from lifeline_mesh.notary.seals import SEALS_CAPABILITY, Seal, SealMemory, run_span
from lifeline_mesh.notary.statement import MAX_ITEM_BYTES, Attestation, Role, decode
from lifeline_mesh.recon.sets import ParsedItem, SetSummary, Snapshot
from lifeline_mesh.sync.port import (
    AdmitResult,
    FetchResult,
    KeyRuns,
    RunKey,
    RunResult,
    SetSnapshots,
)
from lifeline_mesh.sync.snapshot_cache import SetRows

__all__ = ["ATTESTATIONS", "STATEMENTS", "AttestationCodec", "AttestationSet", "attestation_rows"]

ATTESTATIONS = "attestations"
STATEMENTS = "statements"


class AttestationCodec:
    """Structural decoding only; signatures are checked once per batch at admission."""

    flat = True  # an attestation names entries, never another attestation

    def parse(self, raw: bytes) -> ParsedItem:
        if len(raw) > MAX_ITEM_BYTES:
            raise InvalidEntry(
                f"attestation of {len(raw)} bytes is over the cap of {MAX_ITEM_BYTES}"
            )
        att = decode(raw)
        return ParsedItem(id=att.id, version=b"", deps=(), raw=raw, value=att)


def _rows(rows: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, bytes, bytes]]:
    for key, item_id in rows:
        yield int(key), bytes(item_id), bytes(item_id)


def attestation_rows(table: str) -> SetRows:
    """How a line file's snapshot of the notary's ``table`` is read (a snapshot cache's)."""
    return SetRows(
        table,
        table,
        "sort_key, id",
        "sort_key, id",
        _rows,  # type: ignore[arg-type]
        run_key="sort_key, id",  # the index {table}_order
        run_id=_blob_id,
        run_item="item",
    )


def _blob_id(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"an id of type {type(value).__name__}")
    return value


class AttestationSet:
    """The notary's ``table`` as a set. Its snapshots come from ``snapshots`` when the
    line's opener kept them (a node's line file: ``attestation_rows``); otherwise they are
    built from the notary's keys each time."""

    def __init__(self, notary: Notary, snapshots: SetSnapshots | None = None) -> None:
        self.notary = notary
        self.name = ATTESTATIONS if notary.table == ATTESTATIONS_TABLE else STATEMENTS
        self.codec = AttestationCodec()
        self._looked_up: set[bytes] = set()  # signer keys whose enrollment was looked up
        self._pending: dict[str, bytes] = {}  # node id -> its enrollment, not sent yet
        # Seals (decision 0149): sent ahead of a run to a peer that takes them, each once a
        # session; those received checked and kept in mind for the signatures after them
        self.send_seals = False
        self._seal_cap = 0  # the largest item a frame to the peer carries
        self._seals_sent: set[bytes] = set()
        self._seals = SealMemory()
        self.snapshots = snapshots  # a serving node's: the last one, brought up to date
        # Awaited before each read of the set (node/signatures_ahead.py marks the line)
        self.before_read: Callable[[], Awaitable[None]] | None = None

    async def snapshot(self) -> Snapshot:
        if self.before_read is not None:
            await self.before_read()
        if self.snapshots is not None:
            return await self.snapshots.snapshot()
        keys = await self.notary.keys()
        return Snapshot.build((key, item_id, item_id) for key, item_id in keys)

    def peer_capabilities(self, capabilities: Sequence[str], item_cap: int) -> None:
        """The peer's hello read: seals go ahead of this set's runs if it takes them, each
        that fits its frames (a larger one is left out: its items are checked alone)."""
        self.send_seals = (
            SEALS_CAPABILITY in capabilities and self.notary.table == ATTESTATIONS_TABLE
        )
        self._seal_cap = item_cap

    def runs(self) -> bool:
        """Whether the set can be sent whole in key order with no snapshot (a line
        file's, a hub's; decision 0144)."""
        return isinstance(self.snapshots, KeyRuns)

    async def fetch_run(self, after: RunKey | None, limit: int) -> RunResult:
        """Up to ``limit`` items after the key ``after`` (a ``Running``), each runner's
        enrollment ahead of its first signature, as :meth:`fetch` sends them."""
        if not isinstance(self.snapshots, KeyRuns):
            raise LocalProtocolError(f"this line's {self.name} are not read in runs")
        if after is None and self.before_read is not None:
            await self.before_read()
        keys = await self.snapshots.run(after, limit)
        if keys.items is None:
            raws = await self.notary.fetch(keys.ids)
        else:
            raws = keys.items  # read with their keys, not again by id
        seals = await self._seals_for(after, keys.after) if raws else []
        return RunResult(await self._with_enrollments(raws, seals), keys.ids, [], keys.after)

    async def _seals_for(self, after: RunKey | None, last: RunKey | None) -> list[bytes]:
        """The seals held whose span this chunk of a run reaches, not sent yet this session
        (only to a peer that takes them: ``peer_capabilities``)."""
        if not self.send_seals:
            return []
        found = await self.notary.seals_covering(*run_span(after, last))
        cap = self._seal_cap
        fresh = [i for seal_id, i in found if seal_id not in self._seals_sent and len(i) <= cap]
        self._seals_sent.update(seal_id for seal_id, _ in found)
        return fresh

    async def summary(self) -> SetSummary | None:
        if self.before_read is not None:
            await self.before_read()
        totals = await self.notary.totals()
        return SetSummary(totals.count, totals.total)

    async def fetch(self, ids: Sequence[bytes]) -> FetchResult:
        return FetchResult(await self._with_enrollments(await self.notary.fetch(ids)), [])

    async def _with_enrollments(
        self, raws: list[bytes], seals: Sequence[bytes] = ()
    ) -> list[bytes]:
        """``raws`` with the enrollments of their runners ahead, then ``seals``: a
        receiver knows a runner before it checks the runner's seal or signatures."""
        if self.notary.table != ATTESTATIONS_TABLE:
            return raws
        return [*await self._enrollments_for(raws), *seals, *raws]

    async def _enrollments_for(self, raws: Sequence[bytes]) -> list[bytes]:
        """The enrollments of the runners among ``raws``' signers, each once a session and
        ahead of their signatures: a receiver then knows every runner it must accept
        (decision 0024). Permanent members have none, and cost one lookup a session."""
        keys = signer_ids(raws) - self._looked_up
        if keys:
            self._looked_up |= keys
            nodes = sorted(node_id_for(k) for k in keys)
            found = await self.notary.enrollments_of(nodes)
            self._pending.update(found)
        if not self._pending:
            return []
        wanted = {node_id_for(k) for k in signer_ids(raws)}
        out = [self._pending.pop(n) for n in sorted(wanted & self._pending.keys())]
        held = set(raws)
        return [raw for raw in out if raw not in held]

    async def admit(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AdmitResult:
        return await (await self.prepare(items, externals)).commit()

    async def prepare(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> _Verified:
        """Verify the batch's signatures (no store access); :meth:`_Verified.commit` stores it."""
        # The codec decoded each item already; admission verifies the decoded form.
        # An item that fails is refused alone, the rest stored (decision 0111).
        atts = [i.value if isinstance(i.value, Attestation) else decode(i.raw) for i in items]
        seals = [a for a in atts if a.role is Role.SEALED]
        if seals and self.notary.table == ATTESTATIONS_TABLE:  # elsewhere refused as misplaced
            # Checked here, before any wait: the next batch's check may start meanwhile,
            # and the signatures it holds come after these seals (decision 0149).
            self.notary.learn_seals(self._seals, seals)
            atts = [a for a in atts if a.role is not Role.SEALED]
        vouched = self._seals.vouched if len(self._seals) else None
        kept, refused = await self.notary.prepare_each(atts, vouched)
        return _Verified(self.notary, kept, refused, self._seals.spans(kept) if vouched else [])


class _Verified:
    def __init__(
        self, notary: Notary, atts: list[Attestation], refused: list[str], seals: list[Seal]
    ) -> None:
        self._notary = notary
        self._atts = atts
        self._refused = tuple(refused)
        self._seals = seals  # those that vouched for some of ``atts``, with their spans

    async def commit(self) -> AdmitResult:
        if not self._atts:
            return AdmitResult(0, refused=self._refused)
        if self._seals:
            self._notary.hold_seals(self._seals)  # stored in the batch's own transaction
        # each item judged alone against what is held too (decision 0112)
        added, refused = await self._notary.commit_each(self._atts)
        return AdmitResult(added, refused=self._refused + tuple(refused))
