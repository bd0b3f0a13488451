"""The entries of one line as a reconciled set, backed by a lifeline Store."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from lifeline.entry import Entry
from lifeline.errors import ConfigError, LocalProtocolError, RemoteProtocolError
from lifeline.lines import EXTERNAL_ANCHOR, validate_line_name
from lifeline.store.backend import summarized
from lifeline.store.port import AppendResult, Store
from lifeline.store.tiers import SqlLine, TokenRows
from lifeline_mesh.recon.entry_codec import ENTRIES, EntryCodec
from lifeline_mesh.recon.sets import ParsedItem, SetSummary, Snapshot, token_of
from lifeline_mesh.sync.port import (
    AdmitResult,
    FetchResult,
    KeyRuns,
    RunKey,
    RunResult,
    SetSnapshots,
)
from lifeline_mesh.sync.snapshot_cache import SetRows

__all__ = ["ENTRY_ROWS", "EntrySet", "KeyedEntries", "ScannedEntries", "TokenRowEntries"]

_CHUNK = 2000


def _rows(rows: Iterable[tuple[int, str, str]]) -> Iterator[tuple[int, bytes, bytes]]:
    for height, hex_id, ts in rows:
        item_id = bytes.fromhex(hex_id)
        yield int(height), item_id, token_of(item_id, ts.encode("ascii"))


def _hex_id(value: object) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"an id of type {type(value).__name__}")
    return bytes.fromhex(value)


ENTRY_ROWS = SetRows(
    ENTRIES,
    "entries",
    "height, id, ts",
    "height, id",
    _rows,  # type: ignore[arg-type]
    run_key="height, ts, id",  # the index entries_order
    run_id=_hex_id,
)


class KeyedEntries:
    """The snapshot of any store through the port: its keys, then the entries' ts."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def snapshot(self, extra_known: Iterable[bytes] = ()) -> Snapshot:
        keys = await self.store.keys()
        rows: list[tuple[int, bytes, bytes]] = []
        for k in range(0, len(keys), _CHUNK):
            part = keys[k : k + _CHUNK]
            found = {e.id: e.ts for e in await self.store.get_many(i for _, i in part)}
            rows += _rows((h, i, found[i]) for h, i in part if i in found)
        return Snapshot.build(rows, extra_known)


class ScannedEntries:
    """The snapshot of a line file, built again each time: one indexed scan on the
    store's thread, streamed into the snapshot's flat buffers (no list of a million row
    tuples in between)."""

    def __init__(self, store: SqlLine) -> None:
        self.store = store

    async def snapshot(self, extra_known: Iterable[bytes] = ()) -> Snapshot:
        known = list(extra_known)
        return await self.store.run_read(
            lambda conn: Snapshot.build(
                _rows(conn.execute("SELECT height, id, ts FROM entries ORDER BY height, id")),
                known,
            )
        )


class TokenRowEntries:
    """The snapshot of a store that keeps each entry's token (PostgreSQL's column)."""

    def __init__(self, store: TokenRows) -> None:
        self.store = store

    async def snapshot(self, extra_known: Iterable[bytes] = ()) -> Snapshot:
        return Snapshot.build(await self.store.snapshot_rows(), extra_known)


class EntrySet:
    """Keys are ``(height, id)`` from the store; the version of an entry is its ts.

    Its snapshots come from ``snapshots``, matched to the store by whoever opened the
    line (a node's line object: kept between sessions, decision 0076); without one, from
    the store's port (:class:`KeyedEntries`)."""

    name = ENTRIES

    def __init__(
        self,
        store: Store,
        codec: EntryCodec | None = None,
        snapshots: SetSnapshots | None = None,
    ) -> None:
        self.store = store
        self.codec = codec or EntryCodec()
        self.snapshots = snapshots or KeyedEntries(store)
        self.summarized = summarized(store)  # chosen once per set
        self._externals: dict[str, str] | None = None

    async def snapshot(self) -> Snapshot:
        return await self.snapshots.snapshot([bytes.fromhex(e) for e in await self._declared()])

    def runs(self) -> bool:
        """Whether the set can be sent whole in key order with no snapshot (a line
        file's, a hub's; decision 0144)."""
        return isinstance(self.snapshots, KeyRuns)

    async def fetch_run(self, after: RunKey | None, limit: int) -> RunResult:
        """Up to ``limit`` entries after the key ``after``, parents first (a ``Running``)."""
        if not isinstance(self.snapshots, KeyRuns):
            raise LocalProtocolError("this line's entries are not read in runs")
        keys = await self.snapshots.run(after, limit)
        got = await self.fetch(keys.ids)
        return RunResult(got.raws, keys.ids, got.externals, keys.after)

    async def summary(self) -> SetSummary | None:
        """Count and sum of tokens of the line's entries, kept by the store (SQLite,
        PostgreSQL): an in-sync check reads no entry."""
        if self.summarized is None:
            return None
        totals = await self.summarized.entry_totals()
        return SetSummary(totals.count, totals.total)

    async def _declared(self) -> dict[str, str]:
        if self._externals is None:
            self._externals = await self.store.externals()
        return self._externals

    async def fetch(self, ids: Sequence[bytes]) -> FetchResult:
        declared = await self._declared()
        if not declared and self.summarized is not None:
            # no cross-line parents to declare: the JSON as the store keeps it
            return FetchResult(await self.summarized.get_many_json(i.hex() for i in ids), [])
        entries = await self.store.get_many(i.hex() for i in ids)
        externals = sorted(
            {(bytes.fromhex(p), declared[p]) for e in entries for p in e.parents if p in declared}
        )
        return FetchResult([e.to_json() for e in entries], externals)

    async def admit(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AdmitResult:
        result = await self.append(items, externals)
        return AdmitResult(result.count, len(result.ts_lowered))

    async def append(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AppendResult:
        """Store a received batch (one transaction); the store's result names the new ids."""
        entries = [i.value for i in items if isinstance(i.value, Entry)]
        for ext_id, line in self.externals_of(externals, entries):
            await self.store.declare_external(ext_id, line)
        return await self.store.append_many(entries)

    @staticmethod
    def externals_of(
        externals: Sequence[tuple[bytes, str]], entries: Sequence[Entry]
    ) -> list[tuple[str, str]]:
        """A peer's cross-line declarations as (id, line), for the batch ``entries`` they
        travel with: only those naming a parent of the batch that is not in it (the rest
        would be rows of the peer's choosing; the store keeps the first declaration of an
        id and none for an entry it holds), each id 32 bytes and each line name checked (or
        the anchor mark of a parent an import could not reproduce, in no line)."""
        for ext_id, _line in externals:
            if len(ext_id) != 32:
                raise RemoteProtocolError(
                    f"peer declared a cross-line parent whose id is {len(ext_id)} bytes, not 32"
                )
        named = {p for e in entries for p in e.parents}.difference(e.id for e in entries)
        out: dict[str, str] = {}
        for ext_id, line in externals:
            hex_id = ext_id.hex()
            if hex_id not in named or hex_id in out:
                continue
            try:
                if line != EXTERNAL_ANCHOR:  # an anchor: known by id only, in no line
                    validate_line_name(line)
            except ConfigError as exc:
                raise RemoteProtocolError(
                    f"peer declared an external in a bad line: {exc}"
                ) from exc
            out[hex_id] = line
        return list(out.items())
