"""A summary of ``lifeline-mesh verify`` for agents: the notary's audit of every line.

Runs :func:`lifeline_mesh.notary.audit.audit_line` on each line with the same signers and
default policy as the CLI, and keeps the answer short: counts per line, the failures (up to
a cap, each naming its rule and subject), and notes counted by rule.
"""

from __future__ import annotations

from itertools import islice

from lifeline.errors import ConfigError
from lifeline_mesh.mcp.shapes import AuditFailure, LineAudit, VerifySummary
from lifeline_mesh.mcp.workspace import Workspace
from lifeline_mesh.notary.audit import LineReport, audit_line
from lifeline_mesh.notary.rules import Policy
from lifeline_mesh.notary.signers import FileSigners

__all__ = ["FAILURES_SHOWN", "verify_summary"]

FAILURES_SHOWN = 20


def _line_summary(report: LineReport) -> LineAudit:
    v = report.verdict
    notes = report.log.notes  # counted as the audit ran: the findings are not read back
    return LineAudit(
        line=report.line,
        ok=report.ok,
        entries=v.entries,
        signed=v.signed,
        unsigned=v.unsigned,
        attestations=v.attestations,
        failures=report.log.fails,
        failures_shown=[
            AuditFailure(check=f.check, subject=f.subject, detail=f.detail)
            for f in islice(report.log.failures(), FAILURES_SHOWN)
        ],
        notes=dict(sorted(notes.items())),
    )


async def verify_summary(
    ws: Workspace, line: str | None, *, require_signed: bool = False, allow_unsigned: bool = False
) -> VerifySummary:
    """Audit one line (or every line): ok overall, and a summary per line."""
    lines = [ws.line_name(line)] if line else ws.home.line_names()
    if not lines:
        raise ConfigError(f"no lines under {ws.home.root}; create one with `lifeline init`")
    local = ws.node_id()
    signers = FileSigners.load(ws.home, local)
    policy = Policy(local, require_signed=require_signed, allow_unsigned=allow_unsigned)

    summaries: list[LineAudit] = []
    for name in lines:
        async with ws.store(name) as store:
            report = await audit_line(
                store, name, signers, policy, external_exists=ws.home.exists_in
            )
        summaries.append(_line_summary(report))
    return VerifySummary(
        ok=all(s.ok for s in summaries),
        node_id=local,
        lines=summaries,
        full_report="run `lifeline-mesh verify` (add --json) for every finding",
    )
