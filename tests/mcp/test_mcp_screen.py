"""The MCP server answers every line on stdin: JSON-RPC parse and invalid-request errors for
lines the SDK would drop, and requests holding a lone surrogate; errors echo a short prefix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lifeline_mesh.mcp.boundary import MAX_ERROR_CHARS, bounded
from tests.support.clirun import lifeline
from tests.support.mcp_client import INIT

pytestmark = pytest.mark.timeout(90)

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _exchange(root: Path, lines: list[str]) -> list[dict[str, Any]]:
    """Send ``lines`` raw after the handshake and read one answer per line (every line
    here deserves one), then close stdin; returns the answers after initialize's."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "mcp", "--root", str(root), "--agent", "raw"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    payload = "\n".join([json.dumps(INIT), json.dumps(INITIALIZED), *lines]) + "\n"
    proc.stdin.write(payload.encode("utf-8", "surrogatepass"))
    proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in range(1 + len(lines))]
    proc.stdin.close()
    proc.wait(timeout=60)
    return answers[1:]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    assert lifeline(tmp_path, "init").returncode == 0
    return tmp_path


def test_a_line_that_is_not_json_gets_a_parse_error(root: Path) -> None:
    answers = _exchange(root, ["hello there", '{"jsonrpc": "2.0", "id": 5, "method": "ping"}'])
    errors = [a for a in answers if "error" in a]
    assert errors and errors[0]["id"] is None and errors[0]["error"]["code"] == -32700
    assert any(a.get("id") == 5 and "result" in a for a in answers)  # and it goes on serving


def test_json_that_is_no_jsonrpc_message_gets_invalid_request(root: Path) -> None:
    answers = _exchange(root, ['{"hello": 1}', "[1, 2]"])
    codes = [a["error"]["code"] for a in answers if "error" in a]
    assert codes == [-32600, -32600]


def test_a_lone_surrogate_gets_an_answer(root: Path) -> None:
    call = '{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "\\ud800"}}'
    answers = _exchange(root, [call, '{"jsonrpc": "2.0", "id": 10, "method": "ping"}'])
    assert answers[0]["id"] is None and answers[0]["error"]["code"] == -32700
    assert answers[1]["id"] == 10 and "result" in answers[1]


def test_error_messages_echo_only_a_short_prefix(root: Path) -> None:
    huge = "x" * 5_000_000
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call"}
    call["params"] = {"name": "entry", "arguments": {"id": huge}}
    answers = _exchange(root, [json.dumps(call)])
    answer = next(a for a in answers if a.get("id") == 3)
    assert len(json.dumps(answer)) < 2_000, json.dumps(answer)[:300]


def test_bounded_cuts_long_messages() -> None:
    assert bounded("abc") == "abc"
    cut = bounded("y" * 10_000)
    assert len(cut) <= MAX_ERROR_CHARS and cut.endswith("(10000 characters; the rest cut)")
