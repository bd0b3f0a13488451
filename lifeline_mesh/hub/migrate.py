"""Copy a node's lines and their evidence between storages (``lifeline-mesh migrate-store``).

A side is either a project root (its ``.lifeline/`` line files, SQLite) or a PostgreSQL
database. Each line is copied parents first in batches (entries and cross-line
declarations), then its attestations and statements, each item's signature checked before
it is stored. Every write is idempotent, so an interrupted copy is resumed by running the
same command again. At the end each line is verified: the same count and fingerprint of
entries (ids and times) and of both evidence sets (the ids of the signed items) on both
sides. A line copied into a database is then made ready to read (:func:`ready_for_reads`):
its truth tables folded and its recall index built, which the first `context` and
`recall` on the hub would otherwise wait for (~17 s and ~46 s at a million entries).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from lifeline.entry import Entry
from lifeline.errors import LifelineError, StoreError
from lifeline.home import Home
from lifeline.lines import validate_line_name
from lifeline.store.backend import summarized
from lifeline.store.pg_lines import pg_components, pg_load_steps
from lifeline.store.port import Store
from lifeline.store.postgres import PgDatabase, is_postgres_url
from lifeline.store.sqlite import SqliteStore
from lifeline.store.summary import SetTotals
from lifeline_mesh.notary.pg_storage import PgNotaryStore
from lifeline_mesh.notary.port import Notary
from lifeline_mesh.notary.seals import Seal
from lifeline_mesh.notary.statement import Attestation, decode
from lifeline_mesh.notary.storage import NotaryStore

__all__ = ["LineCopy", "Side", "copy_line", "describe", "open_side"]

BATCH = 2000


@dataclass(frozen=True, slots=True)
class LineCopy:
    """One line copied: what the destination holds now, what this run added, verified."""

    line: str
    entries: int
    added: int
    attestations: int
    statements: int

    def to_dict(self) -> dict[str, object]:
        return {
            "line": self.line,
            "entries": self.entries,
            "added": self.added,
            "attestations": self.attestations,
            "statements": self.statements,
            "verified": True,
        }


class Side:
    """A project root's line files, or a PostgreSQL database of lines."""

    def __init__(self, where: str, db: PgDatabase | None) -> None:
        self.where = where
        self.db = db

    async def lines(self) -> list[str]:
        if self.db is not None:
            return await self.db.lines()
        return Home(Path(self.where)).line_names()

    @asynccontextmanager
    async def line(self, name: str, *, create: bool) -> AsyncIterator[tuple[Store, Notary]]:
        if self.db is not None:
            pg = await self.db.line(name, create=create)
            yield pg, PgNotaryStore(pg)
            return
        path = Home(Path(self.where)).line_path(name)
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        async with await SqliteStore.open(path, create=create) as store:
            yield store, await NotaryStore.attach(store)

    async def ready_for_reads(self, name: str) -> None:
        """Line ``name`` of a database made ready to read: its truth tables folded and its
        recall index built, as their first reader would (a line file's first reader, or
        `serve`, folds its own)."""
        if self.db is None:
            return
        store = await self.db.line(name, create=False)
        for step in pg_load_steps():  # what a hub process does after a large load
            async with self.db.pool.acquire() as conn:
                await step(conn, store.line_id)

    async def close(self) -> None:
        if self.db is not None:
            await self.db.close()


async def open_side(where: str, *, source: bool) -> Side:
    """``where`` as a side: a ``postgresql://`` URL, or a project root (a source must hold
    ``.lifeline/``)."""
    if is_postgres_url(where):
        # every component's tables, as a hub process makes them: the notary's, the truth's,
        # recall's (a database migrated into before `hub init` has them all the same)
        return Side(where, await PgDatabase.connect(where, migrations=pg_components()))
    root = Path(where)
    if source and not Home(root).exists():
        raise StoreError(f"{root} holds no .lifeline/ folder; give a project root or a URL")
    return Side(str(root), None)


async def copy_line(
    src: Side, dst: Side, name: str, progress: Callable[[int], None] = lambda n: None
) -> LineCopy:
    """Copy line ``name`` from ``src`` to ``dst`` and verify it (StoreError if not equal)."""
    validate_line_name(name)
    async with (
        src.line(name, create=False) as (s_store, s_notary),
        dst.line(name, create=True) as (d_store, d_notary),
    ):
        for entry_id, line in sorted((await s_store.externals()).items()):
            await d_store.declare_external(entry_id, line)
        added = 0
        batch: list[Entry] = []
        async for entry in s_store.stream():  # parents first
            batch.append(entry)
            if len(batch) >= BATCH:
                added += (await d_store.append_many(batch)).count
                progress(len(batch))
                batch = []
        if batch:
            added += (await d_store.append_many(batch)).count
            progress(len(batch))
        for source, target in ((s_notary, d_notary),
                               (s_notary.statements(), d_notary.statements())):  # fmt: skip
            await _copy_items(await source.items(), target)
        await _copy_seals(s_notary, d_notary)
        return await _verified(name, added, s_store, d_store, s_notary, d_notary)


async def _copy_seals(source: Notary, target: Notary) -> None:
    """The line's seals (decision 0149), each checked: a damaged or forged one is left out
    (the signatures it lists are then checked one by one where the line is pulled)."""
    kept: list[Seal] = []
    for made, lo, hi in await source.held_seals():
        try:
            made.verify()
        except LifelineError:
            continue
        kept.append((made, lo, hi))
    await target.keep_seals(kept)


async def _copy_items(raws: Sequence[bytes], target: Notary) -> None:
    for start in range(0, len(raws), BATCH):
        atts: list[Attestation] = []
        for raw in raws[start : start + BATCH]:
            att = decode(raw)
            att.verify()  # a damaged or forged item is not carried over
            atts.append(att)
        await target.add(atts)


async def _totals(store: Store) -> SetTotals:
    kept = summarized(store)
    if kept is None:
        raise StoreError(f"{type(store).__name__} keeps no line fingerprint to verify against")
    return await kept.entry_totals()


async def _verified(
    name: str,
    added: int,
    s_store: Store,
    d_store: Store,
    s_notary: Notary,
    d_notary: Notary,
) -> LineCopy:
    pairs = [
        ("entries", await _totals(s_store), await _totals(d_store)),
        ("attestations", await s_notary.totals(), await d_notary.totals()),
        (
            "statements",
            await s_notary.statements().totals(),
            await d_notary.statements().totals(),
        ),
    ]
    for what, mine, theirs in pairs:
        if mine != theirs:
            raise StoreError(
                f"line {name}: the copy's {what} differ from the source's ({theirs.count} "
                f"against {mine.count}, or their fingerprints); run the command again"
            )
    entries, atts, stmts = (p[2].count for p in pairs)
    return LineCopy(name, entries, added, atts, stmts)


def describe(where: str) -> str:
    """``where`` without a password, for messages."""
    return where.split("@")[-1] if is_postgres_url(where) and "@" in where else where
