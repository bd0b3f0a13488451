"""Signing on this node: author attestations, state statements, imports, the hook.

Adapters around :mod:`lifeline_mesh.notary.statement`: they sign with the node's identity
and store the result beside the entries. The append hook (entry-point group
``lifeline.append_hooks``) makes every local write of a project with a node identity signed,
whichever front end wrote it (CLI, API, MCP), in the same transaction as the write.
Witness receipts and summaries (first wave) are still signed on request, for tests and
tools; a node witnesses with :func:`attest_state` (docs/decisions/0015-witness-statements.md).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from lifeline.entry import Entry
from lifeline.errors import StoreError
from lifeline.home import Home
from lifeline.ledger import utc_now
from lifeline.plugins import AppendHook
from lifeline.store.backend import FileOrEntries, on_backend
from lifeline.store.line_write import LineWrite
from lifeline.store.port import Store
from lifeline.wording import count
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.enrollment import enrollment_statement, runner_certificate
from lifeline_mesh.notary.port import Notary
from lifeline_mesh.notary.seals import Seal, keep_seals, seal
from lifeline_mesh.notary.statement import (
    MAX_STATE_TIPS,
    MAX_SUMMARY_TIPS,
    MAX_WITNESS_IDS,
    Attestation,
    Role,
    sign,
    tips_digest,
)
from lifeline_mesh.notary.states import (
    StateOf,
    fingerprint,
    unsigned_entries,
)
from lifeline_mesh.notary.storage import NotaryStore

__all__ = [
    "AuthorHook",
    "append_hook_factory",
    "attest_state",
    "fingerprint",
    "notary_of",
    "sign_entries",
    "sign_state",
    "sign_unsigned",
    "state_statements",
    "summarize",
    "witness",
]

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore
    from lifeline.store.sqlite import SqliteStore

log = logging.getLogger(__name__)


def _no_tables(purpose: str) -> Callable[[Store], Awaitable[NotaryStore]]:
    async def refuse(store: Store) -> NotaryStore:
        raise StoreError(
            f"{purpose} needs the notary's tables, which a {type(store).__name__} does not "
            "have; open the line through its home (a line file, or a hub's line)"
        )

    return refuse


async def _file_notary(store: Store, purpose: str = "storing attestations") -> NotaryStore:
    """The notary of a line file (its schema checked by ``attach``); a line of any other
    backend has no notary tables of SQLite's: a one-line error naming ``purpose``."""
    return await on_backend(
        store, FileOrEntries(file=NotaryStore.attach, entries=_no_tables(purpose))
    )


class _Notaries:
    """A line's notary, per backend: its tables in the line file, or their PostgreSQL
    twin in a hub's database; a store of neither kind has none."""

    def sqlite(self, store: SqliteStore) -> Awaitable[Notary]:
        return NotaryStore.attach(store)

    def postgres(self, store: PgStore) -> Awaitable[Notary]:
        from lifeline_mesh.notary.pg_storage import PgNotaryStore

        async def hub() -> Notary:
            return PgNotaryStore(store)

        return hub()

    def plain(self, store: Store) -> Awaitable[Notary]:
        return _no_tables("storing attestations")(store)


_NOTARIES = _Notaries()


async def notary_of(store: Store) -> Notary:
    """The notary of ``store``'s line, on the backend the line was opened on."""
    return await on_backend(store, _NOTARIES)


async def sign_entries(
    store: Store, identity: NodeIdentity, entries: Sequence[Entry]
) -> list[Attestation]:
    """Sign ``(author, entry id, ts, node id)`` for each entry and store the attestations;
    a line file keeps seals over them too, when they are many (decision 0149)."""
    atts = [sign(identity, Role.AUTHOR, e.id, e.ts) for e in entries]
    notary = await notary_of(store)
    await notary.add(atts)
    await notary.keep_seals(seal(identity, atts, utc_now()))
    return atts


async def witness(
    store: Store, identity: NodeIdentity, entry_ids: Sequence[str], now: str
) -> list[Attestation]:
    """One receipt for a batch received from a peer, dated by this node's clock ``now``.

    Batches larger than MAX_WITNESS_IDS get one receipt per slice of that size.
    """
    atts = receipts(identity, entry_ids, now)
    if atts:
        notary = await notary_of(store)
        await notary.add(atts)
    return atts


def receipts(identity: NodeIdentity, entry_ids: Sequence[str], now: str) -> list[Attestation]:
    """The witness receipts of :func:`witness`, signed but not stored."""
    ids = sorted(set(entry_ids))
    return [
        sign(identity, Role.WITNESS, str(len(part)), now, *part)
        for part in (ids[i : i + MAX_WITNESS_IDS] for i in range(0, len(ids), MAX_WITNESS_IDS))
    ]


async def summarize(
    store: Store, identity: NodeIdentity, line: str, now: str
) -> Attestation | None:
    """Sign this line's state (count, fingerprint, tips): a later truncation shows.

    Returns None when the line has more tips than a summary may carry (MAX_SUMMARY_TIPS).
    """
    keys = await store.keys()
    tips = await store.tips()
    if len(tips) > MAX_SUMMARY_TIPS:
        log.warning("line %s has %d tips; no summary signed", line, len(tips))
        return None
    ids = [i for _h, i in keys]
    att = sign(identity, Role.SUMMARY, line, now, str(len(ids)), fingerprint(ids), *tips)
    notary = await notary_of(store)
    await notary.add([att])
    return att


def state_statements(
    identity: NodeIdentity, line: str, state: StateOf, now: str
) -> list[Attestation]:
    """The statement of one state: one part, or one per MAX_STATE_TIPS tips (same digest)."""
    tips = sorted(state.tips)
    digest = tips_digest(tips)
    slices = [tips[i : i + MAX_STATE_TIPS] for i in range(0, len(tips), MAX_STATE_TIPS)] or [[]]
    head = (str(state.count), state.fingerprint, digest)
    return [
        sign(identity, Role.STATE, line, now, *head, f"{k}/{len(slices)}", *part)
        for k, part in enumerate(slices, 1)
    ]


async def attest_state(
    store: Store, identity: NodeIdentity, line: str, now: str | Callable[[], str]
) -> list[Attestation]:
    """:func:`sign_state` on the notary of ``store`` (a line file's, or a hub line's)."""
    return await sign_state(await notary_of(store), identity, line, now)


async def sign_state(
    notary: Notary, identity: NodeIdentity, line: str, now: str | Callable[[], str]
) -> list[Attestation]:
    """Sign this line's state after entries from a peer were admitted: count, fingerprint,
    tips (every ancestor of a tip existed at ``now``). Nothing when the state is the one
    this node signed last, or holds fewer entries than it (a truncated store: signing it
    would only poison its peers; ``verify`` reports it here).

    Give ``now`` as a clock: it is read inside the write transaction, so this node's
    statements are dated in the order they were made. Two sessions ending together each
    read the time before waiting for the write lock used to sign, in the other order, a
    larger count at the earlier time — which every peer then refuses as a rollback."""

    def make(state: StateOf, last: Attestation | None) -> list[Attestation]:
        stamp = now() if callable(now) else now
        if last is not None:
            if last.state_key == (str(state.count), state.fingerprint, tips_digest(state.tips)):
                return []
            if last.summary_count > state.count:  # truncated, or shallow (as it should)
                log.log(
                    logging.INFO if state.shallow else logging.WARNING,
                    "line %s holds %s, fewer than the %d this node signed at %s; %s",
                    line, count(state.count, "entry", "entries"), last.summary_count, last.ts,
                    "it is shallow: no state signed until a full sync deepens it"
                    if state.shallow else "no state signed (run `lifeline-mesh verify`)",
                )  # fmt: skip
                return []
        return state_statements(identity, line, state, stamp)

    return await notary.sign_state(identity.node_id, line, make)


async def sign_unsigned(store: Store, identity: NodeIdentity, now: str) -> list[Attestation]:
    """Attest every entry that has no author signature and no import statement as
    "imported by" this node at ``now`` (custody, not authorship)."""
    notary = await _file_notary(store, "signing unsigned entries")

    def tx(conn: sqlite3.Connection) -> list[Attestation]:
        atts = [
            sign(identity, Role.IMPORTED, entry_id, now, ts)
            for entry_id, ts in unsigned_entries(conn)
        ]
        NotaryStore.insert_in(conn, atts)
        return atts

    return await notary.store.run_write(tx)


class AuthorHook:
    """Signs every local write as its author, in the write's own transaction. An ephemeral
    runner's hook also stores its ``enrolled`` statement with its signatures (once: the
    statement is the same item every time), so they never travel without it."""

    def __init__(
        self,
        identity: NodeIdentity,
        enrolled: Attestation | None = None,
    ) -> None:
        self.identity = identity
        self.enrolled = enrolled

    async def __call__(self, store: Store, entries: Sequence[Entry]) -> None:
        if entries:
            atts = [sign(self.identity, Role.AUTHOR, e.id, e.ts) for e in entries]
            notary = await notary_of(store)  # the line's, on its backend
            await notary.add([*self._enrollment(), *atts])
            await notary.keep_seals(seal(self.identity, atts, utc_now()))

    async def prepare(self, store: Store) -> None:
        await notary_of(store)  # a line file's attestation tables exist (a hub's do)

    def in_transaction(self, conn: Any, entries: Sequence[Entry]) -> Awaitable[None] | None:
        atts = [sign(self.identity, Role.AUTHOR, e.id, e.ts) for e in entries]
        rows = [*self._enrollment(), *atts] if atts else atts
        seals = seal(self.identity, atts, utc_now())  # none for a short write
        if isinstance(conn, LineWrite):  # a hub's line: the signatures commit with it too
            return _insert_pg(conn, rows, seals)
        NotaryStore.insert_in(conn, rows)
        keep_seals(conn, seals)
        return None

    def _enrollment(self) -> list[Attestation]:
        return [self.enrolled] if self.enrolled is not None else []


async def _insert_pg(write: LineWrite, atts: Sequence[Attestation], seals: Sequence[Seal]) -> None:
    from lifeline_mesh.notary.pg_storage import insert, keep_seals_pg

    await insert(write.conn, write.line_id, atts, with_entries=True)
    if seals:
        await keep_seals_pg(write.conn, write.line_id, seals)


def append_hook_factory(project: Home) -> AppendHook | None:
    """Entry point: sign every local write when the project has a node identity."""
    home = NodeHome.of(project)
    identity = NodeIdentity.maybe_of(home)
    if identity is None:
        return None
    cert = runner_certificate(home)
    enrolled = enrollment_statement(identity, cert) if cert else None
    return AuthorHook(identity, enrolled)  # the notary goes with each line's backend
