"""`lifeline-mesh proposals | approve | reject`: the human side of the write policy."""

from __future__ import annotations

import argparse
import asyncio

from lifeline.cli.common import Commands, add_json_option, default_author, print_json, root_of
from lifeline.wording import one_line
from lifeline_mesh.cli.home_arg import node_home
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.mcp.proposals import Proposal, ProposalBook
from lifeline_mesh.mcp.workspace import Workspace
from lifeline_mesh.mcp.writes import WriteGate

__all__ = ["register"]


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "proposals", parents=[parent], help="list proposals written by agents (pending first)"
    )
    p.add_argument(
        "--all", action="store_true", help="include approved and rejected ones (the trail)"
    )
    add_json_option(p)
    p.set_defaults(func=cmd_proposals)

    p = sub.add_parser(
        "approve", parents=[parent], help="record a pending proposal in its line (signed)"
    )
    p.add_argument("id", metavar="ID|PREFIX", help="the proposal (see `lifeline-mesh proposals`)")
    p.add_argument("--by", default=None, help="who approves (default: $LIFELINE_AUTHOR or $USER)")
    add_json_option(p, "print the decision and entry as JSON")
    p.set_defaults(func=cmd_approve)

    p = sub.add_parser("reject", parents=[parent], help="refuse a pending proposal, with a reason")
    p.add_argument("id", metavar="ID|PREFIX", help="the proposal (see `lifeline-mesh proposals`)")
    p.add_argument("--reason", required=True, help="why (kept in the audit trail)")
    p.add_argument("--by", default=None, help="who rejects (default: $LIFELINE_AUTHOR or $USER)")
    add_json_option(p, "print the decision as JSON")
    p.set_defaults(func=cmd_reject)


def _gate(args: argparse.Namespace) -> WriteGate:
    home = NodeHome(root_of(args).resolve())
    return WriteGate(Workspace.open(home, agent="human", author=default_author()))


def _line(p: Proposal) -> str:
    """One proposal for a terminal: what an agent or a commit wrote, escaped (decision 0128)."""
    d = p.draft
    head = one_line(f"{p.id}  {p.status:<8}  {p.created_at}  {p.line}  {d.agent}  {d.kind}: ")
    head += one_line(d.summary)
    if p.decision is not None:
        dec = p.decision
        extra = f" -> {dec.entry_id}" if dec.entry_id else f" ({dec.reason})"
        head += "\n    " + one_line(f"{dec.verdict} by {dec.decided_by} at {dec.decided_at}{extra}")
    return head


async def cmd_proposals(args: argparse.Namespace) -> int:
    book = ProposalBook(node_home(args))
    found = await asyncio.to_thread(book.find, status=None if args.all else "pending")
    problems = await asyncio.to_thread(book.check_trail)
    if args.json:
        print_json({"proposals": [p.to_dict() for p in found], "trail_problems": problems})
    else:
        if not found:
            print("no pending proposals" if not args.all else "no proposals")
        for proposal in found:
            print(_line(proposal))
        for problem in problems:
            print(f"TRAIL: {one_line(problem)}")
    return 1 if problems else 0


async def cmd_approve(args: argparse.Namespace) -> int:
    gate = _gate(args)
    proposal, entry = await gate.approve(args.id, args.by or default_author())
    if args.json:
        print_json({"proposal": proposal.to_dict(), "entry": entry.to_dict()})
    else:
        print(f"approved {proposal.id}: recorded {entry.kind} {entry.id} in line {proposal.line!r}")
    return 0


async def cmd_reject(args: argparse.Namespace) -> int:
    gate = _gate(args)
    proposal = await gate.reject(args.id, args.by or default_author(), args.reason)
    if args.json:
        print_json({"proposal": proposal.to_dict()})
    else:
        print(f"rejected {proposal.id}: {args.reason}")
    return 0
