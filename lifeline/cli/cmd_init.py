"""`lifeline init`: create the line, and what lifeline-context's `init` also set up.

Its options are taken with the meaning they had there (decision 0136): ``--hooks`` adds the
Claude Code hooks (`lifeline hooks install claude-code`), ``--agent NAME`` writes the write
policy (``.lifeline/policy.json``) that lets that agent record checkpoints, features, fixes
and notes at once. ``--no-mcp`` and ``--no-policy`` are accepted: this ``init`` writes no
``.mcp.json`` at all, and a policy file only for ``--agent``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from lifeline.cli.common import Commands, creates_project, home_of, line_of, open_line
from lifeline.errors import ConfigError
from lifeline.fsutil import write_atomic
from lifeline.home import Home

__all__ = ["register"]

# What lifeline-context's `init --agent` let the agent record without a human's approval.
AGENT_DIRECT_KINDS = ("checkpoint", "feature", "fix", "note")


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "init",
        parents=[parent],
        help="create the line (default: ledger)",
        description="Create the line. lifeline-context's setup options are taken: --hooks "
        "and --agent do what they did there; --no-mcp and --no-policy change nothing, as "
        "this init writes no .mcp.json, and a write policy only for --agent.",
    )
    p.add_argument(
        "--hooks",
        action="store_true",
        help="also install our Claude Code hooks (the context at each session start, the "
        "transcript ingested at its end): `lifeline hooks install claude-code`",
    )
    p.add_argument(
        "--agent",
        metavar="NAME",
        help="write .lifeline/policy.json letting agent NAME (the --agent of its "
        "`lifeline-mesh mcp`) record checkpoint, feature, fix and note entries at once; "
        "its other writes, and every other agent's, stay proposals (an existing policy "
        "file is kept as it is)",
    )
    p.add_argument(
        "--no-mcp",
        action="store_true",
        help="taken from lifeline-context, changes nothing: no .mcp.json is written here "
        "(agents connect with `lifeline-mesh mcp`, docs/mcp.md)",
    )
    p.add_argument(
        "--no-policy",
        action="store_true",
        help="do not write .lifeline/policy.json: it is written only for --agent, so this "
        "changes nothing without it (the built-in policy applies: docs/mcp.md)",
    )
    p.set_defaults(func=cmd_init)
    creates_project(p)


async def cmd_init(args: argparse.Namespace) -> int:
    agent = _agent(args)
    name = line_of(args)
    home = home_of(args)
    existed = home.has_line(name)
    async with open_line(args, create=True):
        pass
    done = f"line {name!r} already exists" if existed else f"created line {name!r}"
    print(f"{done} at {home.lines.where(name)}")
    if agent is not None:
        _grant(home, agent, written=not args.no_policy)
    if args.hooks:
        from lifeline.cli.cmd_hooks import apply_hooks  # the sessions' modules only for it

        apply_hooks("claude-code", install=True)
    if not existed and sys.stdout.isatty():  # a person starting out, not a script
        print(_next_steps(home.root))
    return 0


def _agent(args: argparse.Namespace) -> str | None:
    if args.agent is None:
        return None
    agent = str(args.agent).strip()
    if not agent:
        raise ConfigError("--agent is empty; give the name its `lifeline-mesh mcp --agent` uses")
    return agent


def agent_policy(agent: str) -> dict[str, Any]:
    """The write policy `init --agent` writes: the built-in one (agents propose, checkpoints
    are recorded at once), and ``agent`` records :data:`AGENT_DIRECT_KINDS` at once."""
    return {
        "default": "propose",
        "kinds": {"checkpoint": "direct"},
        "agents": {agent: {"kinds": dict.fromkeys(AGENT_DIRECT_KINDS, "direct")}},
    }


def _grant(home: Home, agent: str, *, written: bool) -> None:
    path = home.policy_path
    kinds = ", ".join(AGENT_DIRECT_KINDS)
    if not written:
        print(
            f"lifeline: note: --no-policy: {home.relative(path)} not written, so agent "
            f"{agent!r} is not granted direct writes",
            file=sys.stderr,
        )
        return
    if path.exists() or path.is_symlink():
        grant = agent_policy(agent)["agents"]
        if _agents_in(path).get(agent) == grant[agent]:
            print(f"kept {path}: it lets {agent!r} record {kinds} entries at once")
            return
        print(
            f"kept {path} as it is; to let {agent!r} record {kinds} entries at once, add "
            f'under "agents": {json.dumps(grant)[1:-1]} (docs/mcp.md)'
        )
        return
    text = json.dumps(agent_policy(agent), indent=2) + "\n"
    write_atomic(path, text.encode("utf-8"))
    print(f"wrote {path}: agent {agent!r} records {kinds} entries at once (docs/mcp.md)")


def _agents_in(path: Path) -> dict[str, object]:
    """The ``agents`` of the policy file at ``path`` ({} when it cannot be read as one)."""
    try:
        agents = json.loads(path.read_text(encoding="utf-8")).get("agents")
    except (OSError, ValueError, AttributeError):
        return {}
    return agents if isinstance(agents, dict) else {}


def _next_steps(root: Path) -> str:
    """What a person who just made a line does next: write, read, let an agent in."""
    rows = [
        ('lifeline log --kind decision --summary "..." --body "why"', "record a decision"),
        ("lifeline context", "the current truth, as an agent reads it"),
        ("lifeline hooks install claude-code", "context at each session start (or codex, gemini)"),
        (
            f"claude mcp add lifeline -- lifeline-mesh mcp --root {shlex.quote(str(root))} "
            "--agent claude-code",
            "let an agent read and write it (docs/mcp.md)",
        ),
    ]
    return "next:\n" + "\n".join(f"  {command}\n      {what}" for command, what in rows)
