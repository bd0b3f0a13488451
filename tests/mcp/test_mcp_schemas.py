"""The MCP contract is typed: every tool lists an output schema with named fields, and every
structured result (of every tool, on a signed node with proposals and real sessions)
validates against the schema the server listed, and matches its own text block."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.mcp.server import build_server
from lifeline_mesh.mcp.workspace import Workspace
from tests.support.sessions_support import FIXTURES, run_cli

pytestmark = pytest.mark.timeout(180)

# The two tools that answer text (budgeted markdown, or a provider's prompt JSON): their
# answer is the text itself, so they publish no output schema and no structured copy.
TEXT_TOOLS = {"context", "brief"}


def _project(root: Path) -> Path:
    root.mkdir()
    made = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "init", "--new-mesh", "team", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    for args in (("init",), ("sessions", "ingest", str(FIXTURES / "codex"))):
        done = run_cli(root, *args)
        assert done.returncode == 0, done.stderr
    policy = {"default": "direct", "kinds": {"note": "propose"}}
    NodeHome(root).policy_path.write_text(json.dumps(policy))
    return root


class Checked:
    """Calls tools and checks each structured result against the listed schema."""

    def __init__(self, client: Client, schemas: dict[str, dict[str, Any]]) -> None:
        self.client = client
        self.schemas = schemas
        self.called: set[str] = set()

    async def __call__(self, tool: str, **args: Any) -> dict[str, Any]:
        result: CallToolResult = await self.client.call_tool(tool, args)
        block = result.content[0]
        assert isinstance(block, TextContent)
        assert not result.is_error, block.text
        out = result.structured_content
        assert out is not None
        jsonschema.Draft202012Validator(self.schemas[tool]).validate(out)
        assert json.loads(block.text) == out  # the text block says the same
        self.called.add(tool)
        return out


async def test_every_tool_lists_a_schema_and_its_results_validate(tmp_path: Path) -> None:
    root = _project(tmp_path / "p")
    ws = Workspace.open(NodeHome(root), agent="claude", author="dana")
    async with Client(build_server(ws), cache=None) as client:
        tools = (await client.list_tools()).tools
        schemas = {t.name: t.output_schema for t in tools if t.output_schema is not None}
        assert {t.name for t in tools} - set(schemas) == TEXT_TOOLS
        for name, schema in schemas.items():
            jsonschema.Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object" and schema["properties"], name
            assert schema.get("additionalProperties") is False, name  # no open dict
        call = Checked(client, schemas)

        recorded = await call("append", kind="decision", summary="Queue: SQS", body="FIFO")
        assert set(recorded) == {"status", "policy_rule", "entry"}  # no proposal keys
        proposed = await call("append", kind="note", summary="maybe Kafka")
        assert set(proposed) == {"status", "policy_rule", "proposal", "next_step"}
        assert "decision" not in proposed["proposal"]  # pending: no decision yet
        await call("correct", ids=[recorded["entry"]["id"][:10]], summary="Queue: Kafka")
        await call("checkpoint", thread="main", goal=["ship"], next=["tests"])

        shown = await call("entry", id=recorded["entry"]["id"])
        (signature,) = shown["signatures"]["items"]
        assert signature["role"] == "author" and signature["valid"] is True
        assert "problem" not in signature and "note" not in signature
        await call("history", limit=10)
        await call("recall", query="queue kafka")
        await call("resume")
        await call("mesh_status")
        await call("mesh_verify")
        await call("proposals", status="all")

        listed = await call("sessions_list")
        session_id = listed["sessions"][0]["id"]
        page = await call("session_show", id=session_id, limit=20)
        assert all(None not in item.values() for item in page["items"])  # unset: left out
        await call("sessions_unfinished")
        await call("sessions_search", query="lmstudio", limit=3)
        await call("session_bundle", id=session_id)
        await call("session_bundle", id=session_id, format="json")
        not_ready = await call("session_bundle")
        assert not_ready == {"ready": False, "why": "give a session id or a scope"}
        assert call.called == set(schemas)


async def test_a_result_that_breaks_its_schema_fails_the_check(tmp_path: Path) -> None:
    """The check above can fail: a status field of the wrong type is refused."""
    ws = Workspace.open(NodeHome(_project(tmp_path / "p")), agent="claude", author="dana")
    async with Client(build_server(ws), cache=None) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        schema = tools["mesh_status"].output_schema
        assert schema is not None
        good = (await client.call_tool("mesh_status", {})).structured_content
        assert good is not None
        jsonschema.Draft202012Validator(schema).validate(good)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(schema).validate({**good, "pending_proposals": "2"})
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(schema).validate({**good, "surprise": 1})
