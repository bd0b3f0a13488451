"""`lifeline-mesh mcp install CLIENT` writes the project's client configuration: the entry it
writes starts a server the MCP SDK's real client talks to; lifeline-context's `lifeline-mcp`
entry is replaced and the file's other servers kept; a foreign entry of the same name, or a
file that is not JSON, is left as it is with a clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.support.mcp_client import call_tool

pytestmark = pytest.mark.timeout(120)

# What lifeline-context 0.6.1's `init` writes (its .mcp.json, verbatim), with a server of the
# user's beside it.
LC_MCP = {
    "mcpServers": {
        "lifeline": {
            "command": "lifeline-mcp",
            "args": [],
            "env": {"LIFELINE_DB": ".lifeline/ledger.db"},
        },
        "github": {"command": "gh-mcp", "args": ["--repo", "x"]},
    },
    "note": "kept",
}


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "mcp", "install", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(tmp_path), "init"],
        check=True,
        capture_output=True,
    )
    return tmp_path


async def _context_through(entry: dict[str, object], cwd: Path) -> str:
    """Start the server as the client would from ``entry`` and read the context."""
    args = [str(a) for a in entry["args"]]  # type: ignore[attr-defined]
    # the entry's command is this installation's `lifeline-mesh` (or its name on PATH):
    # run the same module with this interpreter, which the test environment holds
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "lifeline_mesh", *args], cwd=str(cwd)
    )
    async with Client(params, cache=None) as client:
        wrote = await call_tool(client, "append", kind="open", summary="which queue?")
        assert wrote["status"] == "proposed"  # the built-in policy: an agent proposes
        await call_tool(client, "checkpoint", thread="queues", next=["compare SQS and Kafka"])
        result = await client.call_tool("context", {})
        return str(result.content[0].text)  # type: ignore[union-attr]


async def test_claude_code_replaces_lifeline_context_s_entry_and_keeps_the_rest(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    (root / ".mcp.json").write_text(json.dumps(LC_MCP, indent=2))
    done = _run(root, "claude-code", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["changed"] and report["replaced"] == "lifeline-mcp"
    data = json.loads((root / ".mcp.json").read_text())
    assert data["note"] == "kept" and data["mcpServers"]["github"] == LC_MCP["mcpServers"]["github"]
    entry = data["mcpServers"]["lifeline"]
    assert entry["args"] == ["mcp", "--root", str(root.resolve()), "--agent", "claude-code"]
    assert Path(entry["command"]).name == "lifeline-mesh"
    elsewhere = tmp_path_factory.mktemp("elsewhere")  # --root names the project: any cwd
    assert "compare SQS and Kafka" in await _context_through(entry, elsewhere)
    history = subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(root), "history", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [e["agent"] for e in json.loads(history.stdout)] == ["claude-code"]
    again = _run(root, "claude-code")
    assert again.returncode == 0 and "nothing changed" in again.stdout
    assert json.loads((root / ".mcp.json").read_text()) == data


def test_a_foreign_entry_or_a_broken_file_is_left_as_it_is(root: Path) -> None:
    cursor = root / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    theirs = {"mcpServers": {"lifeline": {"command": "something-else"}}}
    cursor.write_text(json.dumps(theirs))
    refused = _run(root, "cursor")
    assert refused.returncode == 2 and "--force" in refused.stderr, refused.stderr
    assert json.loads(cursor.read_text()) == theirs
    beside = _run(root, "cursor", "--name", "lifeline-mesh")
    assert beside.returncode == 0, beside.stderr
    servers = json.loads(cursor.read_text())["mcpServers"]
    assert servers["lifeline"] == theirs["mcpServers"]["lifeline"]
    assert servers["lifeline-mesh"]["args"][-2:] == ["--agent", "cursor"]
    forced = _run(root, "cursor", "--force", "--agent", "bot", "--line", "notes")
    assert forced.returncode == 0, forced.stderr
    args = json.loads(cursor.read_text())["mcpServers"]["lifeline"]["args"]
    assert args[-4:] == ["--agent", "bot", "--line", "notes"]

    vscode = root / ".vscode" / "mcp.json"
    vscode.parent.mkdir()
    vscode.write_text('{"servers": {')  # cut off mid-write
    broken = _run(root, "vscode")
    assert broken.returncode == 2 and "is not valid JSON" in broken.stderr
    assert vscode.read_text() == '{"servers": {'
    vscode.unlink()
    made = _run(root, "vscode")
    assert made.returncode == 0, made.stderr
    entry = json.loads(vscode.read_text())["servers"]["lifeline"]
    assert entry["type"] == "stdio" and entry["args"][-1] == "copilot"
    bad_name = _run(root, "vscode", "--name", "a b")
    assert bad_name.returncode == 2 and "--name" in bad_name.stderr


def test_codex_prints_its_toml_and_writes_nothing(root: Path) -> None:
    import tomllib

    done = _run(root, "codex")
    assert done.returncode == 0, done.stderr
    table = tomllib.loads(done.stdout)["mcp_servers"]["lifeline"]
    assert table["args"] == ["mcp", "--root", str(root.resolve()), "--agent", "codex"]
    assert "config.toml" in done.stderr
    assert not (root / ".codex").exists()


def test_a_folder_without_a_project_is_refused(tmp_path: Path) -> None:
    done = _run(tmp_path, "claude-code")
    assert done.returncode == 2 and "lifeline init" in done.stderr
    assert not (tmp_path / ".mcp.json").exists()


def test_a_link_a_clone_carries_out_of_the_project_is_refused(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A repository can carry `.mcp.json` as a link to a JSON file of the user's (a Docker
    `config.json` with registry passwords): installing would copy that file into the
    project's `.mcp.json`, which gets committed. A link to a folder (`.vscode`) would put
    ours in another one. Both are refused, nothing read or written; a link that stays
    inside the project is followed and kept."""
    home = tmp_path_factory.mktemp("home")
    secret = home / "config.json"
    secret.write_text('{"auths": {"registry.example": {"auth": "dXNlcjpodW50ZXIy"}}}\n')
    (root / ".mcp.json").symlink_to(secret)
    refused = _run(root, "claude-code")
    assert refused.returncode == 2 and "leads out of the project" in refused.stderr
    assert str(secret) in refused.stderr, refused.stderr
    assert (root / ".mcp.json").is_symlink() and "lifeline" not in secret.read_text()

    (home / "elsewhere").mkdir()
    (root / ".vscode").symlink_to(home / "elsewhere")
    assert _run(root, "vscode").returncode == 2
    assert list((home / "elsewhere").iterdir()) == []

    (root / "config").mkdir()
    shared = root / "config" / "cursor-mcp.json"
    shared.write_text('{"mcpServers": {}}')
    (root / ".cursor").mkdir()
    (root / ".cursor" / "mcp.json").symlink_to("../config/cursor-mcp.json")
    done = _run(root, "cursor")
    assert done.returncode == 0, done.stderr
    assert (root / ".cursor" / "mcp.json").is_symlink()
    assert "lifeline" in json.loads(shared.read_text())["mcpServers"]
