"""The MCP contract: one pydantic model per tool result, so the SDK publishes each tool's
output schema and checks every structured result against it before it leaves the server.

The models only describe what the views already answered: the JSON an agent gets is the
same field for field (and in the same order) as before they existed. A field named in a
model's ``optional`` is left out of the JSON unless it was set — an entry's signature that
could not be decoded has no ``role``, a recorded write has no ``proposal`` — the rest are
always there, ``null`` included. The session models are in
:mod:`lifeline_mesh.mcp.shapes_sessions`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

if TYPE_CHECKING:
    from lifeline.entry import Entry
    from lifeline_mesh.mcp.proposals import Proposal

__all__ = [
    "AuditFailure",
    "DecisionView",
    "DraftView",
    "EntryFields",
    "EntryView",
    "History",
    "LineAudit",
    "LineStatus",
    "MemoStats",
    "NodeStatus",
    "ProposalList",
    "ProposalView",
    "RecallHit",
    "RecallView",
    "ResumeThread",
    "ResumeView",
    "Shape",
    "SignatureItem",
    "Signatures",
    "VerifySummary",
    "WriteResult",
    "WriteStatus",
]

WriteStatus = Literal["recorded", "duplicate", "proposed", "already-proposed"]


class Shape(BaseModel):
    """A part of a tool result. Fields in ``optional`` appear only when set."""

    model_config = ConfigDict(extra="forbid")
    optional: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name in self.optional - self.model_fields_set:
                data.pop(name, None)
        return data


class EntryFields(Shape):
    """One ledger entry: its content-addressed id and its fields."""

    id: str = Field(description="the entry id (sha256 of its content, hex)")
    ts: str = Field(description="when it was written (ISO-8601, UTC)")
    kind: str = Field(description="decision, fix, note, open, checkpoint, correction, ...")
    author: str
    agent: str
    provider: str
    model: str
    summary: str
    body: str
    parents: list[str] = Field(description="ids of the entries it builds on")
    dedup_key: str | None = Field(description="the idempotency key it was written with")

    @classmethod
    def of(cls, entry: Entry) -> EntryFields:
        return cls.model_validate(entry.to_dict())


class SignatureItem(Shape):
    """One node signature on an entry, checked now."""

    optional = frozenset(
        {"role", "node_id", "ts", "problem", "signer", "signer_revoked_at", "note"}
    )

    role: str | None = Field(default=None, description="author, imported, witness or state")
    node_id: str | None = None
    ts: str | None = None
    valid: bool
    problem: str | None = Field(default=None, description="why it is not valid")
    signer: str | None = Field(default=None, description="known, unknown or revoked")
    signer_revoked_at: str | None = None
    note: str | None = None


class Signatures(Shape):
    """The node signatures on an entry; ``signed``: a valid author signature exists."""

    signed: bool
    items: list[SignatureItem]


class EntryView(EntryFields):
    """An entry in full: its fields, its line, children and signatures."""

    line: str
    children: list[str]
    intact: bool = Field(description="its id matches its content")
    signatures: Signatures


class History(Shape):
    """Entries since a point, oldest first."""

    line: str
    since: str | None
    count: int
    more: bool = Field(description="the limit cut the list")
    entries: list[EntryFields]


class LineStatus(Shape):
    name: str
    entries: int
    tips: int
    shared: bool = Field(description="synced with peers (else private to this node)")


class MemoStats(Shape):
    """`context` answers given by this server since it started."""

    hits: int = Field(description="answered from memory: no process changed the line since")
    misses: int = Field(description="computed from the line")


class NodeStatus(Shape):
    """This node: id, lines, pending proposals, the write policy in force, static peers."""

    node_id: str | None
    root: str
    agent: str
    default_line: str
    lines: list[LineStatus]
    pending_proposals: int
    policy: str = Field(description="where the write policy in force comes from")
    peers: list[str]
    context_memo: MemoStats


class AuditFailure(Shape):
    check: str
    subject: str
    detail: str


class LineAudit(Shape):
    """The notary's audit of one line, summarised."""

    line: str
    ok: bool
    entries: int
    signed: int
    unsigned: int
    attestations: int
    failures: int
    failures_shown: list[AuditFailure]
    notes: dict[str, int] = Field(description="notes counted by rule")


class VerifySummary(Shape):
    ok: bool
    node_id: str | None
    lines: list[LineAudit]
    full_report: str


class DraftView(Shape):
    """What a proposal would record."""

    kind: str
    summary: str
    body: str
    author: str
    agent: str
    provider: str
    model: str
    parents: list[str] | None
    dedup_key: str | None


class DecisionView(Shape):
    verdict: Literal["approved", "rejected"]
    decided_at: str
    decided_by: str
    reason: str
    entry_id: str | None = Field(description="the entry an approval recorded")


class ProposalView(Shape):
    """A write kept aside until a human approves or rejects it."""

    optional = frozenset({"decision"})

    id: str
    created_at: str
    line: str
    status: Literal["pending", "approved", "rejected"]
    idempotency_key: str | None
    draft: DraftView
    decision: DecisionView | None = None

    @classmethod
    def of(cls, proposal: Proposal) -> ProposalView:
        return cls.model_validate(proposal.to_dict())


class ProposalList(Shape):
    proposals: list[ProposalView]


class WriteResult(Shape):
    """What a write did, and the rule of the write policy that applied."""

    optional = frozenset({"entry", "proposal", "next_step"})

    status: WriteStatus
    policy_rule: str
    entry: EntryFields | None = Field(default=None, description="the entry, when recorded")
    proposal: ProposalView | None = Field(default=None, description="the proposal, when proposed")
    next_step: str | None = Field(default=None, description="how a proposal is reviewed")


class RecallHit(Shape):
    id: str
    score: float
    superseded: bool
    summary: str
    excerpt: str


class RecallView(Shape):
    """Entries most relevant to a query; ``abstained`` when no entry matched well enough."""

    line: str
    query: str
    hits: list[RecallHit]
    abstained: bool


class ResumeThread(Shape):
    """A thread's live checkpoint."""

    thread: str
    label: str
    checkpoint: str = Field(description="the checkpoint entry's id")
    ts: str
    blocks: dict[str, list[str]] = Field(description="goal, done, next, blocked, tried")


class ResumeView(Shape):
    line: str
    threads: list[ResumeThread]
