"""The adversarial corpus: every forgery is named by verify and refused at admission, but
a future-dated signature, which is held back with its entry alone (decision 0084)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.store.sqlite import SqliteStore
from lifeline.validate import check_admissible
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.audit import LineReport, audit_line
from lifeline_mesh.notary.provenance import FUTURE_DETAIL, Outcome
from lifeline_mesh.notary.rules import Policy
from lifeline_mesh.notary.signers import FileSigners
from lifeline_mesh.notary.statement import FIRST_WAVE, decode
from lifeline_mesh.notary.storage import NotaryStore
from tests.support.notary_corpus import CASES, NOTE_CASES, Corpus, N, at, build

# Where a receiver stops each forgery: at the attestation batch, or at the entries.
STAGE = {
    "ts-edited": "entries",
    "summary-edited": "entries",
    "non-member-signature": "attestations",
    "signature-copied": "attestations",
    "resigned-under-other-node": "attestations",
    "backdated-before-parent": "entries",
    "backdated-before-witness": "attestations",
    "future-dated": "held back",  # alone, not with its batch (decision 0084)
    "truncated": "attestations",
    "truncated-and-covered": "attestations",
    "state-rollback": "statements",
    "state-forged": "statements",
}


async def _audit(store: SqliteStore, corpus: Corpus) -> LineReport:
    signers = FileSigners.load(NodeHome(corpus.root), corpus.a.node_id)
    return await audit_line(store, "ledger", signers, Policy(local_node_id=corpus.a.node_id))


async def _receive(
    notary: NotaryStore, store: SqliteStore, entries: Sequence[Entry], items: Sequence[bytes]
) -> None:
    """What a receiving session does with one peer's batch: attestations and statements
    (each to its own set), then entries."""
    first = [i for i in items if decode(i).role in FIRST_WAVE]
    await notary.admit(first)
    await notary.statements().admit([i for i in items if decode(i).role not in FIRST_WAVE])
    await notary.check_entries(entries)
    for entry in entries:
        check_admissible(entry)
    await store.append_many(entries)


async def _receiver(path: Path, corpus: Corpus) -> tuple[SqliteStore, NotaryStore]:
    store = await SqliteStore.open(path)
    signers = FileSigners([corpus.a.node_id, corpus.b.node_id])
    notary = await NotaryStore.attach(store, signers=signers, clock=lambda: at(60 * N + 100))
    return store, notary


async def _contents(corpus: Corpus) -> tuple[list[Entry], list[bytes]]:
    async with await SqliteStore.open(corpus.path) as store:
        entries = [e async for e in store.stream()]
        notary = await NotaryStore.attach(store)
        items = await notary.items() + await notary.statements().items()
    return entries, items


async def test_the_clean_corpus_verifies_and_is_admitted(tmp_path: Path) -> None:
    corpus = await build(tmp_path / "a")
    async with await SqliteStore.open(corpus.path) as store:
        report = await _audit(store, corpus)
    assert report.findings == []
    assert (report.verdict.signed, report.verdict.unsigned) == (N + 1, 0)
    entries, items = await _contents(corpus)
    store, notary = await _receiver(tmp_path / "b.db", corpus)
    async with store:
        await _receive(notary, store, entries, items)
        assert await store.count() == N + 1
        assert await notary.keys() == sorted(await notary.keys())
        assert sorted(await notary.fetch([i for _k, i in await notary.keys()])) == sorted(items)
        assert await notary.admit(items) == 0  # idempotent


@pytest.mark.parametrize("name", sorted(CASES))
async def test_each_forgery_is_detected_and_named_by_verify(tmp_path: Path, name: str) -> None:
    corpus = await build(tmp_path)
    async with await SqliteStore.open(corpus.path) as store:
        expected = await CASES[name](corpus, store)
        report = await _audit(store, corpus)
    assert {f.check for f in report.failures} == expected
    assert not report.ok


@pytest.mark.parametrize("name", sorted(n for n in CASES if STAGE[n] != "held back"))
async def test_each_forgery_is_refused_at_admission(tmp_path: Path, name: str) -> None:
    corpus = await build(tmp_path / "a")
    async with await SqliteStore.open(corpus.path) as source:
        await CASES[name](corpus, source)
    entries, items = await _contents(corpus)
    store, notary = await _receiver(tmp_path / "b.db", corpus)
    async with store:
        with pytest.raises(InvalidEntry) as caught:
            await _receive(notary, store, entries, items)
        assert "refused" in str(caught.value) or "altered" in str(caught.value)
        assert await store.count() == 0
        if STAGE[name] == "attestations":
            assert await notary.count() == 0  # one bad item: nothing of the batch is stored
        if STAGE[name] == "statements":
            assert await notary.statements().count() == 0


async def test_a_future_dated_signature_is_held_back_with_its_entry_not_the_batch(
    tmp_path: Path,
) -> None:
    """Dated after the receiver's clock plus the tolerance (its signer's clock may be
    ahead): the receiver stores the rest of the batch and the other entries, and records
    the held-back copy with its sender. Once its clock is within the tolerance of that
    date, the witness rule judges it (an honest node ahead is taken then: see
    tests/mesh/test_clock_skew.py)."""
    corpus = await build(tmp_path / "a")
    async with await SqliteStore.open(corpus.path) as source:
        await CASES["future-dated"](corpus, source)
    entries, items = await _contents(corpus)
    first = [i for i in items if decode(i).role in FIRST_WAVE]
    later = next(e for e in entries if e.summary == "from the future")  # at 60 N + 7200
    signers = FileSigners([corpus.a.node_id, corpus.b.node_id])

    def receiver(now: str) -> NotaryStore:
        return NotaryStore(store, signers=signers, clock=lambda: now, source="node-b")

    async with await SqliteStore.open(tmp_path / "b.db") as store:
        notary = receiver(at(60 * N + 100))
        assert await notary.admit(first) == len(first) - 1
        added = (await notary.admit_entries(entries, [])).added
        assert later.id not in added and len(added) == len(entries) - 1
        [row] = await notary.sources()
        assert (row.entry_id, row.source, row.outcome) == (later.id, "node-b", Outcome.REFUSED)
        assert row.detail == FUTURE_DETAIL
        # 200 s before its date it is within the 300 s tolerance of this clock, and the
        # rule that bounds it for good applies: a witness held it 2 h before that date
        notary = receiver(at(60 * N + 7000))
        with pytest.raises(InvalidEntry, match="after a witness held it"):
            await notary.admit(first)


@pytest.mark.parametrize("name", sorted(NOTE_CASES))
async def test_each_note_case_is_named_and_admitted(tmp_path: Path, name: str) -> None:
    corpus = await build(tmp_path / "a")
    async with await SqliteStore.open(corpus.path) as store:
        expected = await NOTE_CASES[name](corpus, store)
        report = await _audit(store, corpus)
    assert report.ok and {f.check for f in report.findings} == expected
    assert {f.severity for f in report.findings} == {"note"}
    entries, items = await _contents(corpus)
    store, notary = await _receiver(tmp_path / "b.db", corpus)
    async with store:
        await _receive(notary, store, entries, items)
        assert await notary.statements().count() == 1


async def test_one_bad_item_spoils_the_whole_batch(tmp_path: Path) -> None:
    corpus = await build(tmp_path / "a")
    _entries, items = await _contents(corpus)
    store, notary = await _receiver(tmp_path / "b.db", corpus)
    async with store:
        bad = bytearray(items[-1])
        bad[-1] ^= 1
        with pytest.raises(InvalidEntry, match=f"attestation {len(items) - 1} of the batch"):
            await notary.admit([*items[:-1], bytes(bad)])
        assert await notary.count() == 0
        assert await notary.admit(items) == len(items)
