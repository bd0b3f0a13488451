"""The notary's attestations of one line as reconciled sets (DESIGN §5–§6).

Two sets, one per table: ``attestations`` (author signatures and the first wave's receipts
and summaries) and ``statements`` (state statements, imports). A first-wave peer opens only
the first: the session's set negotiation is the capability (decision 0015).

An attestation is an opaque item: its id is ``sha256`` of its bytes, its sort key the signed
time in microseconds (content-derived, so every node orders the set alike), and it has no
version and no same-set dependencies. Parsing decodes and bounds it; admission (signature,
signer, timing) is the notary's, all-or-nothing per batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from lifeline.errors import InvalidEntry
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.notary.statement import MAX_ITEM_BYTES, Attestation, decode
from lifeline_mesh.notary.storage import ATTESTATIONS_TABLE, NotaryStore
from lifeline_mesh.recon.sets import ParsedItem, SetSummary, Snapshot
from lifeline_mesh.sync.port import AdmitResult, FetchResult
from lifeline_mesh.sync.snapshot_cache import SetRows, SnapshotCache

__all__ = ["ATTESTATIONS", "STATEMENTS", "AttestationCodec", "AttestationSet"]

ATTESTATIONS = "attestations"
STATEMENTS = "statements"


class AttestationCodec:
    """Structural decoding only; signatures are checked once per batch at admission."""

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


class AttestationSet:
    def __init__(self, notary: NotaryStore, cache: SnapshotCache | None = None) -> None:
        self.notary = notary
        self.name = ATTESTATIONS if notary.table == ATTESTATIONS_TABLE else STATEMENTS
        self.codec = AttestationCodec()
        self.cache = cache  # a serving node's: the last snapshot, brought up to date
        table = notary.table
        self._rows = SetRows(table, table, "sort_key, id", "sort_key, id", _rows)  # type: ignore[arg-type]

    async def snapshot(self) -> Snapshot:
        if self.cache is not None and isinstance(self.notary.store, SqliteStore):
            return await self.cache.snapshot(self.notary.store, self._rows)
        keys = await self.notary.keys()
        return Snapshot.build((key, item_id, item_id) for key, item_id in keys)

    async def summary(self) -> SetSummary | None:
        totals = await self.notary.totals()
        return SetSummary(totals.count, totals.total)

    async def fetch(self, ids: Sequence[bytes]) -> FetchResult:
        return FetchResult(await self.notary.fetch(ids), [])

    async def admit(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AdmitResult:
        return await (await self.prepare(items, externals)).commit()

    async def prepare(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> _Verified:
        """Verify the batch's signatures (no store access); :meth:`_Verified.commit` stores it."""
        # The codec decoded each item already; admission verifies the decoded form.
        atts = [i.value if isinstance(i.value, Attestation) else i.raw for i in items]
        return _Verified(self.notary, await self.notary.prepare(atts))


class _Verified:
    def __init__(self, notary: NotaryStore, atts: list[Attestation]) -> None:
        self._notary = notary
        self._atts = atts

    async def commit(self) -> AdmitResult:
        return AdmitResult(await self._notary.commit(self._atts))
