"""Builds a signed line and the adversarial variants the notary must catch.

Node A is the local node (its key is the project's node.key), B is a member listed in
members.json, C is an outsider. A writes six decisions through the ledger with the notary's
append hook (the installed entry point); B's entry reaches A and A witnesses it; B witnesses
A's entries; A signs a summary of the line. Each tampering below is what an attacker with
write access to the database (or a rogue peer) could do.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lifeline.entry import Entry, format_ts
from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.sign import summarize, witness
from lifeline_mesh.notary.statement import Attestation, Role, decode, sign, tips_digest
from lifeline_mesh.notary.storage import NotaryStore, table_of

__all__ = ["CASES", "NOTE_CASES", "Corpus", "N", "at", "build", "insert_raw"]

BASE = datetime(2026, 1, 10, 10, 0, tzinfo=UTC)
N = 6


def at(seconds: float) -> str:
    return format_ts(BASE + timedelta(seconds=seconds))


@dataclass
class Corpus:
    root: Path
    a: NodeIdentity
    b: NodeIdentity
    c: NodeIdentity
    entries: list[Entry] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return Home(self.root).line_path("ledger")


async def build(root: Path) -> Corpus:
    corpus = Corpus(root, NodeIdentity.generate(), NodeIdentity.generate(), NodeIdentity.generate())
    corpus.a.save(NodeHome(root).key_path)
    members = {"members": [{"node_id": corpus.b.node_id, "role": "member"}]}
    NodeHome(root).members_path.write_text(json.dumps(members))
    times = iter(at(60 * k) for k in range(N))
    async with await SqliteStore.open(corpus.path) as store:
        ledger = Ledger(store, clock=lambda: next(times), hooks=load_append_hooks(Home(root)))
        for k in range(N):
            entry, _ = await ledger.append(Draft(kind="decision", summary=f"decision {k}"))
            corpus.entries.append(entry)
        from_b = Entry.create(
            ts=at(60 * N), kind="note", summary="from b", parents=(corpus.entries[-1].id,)
        )
        await receive_from(store, corpus, from_b, corpus.b, seen_at=at(60 * N + 5))
        notary = await NotaryStore.attach(store)
        ids = sorted(e.id for e in corpus.entries)
        await notary.add([sign(corpus.b, Role.WITNESS, str(len(ids)), at(60 * N + 2), *ids)])
        await summarize(store, corpus.a, "ledger", at(60 * N + 10))
    return corpus


async def receive_from(
    store: SqliteStore, corpus: Corpus, entry: Entry, signer: NodeIdentity, seen_at: str
) -> None:
    """``entry`` written and signed by ``signer`` reaches A, which witnesses it."""
    await store.append(entry)
    notary = await NotaryStore.attach(store)
    await notary.add([sign(signer, Role.AUTHOR, entry.id, entry.ts)])
    await witness(store, corpus.a, [entry.id], seen_at)


def insert_raw(conn: sqlite3.Connection, item: bytes) -> None:
    """Put bytes into the attestation table as a forger with database access would."""
    att = decode(item)  # shape only; the signature is deliberately not checked
    conn.execute(
        f"INSERT INTO {table_of(att.role)} (id, sort_key, role, subject, node_id, ts, item)"
        " VALUES (?,?,?,?,?,?,?)",
        (hashlib.sha256(item).digest(), att.sort_key, att.role.value, att.subject,
         att.node_id, att.ts, item),
    )  # fmt: skip


def _author_item(conn: sqlite3.Connection, entry_id: str) -> bytes:
    row = conn.execute(
        "SELECT item FROM attestations WHERE role = 'author' AND subject = ?", (entry_id,)
    ).fetchone()
    return bytes(row[0])


# -- the tamperings: each returns the checks verify must name -------------------------------


async def ts_edited(c: Corpus, store: SqliteStore) -> set[str]:
    eid = c.entries[3].id
    await store.run_write(
        lambda k: k.execute("UPDATE entries SET ts = ? WHERE id = ?", (at(30), eid))
    )
    return {"ts-mismatch"}


async def summary_edited(c: Corpus, store: SqliteStore) -> set[str]:
    eid = c.entries[2].id
    await store.run_write(
        lambda k: k.execute("UPDATE entries SET summary = 'decided otherwise' WHERE id = ?", (eid,))
    )
    return {"id-mismatch"}


async def non_member_signature(c: Corpus, store: SqliteStore) -> set[str]:
    forged = Entry.create(
        ts=at(400), kind="decision", summary="outsider", parents=(c.entries[-1].id,)
    )
    await store.append(forged)
    await (await NotaryStore.attach(store)).add([sign(c.c, Role.AUTHOR, forged.id, forged.ts)])
    return {"unknown-signer"}


async def signature_copied(c: Corpus, store: SqliteStore) -> set[str]:
    src, dst = c.entries[1].id, c.entries[4].id

    def tx(conn: sqlite3.Connection) -> None:
        item = _author_item(conn, src).replace(src.encode(), dst.encode())
        conn.execute("DELETE FROM attestations WHERE role = 'author' AND subject = ?", (dst,))
        insert_raw(conn, item)

    await store.run_write(tx)
    # the copy signs nothing: the entry it replaced is unsigned on a signed line
    return {"bad-signature", "unsigned"}


async def resigned_other_node(c: Corpus, store: SqliteStore) -> set[str]:
    eid = c.entries[2].id
    draft = Attestation(Role.AUTHOR, eid, c.entries[2].ts, c.b.node_id, (), c.c.public_key, b"")
    forged = Attestation(
        Role.AUTHOR, eid, draft.ts, c.b.node_id, (), c.c.public_key, c.c.sign(draft.statement)
    )
    await store.run_write(lambda conn: insert_raw(conn, forged.item))
    return {"signer-mismatch"}


async def backdated_before_parent(c: Corpus, store: SqliteStore) -> set[str]:
    """A's own code dates a decision two days before the line's tips, and A signs it (the
    ledger itself dates a write no earlier than its parents)."""
    early = Entry.create(
        ts=at(-2 * 86_400),
        kind="decision",
        summary="we always did it this way",
        parents=tuple(sorted(await store.tips())),
    )
    await store.append(early)
    await (await NotaryStore.attach(store)).add([sign(c.a, Role.AUTHOR, early.id, early.ts)])
    return {"ts-before-parent"}


async def backdated_before_witness(c: Corpus, store: SqliteStore) -> set[str]:
    old = Entry.create(ts=at(-3 * 86_400), kind="decision", summary="agreed long ago (honest)")
    await receive_from(store, c, old, c.b, seen_at=at(60 * N + 30))
    return {"possible-backdate"}


async def future_dated(c: Corpus, store: SqliteStore) -> set[str]:
    later = Entry.create(ts=at(60 * N + 7200), kind="note", summary="from the future")
    await receive_from(store, c, later, c.b, seen_at=at(60 * N + 40))
    return {"future-dated"}


async def truncated(c: Corpus, store: SqliteStore) -> set[str]:
    tips = await store.tips()

    def tx(conn: sqlite3.Connection) -> None:
        for tip in tips:
            (parent_json,) = conn.execute(
                "SELECT parents FROM entries WHERE id = ?", (tip,)
            ).fetchone()
            for gone in [tip, *json.loads(parent_json)]:
                conn.execute("DELETE FROM entries WHERE id = ?", (gone,))

    await store.run_write(tx)
    # A later summary by the same node now claims fewer entries: a rollback, signed.
    await summarize(store, c.a, "ledger", at(60 * N + 20))
    return {"truncated"}


async def truncated_and_covered(c: Corpus, store: SqliteStore) -> set[str]:
    """The attacker also deletes every attestation naming the removed entries."""
    expected = await truncated(c, store)
    kept = {e.id for e in c.entries[:-1]}

    def tx(conn: sqlite3.Connection) -> None:
        for att_id, item in conn.execute("SELECT id, item FROM attestations").fetchall():
            if any(e not in kept for e in decode(bytes(item)).entry_ids()):
                conn.execute("DELETE FROM attestations WHERE id = ?", (att_id,))

    await store.run_write(tx)
    return expected


def _state(c: Corpus, ts: str, count: int, tips: list[str]) -> Attestation:
    """A state statement signed by B (a member)."""
    fp = "0" * 32
    return sign(c.b, Role.STATE, "ledger", ts, str(count), fp, tips_digest(tips), "1/1", *tips)


async def state_rollback(c: Corpus, store: SqliteStore) -> set[str]:
    """B signs that it held the whole line, then later that it held fewer entries."""
    tips = await store.tips()
    full = _state(c, at(60 * N + 12), N + 1, tips)
    fewer = _state(c, at(60 * N + 14), N - 2, [c.entries[N - 3].id])
    await (await NotaryStore.attach(store)).add([full, fewer])
    return {"rollback"}


async def state_forged(c: Corpus, store: SqliteStore) -> set[str]:
    """B's state statement with its count raised and B's signature kept."""
    honest = _state(c, at(60 * N + 12), N + 1, await store.tips())
    forged = honest.item.replace(f"{len(str(N + 1))}:{N + 1}\n".encode(), b"2:99\n", 1)
    await store.run_write(lambda conn: insert_raw(conn, forged))
    return {"bad-signature"}


async def state_unknown_tips(c: Corpus, store: SqliteStore) -> set[str]:
    """B signs a state whose tip this store has never seen: it proves nothing here, and it
    may be in flight; a note, not a failure (and admitted)."""
    stranger = hashlib.sha256(b"never written here").hexdigest()
    await (await NotaryStore.attach(store)).add([_state(c, at(60 * N + 12), N + 9, [stranger])])
    return {"unknown-tips"}


Case = Callable[[Corpus, SqliteStore], Awaitable[set[str]]]
CASES: dict[str, Case] = {
    "ts-edited": ts_edited,
    "summary-edited": summary_edited,
    "non-member-signature": non_member_signature,
    "signature-copied": signature_copied,
    "resigned-under-other-node": resigned_other_node,
    "backdated-before-parent": backdated_before_parent,
    "backdated-before-witness": backdated_before_witness,
    "future-dated": future_dated,
    "truncated": truncated,
    "truncated-and-covered": truncated_and_covered,
    "state-rollback": state_rollback,
    "state-forged": state_forged,
}
# Cases verify names as notes (the report stays ok) and a receiver admits.
NOTE_CASES: dict[str, Case] = {"state-unknown-tips": state_unknown_tips}
