"""Proposals and the decision trail: approve puts the entry in the line, decisions are
final and append-only, and a rewrite behind the API's back is detected."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lifeline.errors import ConfigError, NotFound
from lifeline.home import Home
from lifeline.ledger import Draft
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.mcp.policy import PolicyDenied
from lifeline_mesh.mcp.proposals import ProposalBook
from lifeline_mesh.mcp.workspace import Workspace
from lifeline_mesh.mcp.writes import WriteGate


async def _project(root: Path, policy: dict[str, object]) -> WriteGate:
    path = Home(root).line_path("ledger")
    path.parent.mkdir(parents=True)
    await (await SqliteStore.open(path)).close()
    NodeHome(root).policy_path.write_text(json.dumps(policy))
    return WriteGate(Workspace.open(NodeHome(root), agent="bot", author="ann"))


def _draft(summary: str = "Use SQLite", key: str | None = None) -> Draft:
    return Draft(
        kind="decision",
        summary=summary,
        body="one file per line",
        agent="bot",
        author="ann",
        dedup_key=key,
    )


async def _count(root: Path) -> int:
    async with await SqliteStore.open(Home(root).line_path("ledger"), create=False) as store:
        return await store.count()


async def test_propose_then_approve_records_once_with_the_agent(tmp_path: Path) -> None:
    gate = await _project(tmp_path, {"default": "propose"})
    first = await gate.submit(_draft(key="k"))
    again = await gate.submit(_draft(key="k"))
    assert (first.status, again.status) == ("proposed", "already-proposed")
    assert first.proposal is not None and again.proposal is not None
    assert again.proposal.id == first.proposal.id
    assert await _count(tmp_path) == 0  # a proposal is not in the line

    decided, entry = await gate.approve(first.proposal.id[:6], "lead")
    assert decided.status == "approved" and decided.decision is not None
    assert decided.decision.entry_id == entry.id and decided.decision.decided_by == "lead"
    assert (entry.agent, entry.author, entry.dedup_key) == ("bot", "ann", "k")
    assert await _count(tmp_path) == 1
    # A retry of the agent's write after approval finds the recorded entry.
    retried = await gate.submit(_draft(key="k"))
    assert retried.status == "duplicate" and retried.entry == entry


async def test_decisions_are_final(tmp_path: Path) -> None:
    gate = await _project(tmp_path, {"default": "propose"})
    a = (await gate.submit(_draft("A"))).proposal
    b = (await gate.submit(_draft("B"))).proposal
    assert a is not None and b is not None
    rejected = await gate.reject(b.id, "lead", "not now")
    assert rejected.decision is not None and rejected.decision.reason == "not now"
    with pytest.raises(ConfigError, match="already rejected"):
        await gate.approve(b.id, "lead")
    await gate.approve(a.id, "lead")
    with pytest.raises(ConfigError, match="already approved"):
        await gate.reject(a.id, "lead", "changed my mind")
    with pytest.raises(ConfigError, match="needs a reason"):
        await gate.reject(a.id, "lead", " ")
    with pytest.raises(NotFound, match="no proposal"):
        await gate.approve("ffff", "lead")
    book = ProposalBook(NodeHome(tmp_path))
    assert [p.status for p in book.find()] == ["approved", "rejected"]
    assert book.check_trail() == []
    # The book refuses a second decision even when called directly.
    with pytest.raises(ConfigError, match="already approved"):
        book.decide(a.id, "rejected", decided_at="t", decided_by="x", reason="r")


async def test_trail_cannot_be_rewritten_and_tampering_is_detected(tmp_path: Path) -> None:
    gate = await _project(tmp_path, {"default": "propose"})
    proposal = (await gate.submit(_draft())).proposal
    assert proposal is not None
    await gate.reject(proposal.id, "lead", "duplicate of an older decision")
    conn = sqlite3.connect(NodeHome(tmp_path).proposals_path, isolation_level=None)
    for sql in (
        "UPDATE decisions SET verdict = 'approved'",
        "DELETE FROM decisions",
        "UPDATE proposals SET draft = '{}'",
        "DELETE FROM proposals",
    ):
        with pytest.raises(sqlite3.IntegrityError, match=r"append-only|immutable|never deleted"):
            conn.execute(sql)
    # Someone with file access drops the guard and rewrites history: the chain shows it.
    conn.execute("DROP TRIGGER decisions_immutable")
    conn.execute("UPDATE decisions SET reason = 'looks fine'")
    conn.close()
    assert ProposalBook(NodeHome(tmp_path)).check_trail() == [
        f"decision #1 on proposal {proposal.id} was altered or removed"
    ]
    shown = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "proposals", "--all", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert shown.returncode == 1
    assert f"{proposal.id}  rejected" in shown.stdout
    assert f"TRAIL: decision #1 on proposal {proposal.id} was altered" in shown.stdout


async def test_direct_deny_and_broken_policy(tmp_path: Path) -> None:
    gate = await _project(
        tmp_path, {"default": "direct", "agents": {"bot": {"kinds": {"release": "deny"}}}}
    )
    outcome = await gate.submit(_draft(key="x"))
    assert outcome.status == "recorded" and outcome.entry is not None
    assert (await gate.submit(_draft(key="x"))).status == "duplicate"
    with pytest.raises(PolicyDenied, match=r"denies agent 'bot' writing a 'release'.*agents\.bot"):
        await gate.submit(Draft(kind="release", summary="v1", agent="bot"))
    NodeHome(tmp_path).policy_path.write_text('{"default": "dirct"}')
    with pytest.raises(ConfigError, match="'dirct'; use one of"):
        await gate.submit(_draft("C"))
    assert await _count(tmp_path) == 1
