"""A sessions line for the viewer's tests and screenshots: the real transcript fixtures
(Claude Code with subagents and compactions, Codex, Gemini) plus one hostile Claude Code
session — script tags and HTML in a prompt, a tool call's input and its result, and a
password the ingest redacts — ingested by the real CLI (``lifeline sessions ingest``)."""

from __future__ import annotations

from pathlib import Path

from tests.support.sessions_support import claude_line, lay_out_home, run_cli, write_jsonl

__all__ = ["HOSTILE_NATIVE", "HOSTILE_PROMPT", "SUBAGENT_PARENT", "add_sessions"]

HOSTILE_NATIVE = "7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f"
HOSTILE_PROMPT = "<script>window.__pwned = 5</script> fix <b>login</b> password=hunter2-secret"
SUBAGENT_PARENT = "258c7280-ae70-4798-800f-63464d01a85d"  # a fixture with nested subagents


def _hostile(home: Path) -> None:
    cwd = "/home/alice/src/acme-api"
    write_jsonl(
        home / ".claude" / "projects" / "-home-alice-src-acme-api" / f"{HOSTILE_NATIVE}.jsonl",
        [
            claude_line("user", "u1", HOSTILE_PROMPT, cwd=cwd),
            claude_line(
                "assistant",
                "a1",
                [
                    {
                        "type": "tool_use",
                        "id": "toolu_hostile",
                        "name": "Bash",
                        "input": {"command": "echo '<img src=x onerror=\"window.__pwned=6\">'"},
                    }
                ],
                cwd=cwd,
            ),
            claude_line(
                "user",
                "u2",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_hostile",
                        "content": "<script>window.__pwned = 7</script> done",
                    }
                ],
                cwd=cwd,
            ),
            claude_line(
                "assistant",
                "a2",
                [
                    {
                        "type": "text",
                        "text": "Done: [click](javascript:window.__pwned=8) <svg onload=x>",
                    }
                ],
                stop_reason="end_turn",
                cwd=cwd,
            ),
        ],
    )


def add_sessions(root: Path, home: Path) -> None:
    """Ingest the fixtures and the hostile session into ``root``'s ``sessions`` line."""
    lay_out_home(home)
    _hostile(home)
    done = run_cli(root, "sessions", "ingest", "--all", home=home)
    assert done.returncode == 0, done.stderr
