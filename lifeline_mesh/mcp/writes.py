"""Writes under the write policy: record, propose or refuse; approve and reject proposals.

Every write re-reads the policy (an edit applies at once; a broken file refuses the write).
An idempotency key becomes the entry's ``dedup_key``: a retried call returns what the first
one recorded or proposed. Approval appends through :class:`~lifeline.ledger.Ledger` with the
node's append hooks, so the entry is signed like any local write; its dedup key makes a
crash between "appended" and "decision recorded" safe to retry.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from lifeline.entry import Entry
from lifeline.errors import ConfigError
from lifeline.ledger import Draft, utc_now
from lifeline_mesh.mcp.policy import Mode, PolicyDenied, load_policy
from lifeline_mesh.mcp.proposals import Proposal, ProposalBook
from lifeline_mesh.mcp.shapes import EntryFields, ProposalView, WriteResult, WriteStatus
from lifeline_mesh.mcp.workspace import Workspace

__all__ = ["Outcome", "WriteGate"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a write did: ``recorded``, ``duplicate`` (the key was already recorded),
    ``proposed`` or ``already-proposed``; and the rule of the policy that applied."""

    status: WriteStatus
    rule: str
    entry: Entry | None = None
    proposal: Proposal | None = None

    def result(self) -> WriteResult:
        """What the write tools answer."""
        if self.proposal is not None:
            pid = self.proposal.id
            return WriteResult(
                status=self.status,
                policy_rule=self.rule,
                proposal=ProposalView.of(self.proposal),
                next_step=f"a human reviews it: `lifeline-mesh approve {pid}` "
                f"or `lifeline-mesh reject {pid} --reason ...`",
            )
        if self.entry is not None:
            return WriteResult(
                status=self.status,
                policy_rule=self.rule,
                entry=EntryFields.of(self.entry),
            )
        return WriteResult(status=self.status, policy_rule=self.rule)


class WriteGate:
    """The one path by which MCP writes (and CLI approvals) reach a line."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.book = ProposalBook(ws.home)

    async def submit(self, draft: Draft, line: str | None = None) -> Outcome:
        name = self.ws.line_name(line)
        policy = load_policy(self.ws.home)
        ruling = policy.decide(draft.agent, draft.kind)
        if ruling.mode is Mode.DENY:
            raise PolicyDenied(
                f"the write policy denies agent {draft.agent!r} writing a {draft.kind!r} entry "
                f"(rule {ruling.rule} in {policy.source}); "
                "ask the node's owner to change the policy, or leave this to a human"
            )
        async with self.ws.store(name) as store:
            if draft.dedup_key is not None:
                earlier = await store.by_dedup_key(draft.dedup_key)
                if earlier is not None:
                    return Outcome("duplicate", ruling.rule, entry=earlier)
            ledger = self.ws.ledger(store)
            if ruling.mode is Mode.DIRECT:
                entry, created = await ledger.append(draft)
                return Outcome("recorded" if created else "duplicate", ruling.rule, entry=entry)
            await ledger.build(draft)  # validate now, so approval cannot fail on the content
        proposal, created = await asyncio.to_thread(self.book.add, name, draft, utc_now())
        return Outcome(
            "proposed" if created else "already-proposed", ruling.rule, proposal=proposal
        )

    async def resolve(self, refs: list[str], line: str | None = None) -> tuple[str, ...]:
        """Full ids for ids or unique prefixes in ``line`` (NotFound/AmbiguousPrefix)."""
        async with self.ws.store(line) as store:
            return tuple([(await store.resolve(ref)).id for ref in refs])

    async def approve(self, ref: str, decided_by: str) -> tuple[Proposal, Entry]:
        proposal = await self._pending(ref)
        key = proposal.draft.dedup_key or f"proposal:{proposal.id}"
        async with self.ws.store(proposal.line) as store:
            entry, _created = await self.ws.ledger(store).append(
                replace(proposal.draft, dedup_key=key)
            )
        decided = await asyncio.to_thread(
            self.book.decide,
            proposal.id,
            "approved",
            decided_at=utc_now(),
            decided_by=decided_by,
            entry_id=entry.id,
        )
        return decided, entry

    async def reject(self, ref: str, decided_by: str, reason: str) -> Proposal:
        if not reason.strip():
            raise ConfigError("a rejection needs a reason (--reason); say why, for the trail")
        proposal = await self._pending(ref)
        return await asyncio.to_thread(
            self.book.decide,
            proposal.id,
            "rejected",
            decided_at=utc_now(),
            decided_by=decided_by,
            reason=reason.strip(),
        )

    async def _pending(self, ref: str) -> Proposal:
        proposal = await asyncio.to_thread(self.book.get, ref)
        if proposal.decision is not None:
            d = proposal.decision
            raise ConfigError(
                f"proposal {proposal.id} was already {d.verdict} at {d.decided_at} by "
                f"{d.decided_by}; a decision is final"
            )
        return proposal
