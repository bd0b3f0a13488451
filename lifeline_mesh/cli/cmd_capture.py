"""`lifeline-mesh capture`: proposals drafted from recent git commits that say why.

The drafts go through the write policy like an agent's writes (agent ``git-capture``): by
default they wait in `lifeline-mesh proposals` for a human to approve or reject them.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

from lifeline.capture import AGENT, GIT_LOG_FORMAT, commit_draft, parse_git_log
from lifeline.cli.common import (
    Commands,
    add_json_option,
    default_author,
    line_of,
    print_json,
    root_of,
)
from lifeline.errors import ConfigError
from lifeline.wording import count, one_line
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.mcp.workspace import Workspace
from lifeline_mesh.mcp.writes import WriteGate

__all__ = ["register"]


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "capture",
        parents=[parent],
        help="draft proposals from recent git commits whose message says why",
    )
    span = p.add_mutually_exclusive_group()
    span.add_argument("--last", type=int, default=20, help="the last N commits (default 20)")
    span.add_argument("--since", metavar="REV", help="the commits after REV (REV..HEAD)")
    p.add_argument("--repo", type=Path, help="the git work tree (default: the project root)")
    add_json_option(p, "machine-readable report")
    p.set_defaults(func=cmd_capture)


def _git_log(repo: Path, since: str | None, last: int) -> str:
    span = [f"{since}..HEAD"] if since else ["-n", str(max(last, 1))]
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "log", "--no-merges", f"--format={GIT_LOG_FORMAT}", *span],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except OSError as exc:
        raise ConfigError(f"cannot run git ({exc}); install git to capture commits") from exc
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ConfigError(f"git log in {repo} failed: {said}; capture needs a git work tree")
    return done.stdout


async def cmd_capture(args: argparse.Namespace) -> int:
    home = NodeHome(root_of(args).resolve())
    commits = parse_git_log(_git_log(args.repo or home.root, args.since, args.last))
    gate = WriteGate(Workspace.open(home, agent=AGENT, author=default_author()))
    rows: list[dict[str, Any]] = []
    for commit in commits:
        draft = commit_draft(commit)
        if draft is None:
            rows.append({"commit": commit.sha, "outcome": "no-why", "summary": commit.subject})
            continue
        outcome = await gate.submit(draft, line_of(args))
        rows.append(
            {
                "commit": commit.sha,
                "outcome": outcome.status,
                "summary": draft.summary,
                "proposal": outcome.proposal.id if outcome.proposal else None,
                "entry": outcome.entry.id if outcome.entry else None,
            }
        )
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        print(f"{row['commit'][:12]}  {row['outcome']:<16}  {one_line(row['summary'])}")
    drafted = sum(1 for r in rows if r["outcome"] == "proposed")
    print(
        f"{count(drafted, 'new proposal')}; review with `lifeline-mesh proposals`, then approve "
        "or reject"
    )
    return 0
