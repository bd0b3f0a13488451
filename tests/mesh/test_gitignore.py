"""Keys never reach git: `.lifeline/.gitignore` on every init, repaired by serve; status and
serve warn of what git tracks already, and a tracked line or key is not written into or
served with."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lifeline.ignore import IGNORE_TEXT
from tests.support.mcp_client import call_tool, mcp_client, new_project, tool_error
from tests.support.mesh_procs import cli, git, serve
from tests.support.paths import REPO

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True, check=False).returncode != 0,
    reason="git is not installed",
)


TRANSCRIPT = (
    REPO
    / "tests/fixtures/transcripts/claude-code"
    / "daaain__claude-code-log__claude-code-log-sample__4e27c414-a885-46a0-b5c8-d58e1417377d.jsonl"
)


def test_git_add_all_stages_no_key_db_or_invite(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    cli("lifeline", tmp_path, "init")
    cli("lifeline", tmp_path, "--line", "research", "init")
    cli("lifeline", tmp_path, "log", "--kind", "note", "--summary", "first")
    cli("lifeline", tmp_path, "render")
    cli("lifeline_mesh", tmp_path, "init", "--new-mesh", "team")
    cli("lifeline_mesh", tmp_path, "invite")
    mesh = tmp_path / ".lifeline" / "mesh"
    for secret in ("ca.key", "node.key", "tls.key", "invites.json"):
        assert (mesh / secret).exists(), secret
    git(tmp_path, "add", "-A")
    staged = git(tmp_path, "ls-files").split()
    assert "LIFELINE.md" in staged
    assert [s for s in staged if s.startswith(".lifeline/")] == [".lifeline/.gitignore"]
    text = (tmp_path / ".lifeline" / ".gitignore").read_text()
    assert "ca.key" in text and text.startswith("#")  # says why


def test_mesh_init_alone_writes_the_ignore_file(tmp_path: Path) -> None:
    cli("lifeline_mesh", tmp_path, "init")
    assert (tmp_path / ".lifeline" / ".gitignore").read_text() == IGNORE_TEXT


def test_serve_restores_a_deleted_or_edited_ignore_file(tmp_path: Path) -> None:
    cli("lifeline_mesh", tmp_path, "init", "--new-mesh", "team")
    ignore = tmp_path / ".lifeline" / ".gitignore"
    ignore.write_text("# emptied by hand\n")
    with serve(tmp_path, "--no-discovery") as proc:
        assert ignore.read_text() == IGNORE_TEXT
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "restored" in err and ".gitignore" in err


def test_status_warns_when_git_tracks_a_secret(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    cli("lifeline_mesh", tmp_path, "init", "--new-mesh", "team")
    clean = cli("lifeline_mesh", tmp_path, "status")
    assert "warning" not in clean.stderr
    git(tmp_path, "add", "-f", ".lifeline/mesh/ca.key")
    out = cli("lifeline_mesh", tmp_path, "status")
    assert out.stderr.count("\n") == 1
    assert "git tracks 1 file that" in out.stderr and ".lifeline/mesh/ca.key" in out.stderr
    assert "git rm -r --cached .lifeline" in out.stderr
    report = json.loads(cli("lifeline_mesh", tmp_path, "status", "--json").stdout)
    assert report["tracked_by_git"] == [".lifeline/mesh/ca.key"]


def test_serve_warns_of_a_tracked_file_and_refuses_a_tracked_line_or_key(tmp_path: Path) -> None:
    """The ignore file `serve` restores does not untrack what git tracks already: a node
    whose files were committed (by hand, or before the ignore file) hears so from `serve`,
    once as it starts, not only from `status`. A tracked line or key is refused (decision
    0141): a clone carries its author's, and what the node takes in would be pushed with
    the repository, or the node would serve as its author."""
    git(tmp_path, "init", "-q")
    cli("lifeline", tmp_path, "init")
    cli("lifeline_mesh", tmp_path, "init", "--new-mesh", "team")
    cli("lifeline_mesh", tmp_path, "share", "ledger")
    with serve(tmp_path, "--no-discovery") as proc:
        proc.terminate()
        _, clean = proc.communicate(timeout=30)
    assert "git tracks" not in clean, clean
    (tmp_path / ".lifeline" / "policy.json").write_text('{"default": "deny"}\n')
    git(tmp_path, "add", "-f", ".lifeline/policy.json")
    with serve(tmp_path, "--no-discovery") as proc:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    warned = [line for line in err.splitlines() if "git tracks" in line]
    assert len(warned) == 1, err
    assert warned[0].startswith("warning: git tracks 1 file that must never be committed")
    assert ".lifeline/policy.json" in warned[0] and "git rm -r --cached" in warned[0]
    for tracked in (".lifeline/ledger.db", ".lifeline/mesh/node.key"):
        git(tmp_path, "add", "-f", tracked)
        refused = cli("lifeline_mesh", tmp_path, "serve", "--no-discovery", check=False)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert f"git tracks {tracked}" in refused.stderr
        git(tmp_path, "rm", "-q", "--cached", tracked)


def test_agent_sessions_are_not_written_into_a_line_git_tracks(tmp_path: Path) -> None:
    """A repository that commits `.lifeline/sessions.db` would receive its contributors'
    agent sessions, ingested by their hooks, with their next `git commit -a`."""
    git(tmp_path, "init", "-q")
    cli("lifeline", tmp_path, "--line", "sessions", "init")
    git(tmp_path, "add", "-f", ".lifeline/sessions.db")
    done = cli("lifeline", tmp_path, "sessions", "ingest", "--tool", "claude", str(TRANSCRIPT),
               check=False)  # fmt: skip
    assert done.returncode == 2 and "git tracks .lifeline/sessions.db" in done.stderr
    assert "git rm -r --cached .lifeline" in done.stderr


def test_status_outside_a_repository_reports_no_git(tmp_path: Path) -> None:
    cli("lifeline_mesh", tmp_path, "init")
    report = json.loads(cli("lifeline_mesh", tmp_path, "status", "--json").stdout)
    assert report["tracked_by_git"] is None


async def test_an_agent_s_write_into_a_line_git_tracks_is_refused(tmp_path: Path) -> None:
    """The MCP server writes for agents, as the hooks do: not into a line a repository
    carries (decision 0141)."""
    await new_project(tmp_path, {"default": "direct"})
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-f", ".lifeline/ledger.db")
    async with mcp_client(tmp_path) as client:
        said = await tool_error(client, "checkpoint", thread="db", next=["index"])
        assert "git tracks .lifeline/ledger.db" in said, said
        git(tmp_path, "rm", "-q", "--cached", ".lifeline/ledger.db")
        await call_tool(client, "checkpoint", thread="db", next=["index"])  # asked again
