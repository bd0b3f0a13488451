"""Received batches overlap: batch k+1 is verified while batch k is stored (sync/driver.py).

A bad signature in a later batch is refused alone (decision 0111): the rest of its batch
and of the session is stored. Past the receiver's ``max_refused`` the session is aborted
cleanly: every batch before the bad one is stored whole, the bad item never, and the
receiver keeps serving.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.errors import LifelineError
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.root import Node
from lifeline_mesh.notary import verifier
from lifeline_mesh.notary.intake import Vouched
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.notary.statement import Attestation, Role, sign
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.session import SessionLimits
from tests.support.sync_helpers import history, make_node, serving

N = 120


def _chain(n: int) -> list[Entry]:
    out: list[Entry] = []
    for k in range(n):
        out.append(
            Entry.create(
                ts=f"2026-02-01T10:{k // 60:02d}:{k % 60:02d}Z",
                kind="note",
                summary=f"pipelined {k}",
                body=f"entry {k}",
                parents=(out[-1].id,) if out else (),
            )
        )
    return out


class _Recorder:
    """Wraps NotaryStore.prepare_each/commit_each: what each batch held, and when it ran."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.prepared: list[tuple[float, list[bytes]]] = []  # (start, item ids)
        self.refused: list[tuple[float, list[bytes]]] = []  # batches with an item refused
        self.committed: list[tuple[float, list[bytes]]] = []  # (end, item ids)
        prepare, commit = NotaryStore.prepare_each, NotaryStore.commit_each

        async def slow_prepare(
            notary: NotaryStore, items: Sequence[Attestation], vouched: Vouched | None = None
        ) -> tuple[list[Attestation], list[str]]:
            started = time.monotonic()
            ids = [i.id for i in items]
            atts, refused = await prepare(notary, items, vouched)
            (self.refused if refused else self.prepared).append((started, ids))
            return atts, refused

        async def slow_commit(
            notary: NotaryStore, atts: Sequence[Attestation]
        ) -> tuple[int, list[str]]:
            await asyncio.sleep(0.05)  # a slow disk: the next batch is checked meanwhile
            added = await commit(notary, atts)
            self.committed.append((time.monotonic(), [a.id for a in atts]))
            return added

        monkeypatch.setattr(NotaryStore, "prepare_each", slow_prepare)
        monkeypatch.setattr(NotaryStore, "commit_each", slow_commit)


async def _stored_ids(node_root: Path) -> set[bytes]:
    node = make_node(node_root)
    async with node.open_line("ledger") as store:
        notary = await NotaryStore.attach(store)  # type: ignore[arg-type]
        return {k for _, k in await notary.keys()}


async def _with_forgery(tmp_path: Path) -> tuple[Node, Attestation]:
    identity, _ = NodeIdentity.load_or_create(NodeHome(tmp_path / "a"))
    entries = _chain(N)
    # Small frames: the attestations travel in many batches (~15 items each).
    a = make_node(tmp_path / "a", limits=SessionLimits(max_frame_bytes=4096))
    async with a.open_line("ledger") as store:
        await store.append_many(entries)
        await sign_entries(store, identity, entries)
        # A forged author attestation, dated in the middle of the line: a valid shape, a
        # signature that does not verify. Stored directly (add() trusts its caller).
        good = sign(identity, Role.AUTHOR, entries[70].id, "2026-02-01T10:01:10.500000Z")
        forged = replace(good, signature=bytes(64))
        await (await NotaryStore.attach(store)).add([forged])  # type: ignore[arg-type]
    return a, forged


@pytest.mark.parametrize("offload", [True, False], ids=["worker-process", "in-process"])
async def test_a_bad_signature_is_refused_alone_and_the_rest_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offload: bool
) -> None:
    if offload:
        monkeypatch.setattr(verifier, "MIN_OFFLOAD", 1)  # every batch goes to the workers
    a, forged = await _with_forgery(tmp_path)
    recorder = _Recorder(monkeypatch)
    b = make_node(tmp_path / "b")
    async with serving(b) as (server, address):
        [report] = await a.sync(address, ["ledger"])
    [served] = server.reports
    assert served.refused == 1 and "does not verify" in served.refusals[0], served
    assert report.refused == 0  # the sender is not told (b logs it)
    [(_at, bad_batch)] = recorder.refused
    assert forged.id in bad_batch
    stored = await _stored_ids(tmp_path / "b")
    assert forged.id not in stored and set(bad_batch) - {forged.id} <= stored
    # entry 70 keeps its good signature: it and every other entry are stored
    assert len(await history(b)) == N


@pytest.mark.parametrize("offload", [True, False], ids=["worker-process", "in-process"])
async def test_past_max_refused_a_later_batch_ends_the_session_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offload: bool
) -> None:
    if offload:
        monkeypatch.setattr(verifier, "MIN_OFFLOAD", 1)
    a, forged = await _with_forgery(tmp_path)
    recorder = _Recorder(monkeypatch)
    b = make_node(tmp_path / "b", limits=SessionLimits(max_refused=0))
    async with serving(b) as (_, address):
        with pytest.raises(LifelineError, match="does not verify") as caught:
            await a.sync(address, ["ledger"])
        assert "max_refused" in str(caught.value)

    [(refused_at, bad_batch)] = recorder.refused
    assert forged.id in bad_batch
    stored = await _stored_ids(tmp_path / "b")
    assert forged.id not in stored
    committed = [ids for _, ids in recorder.committed]
    assert stored == {i for ids in committed for i in ids}, "what was committed is stored"
    assert len(committed) >= 2 and stored
    # The overlap happened: the bad batch was being checked before its predecessor was
    # stored, and that predecessor was still stored.
    assert refused_at < recorder.committed[-1][0]
    assert await history(b) == []  # the entries come after the attestations: none arrived

    # The receiver keeps serving: without the forgery, the same peer syncs in full.
    async with a.open_line("ledger") as store:
        await store.run_write(  # type: ignore[attr-defined]
            lambda conn: conn.execute("DELETE FROM attestations WHERE id = ?", (forged.id,))
        )
    async with serving(b) as (_, address):
        await a.sync(address, ["ledger"])
    assert len(await history(b)) == N
    assert len(await _stored_ids(tmp_path / "b")) >= N  # N author signatures + receipts
