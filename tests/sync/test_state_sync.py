"""State statements over real gRPC sessions (decision 0015): one per session that admitted
entries, however many batches it took; none for a no-op session; and a first-wave peer
(which does not open the `statements` set) still syncs, and never receives one. A session
that moved only statements ends with a closing round that signs nothing and tells the
sender what was refused; with a peer from before that rule, neither side takes one
(decision 0126)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from lifeline.entry import Entry, format_ts
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.line_session import LineSession
from lifeline_mesh.node.root import NODE_LIMITS, Node
from lifeline_mesh.notary.attestation_set import STATEMENTS
from lifeline_mesh.notary.rules import Policy, state_findings
from lifeline_mesh.notary.sign import state_statements
from lifeline_mesh.notary.statement import decode
from lifeline_mesh.notary.states import StateOf, fingerprint
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.transport.authz import SessionPeer
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import make_node, serving, write


class FirstWaveNode(Node):
    """A peer of the first wave: it reconciles attestations and entries only."""

    @asynccontextmanager
    async def session(
        self, line: str, peer: SessionPeer | None = None, source: str | None = None, **kw: bool
    ) -> AsyncIterator[LineSession]:
        async with super().session(line, peer, source, **kw) as opened:
            opened.sets = [s for s in opened.sets if s.name != STATEMENTS]
            yield opened


def _signed(root: Path, cls: type[Node] = Node, **kwargs: object) -> Node:
    root.mkdir(parents=True)
    NodeIdentity.generate().save(NodeHome(root).key_path)
    node = make_node(root, **kwargs)
    return node if cls is Node else cls(NodeHome(root), insecure=True, **kwargs)  # type: ignore[arg-type]


def _states(node: Node) -> list[str]:
    conn = sqlite3.connect(node.home.line_path("ledger"))
    try:
        return [r[0] for r in conn.execute("SELECT node_id FROM statements WHERE role = 'state'")]
    finally:
        conn.close()


async def test_a_whole_line_received_in_many_batches_gets_one_state(tmp_path: Path) -> None:
    origin = _signed(tmp_path / "origin")
    small = NODE_LIMITS.__class__(fetch_chunk=50, max_frame_bytes=64 << 10)
    joiner = _signed(tmp_path / "joiner", limits=small)
    await write(origin, chain(1200, "o", body="x" * 200))
    async with serving(origin) as (_server, address):
        [first] = await joiner.sync(address, ["ledger"])
        assert first.entries_received == 1200
        assert _states(joiner) == [joiner.identity.node_id]  # type: ignore[union-attr]
        # it learned nothing, and stored the joiner's statement in the closing round
        assert _states(origin) == [joiner.identity.node_id]  # type: ignore[union-attr]
        assert first.attestations_added == 0 and first.entries_added == 1200
        [second] = await joiner.sync(address, ["ledger"])
        assert second.round_trips == 1 and second.signatures_sent == 0
        assert second.entries_received == 0
        for _ in range(3):
            [again] = await joiner.sync(address, ["ledger"])
            assert again.round_trips == 1 and again.signatures_sent == 0
    assert len(_states(origin)) == 1 and len(_states(joiner)) == 1


async def test_a_first_wave_peer_syncs_without_the_statements_set(tmp_path: Path) -> None:
    old = _signed(tmp_path / "old", FirstWaveNode)
    new = _signed(tmp_path / "new")
    await write(old, chain(30, "old"))
    await write(new, chain(20, "new"))
    async with serving(old) as (_server, address):
        [report] = await new.sync(address, ["ledger"])
        assert report.entries_sent == 20 and report.entries_received == 30
        [again] = await new.sync(address, ["ledger"])
        assert again.round_trips == 1 and again.signatures_sent == 0
    new_id = new.identity.node_id  # type: ignore[union-attr]
    assert new_id in _states(new)  # the new node witnessed what it learned
    # the old one never received a kind it would refuse (this stand-in, built from today's
    # code, stores a state of its own where a first-wave node signed a receipt)
    assert new_id not in _states(old)
    async with serving(new) as (_server, address):
        [back] = await old.sync(address, ["ledger"])  # the old node dialing the new one
        assert back.entries_received == 0 and back.signatures_received == 0
    assert new_id not in _states(old)


async def _store_pair(
    node: Node, entries: list[Entry], gap_s: float, identity: NodeIdentity | None = None
) -> None:
    """Put in ``node``'s line the pair the statement order bug (fixed in 6b440fc) left: its
    statement of the whole line, then one of all but the last entry, ``gap_s`` later
    (signed by ``identity``, by default ``node``'s)."""
    identity = identity or node.identity
    assert identity is not None
    first = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=30)
    pair = [
        state_statements(
            identity,
            "ledger",
            StateOf(n, fingerprint(e.id for e in entries[:n]), (entries[n - 1].id,)),
            format_ts(first + dt.timedelta(seconds=k * gap_s)),
        )[0]
        for k, n in enumerate((len(entries), len(entries) - 1))
    ]
    async with node.open_line("ledger") as store:
        await NotaryStore.attach(store)  # type: ignore[arg-type]
        await store.run_write(lambda conn: NotaryStore.insert_in(conn, pair))  # type: ignore[attr-defined]


async def test_a_pair_of_statements_made_together_in_the_wrong_order_is_accepted(
    tmp_path: Path,
) -> None:
    """Decision 0035: a node whose store holds the bug's pair (a larger count dated 1 ms
    before a smaller one) is no longer refused by its peers, and `verify` notes the pair."""
    origin, joiner = _signed(tmp_path / "origin"), _signed(tmp_path / "joiner")
    entries = chain(30, "o")
    await write(origin, entries)
    await _store_pair(origin, entries, gap_s=0.001)
    async with serving(origin) as (_server, address):
        [first] = await joiner.sync(address, ["ledger"])
        assert first.entries_received == 30
        assert _states(joiner).count(origin.identity.node_id) == 2  # type: ignore[union-attr]
        # the joiner's own statement crossed in the closing round, admitted there
        assert joiner.identity.node_id in _states(origin)  # type: ignore[union-attr]
        [again] = await joiner.sync(address, ["ledger"])
        assert again.round_trips == 1  # in sync: nothing refused, nothing left over
        assert again.signatures_sent == again.signatures_received == 0
    async with joiner.open_line("ledger") as store:
        rows = await store.run_read(  # type: ignore[attr-defined]
            lambda c: [bytes(r[0]) for r in c.execute("SELECT item FROM statements")]
        )
    by_id = {e.id: e for e in entries}
    findings = state_findings([decode(r) for r in rows], by_id, Policy())
    assert [f.check for f in findings if f.severity == "fail"] == []
    assert [f.check for f in findings] == ["reordered-states"]


async def test_a_smaller_count_signed_seconds_later_is_still_a_rollback(tmp_path: Path) -> None:
    origin, joiner = _signed(tmp_path / "origin"), _signed(tmp_path / "joiner")
    entries = chain(30, "o")
    await write(origin, entries)
    await _store_pair(origin, entries, gap_s=2.0)
    async with serving(origin) as (_server, address):
        [report] = await joiner.sync(address, ["ledger"])
    # refused alone, the session goes on (decision 0112): the earlier, larger claim is kept
    assert report.refused == 1 and "rolled back" in report.refusals[0]
    assert report.entries_added == 30
    assert _states(joiner).count(origin.identity.node_id) == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("old_serves", [True, False])
async def test_a_node_from_before_the_closing_round_gets_the_statements_next_time(
    tmp_path: Path, old_serves: bool
) -> None:
    """Decision 0059: a peer whose hello does not offer ``closing`` (a node from before it)
    gets no closing round, either way round: the statements travel with the next session."""
    before = dataclasses.replace(NODE_LIMITS, closing_round=False)
    old, new = _signed(tmp_path / "old", limits=before), _signed(tmp_path / "new")
    await write(old, chain(10, "old"))
    await write(new, chain(5, "new"))
    server, client = (old, new) if old_serves else (new, old)
    async with serving(server) as (_server, address):
        [first] = await client.sync(address, ["ledger"])
        assert first.entries_added == (10 if client is new else 5)
        # each signed its state; neither statement crossed in this session
        for node, other in ((old, new), (new, old)):
            assert other.identity.node_id not in _states(node)  # type: ignore[union-attr]
        [second] = await client.sync(address, ["ledger"])
        assert second.signatures_sent == second.signatures_received == 1
        assert second.entries_added == 0 and second.attestations_added == 1
        [third] = await client.sync(address, ["ledger"])
        assert third.round_trips == 1 and third.signatures_received == 0
    assert sorted(_states(old)) == sorted(_states(new))


async def test_a_session_that_moved_only_statements_closes_and_signs_nothing(
    tmp_path: Path,
) -> None:
    """Decision 0126: a session that moves statements and no entry (a third node's, as a hub
    relays them) ends with a closing round, in which neither side signs (it admitted no
    entry), and the sync after it is the no-op."""
    origin, joiner = _signed(tmp_path / "origin"), _signed(tmp_path / "joiner")
    entries = chain(20, "o")
    await write(origin, entries)
    async with serving(origin) as (_server, address):
        await joiner.sync(address, ["ledger"])
        third = NodeIdentity.generate()
        await _store_pair(origin, entries, gap_s=0.001, identity=third)
        before = (sorted(_states(origin)), sorted(_states(joiner)))
        [relayed] = await joiner.sync(address, ["ledger"])
        assert relayed.entries_received == relayed.entries_sent == 0
        assert relayed.signatures_received == 2 and relayed.attestations_added == 2
        assert relayed.refused == relayed.refused_there == 0
        assert sorted(_states(origin)) == before[0]  # nothing signed on either side
        assert sorted(_states(joiner)) == sorted([*before[1], third.node_id, third.node_id])
        for _ in range(2):
            [again] = await joiner.sync(address, ["ledger"])
            assert again.round_trips == 1 and again.bytes_sent < 200
            assert again.signatures_sent == again.signatures_received == 0
    assert sorted(_states(origin)) == sorted(_states(joiner))


@pytest.mark.parametrize(
    ("rule_sender", "rule_receiver"), [(True, True), (False, True), (True, False)]
)
async def test_a_statement_refused_alone_is_told_to_its_sender_with_the_rule(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, rule_sender: bool, rule_receiver: bool
) -> None:
    """Decision 0126: a session that moved only statements, one of them refused (a rolled-back
    count), ends with a closing round when both hellos offer ``closing-any``, and the sender
    is told. When either is from before it, neither takes the round (each decides from both
    hellos): the session ends at once and nothing waits for frames that never come; and a
    session that moves entries still ends with one, as before."""
    limits = {True: NODE_LIMITS, False: dataclasses.replace(NODE_LIMITS, closing_any=False)}
    sender = _signed(tmp_path / "sender", limits=limits[rule_sender])
    receiver = _signed(tmp_path / "receiver", limits=limits[rule_receiver])
    entries = chain(20, "s")
    await write(sender, entries)
    caplog.set_level(logging.WARNING, logger="lifeline_mesh.sync.closing")
    async with serving(receiver) as (_server, address):
        [first] = await sender.sync(address, ["ledger"])
        assert first.entries_sent == 20
        # the receiver's statement crossed in the closing round: the first rule, kept
        assert receiver.identity.node_id in _states(sender)  # type: ignore[union-attr]
        await _store_pair(sender, entries, gap_s=2.0)
        [pushed] = await sender.sync(address, ["ledger"])
    assert pushed.entries_sent == pushed.entries_received == 0
    assert pushed.signatures_sent == 2
    told = rule_sender and rule_receiver
    assert pushed.refused_there == (1 if told else 0)
    assert ["rolled back" in r for r in pushed.refusals_there] == ([True] if told else [])
    assert "closing round given up" not in caplog.text
