"""The context reaches a model with the entries' text as written (docs/truth.md, "Text as
written"): `a < b`, `Vec<T>` and `&` unescaped, through the real `lifeline context` and the
MCP `context` and `resume` tools (the SDK's stdio client); only `<!--` is written `&lt;!--`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.types import TextContent

from tests.support.clirun import lifeline
from tests.support.mcp_client import mcp_client

pytestmark = pytest.mark.timeout(180)

SUMMARY = "Retry only when a < b && c > d"
BODY = "Use Vec<T> & Option<&str>; keep <!-- this visible"


def _cli(root: Path, *args: str) -> str:
    done = lifeline(root, *args, env={"LIFELINE_AUTHOR": "dana"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def _assert_as_written(text: str) -> None:
    assert SUMMARY in text, text
    assert "Use Vec<T> & Option<&str>; keep &lt;!-- this visible" in text, text
    assert "<!--" not in text  # an entry cannot hide the rest of a rendered context
    assert text.count("&lt;") == 1  # the comment opener, and nothing else


async def test_cli_and_mcp_context_carry_the_text_as_written(tmp_path: Path) -> None:
    _cli(tmp_path, "init")
    _cli(tmp_path, "log", "--kind", "decision", "--summary", SUMMARY, "--body", BODY)
    _cli(tmp_path, "checkpoint", "--thread", "main", "--next", "check that x < y")
    printed = _cli(tmp_path, "context")
    _assert_as_written(printed)
    assert "check that x < y" in printed
    anthropic = json.loads(_cli(tmp_path, "context", "--format", "anthropic"))
    _assert_as_written("".join(block["text"] for block in anthropic["system"]))
    async with mcp_client(tmp_path) as client:
        result = await client.call_tool("context", {})
        block = result.content[0]
        assert isinstance(block, TextContent) and not result.is_error, result
        assert block.text == printed  # the same bytes as the CLI
        resume = await client.call_tool("resume", {})
        assert not resume.is_error, resume
        assert resume.structured_content is not None
        assert "check that x < y" in json.dumps(resume.structured_content, ensure_ascii=False)
