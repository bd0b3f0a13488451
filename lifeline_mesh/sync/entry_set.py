"""The entries of one line as a reconciled set, backed by a lifeline Store."""

from __future__ import annotations

from collections.abc import Sequence

from lifeline.entry import Entry
from lifeline.errors import ConfigError, RemoteProtocolError
from lifeline.lines import validate_line_name
from lifeline.store.port import Store
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.recon.entry_codec import ENTRIES, EntryCodec
from lifeline_mesh.recon.sets import ParsedItem, Snapshot, token_of
from lifeline_mesh.sync.port import AdmitResult, FetchResult

__all__ = ["EntrySet"]

_CHUNK = 2000


class EntrySet:
    """Keys are ``(height, id)`` from the store; the version of an entry is its ts."""

    name = ENTRIES

    def __init__(self, store: Store, codec: EntryCodec | None = None) -> None:
        self.store = store
        self.codec = codec or EntryCodec()
        self._externals: dict[str, str] | None = None

    async def snapshot(self) -> Snapshot:
        rows = await self._keys_with_ts()
        ids = [bytes.fromhex(i) for _, i, _ in rows]
        tokens = [token_of(i, ts.encode("ascii")) for i, (_, _, ts) in zip(ids, rows, strict=True)]
        externals = await self._declared()
        return Snapshot([h for h, _, _ in rows], ids, tokens, (bytes.fromhex(e) for e in externals))

    async def _keys_with_ts(self) -> list[tuple[int, str, str]]:
        if isinstance(self.store, SqliteStore):
            # One indexed scan instead of loading every body just to learn the ts.
            rows = await self.store.run_read(
                lambda conn: conn.execute(
                    "SELECT height, id, ts FROM entries ORDER BY height, id"
                ).fetchall()
            )
            return [(int(h), i, t) for h, i, t in rows]
        keys = await self.store.keys()
        out: list[tuple[int, str, str]] = []
        for k in range(0, len(keys), _CHUNK):
            part = keys[k : k + _CHUNK]
            found = {e.id: e.ts for e in await self.store.get_many(i for _, i in part)}
            out += [(h, i, found[i]) for h, i in part if i in found]
        return out

    async def _declared(self) -> dict[str, str]:
        if self._externals is None:
            self._externals = await self.store.externals()
        return self._externals

    async def fetch(self, ids: Sequence[bytes]) -> FetchResult:
        entries = await self.store.get_many(i.hex() for i in ids)
        declared = await self._declared()
        externals = sorted(
            {(bytes.fromhex(p), declared[p]) for e in entries for p in e.parents if p in declared}
        )
        return FetchResult([e.to_json() for e in entries], externals)

    async def admit(
        self, items: Sequence[ParsedItem], externals: Sequence[tuple[bytes, str]]
    ) -> AdmitResult:
        for ext_id, line in externals:
            try:
                validate_line_name(line)
            except ConfigError as exc:
                raise RemoteProtocolError(
                    f"peer declared an external in a bad line: {exc}"
                ) from exc
            await self.store.declare_external(ext_id.hex(), line)
        entries = [i.value for i in items if isinstance(i.value, Entry)]
        result = await self.store.append_many(entries)
        return AdmitResult(result.count, len(result.ts_lowered))
