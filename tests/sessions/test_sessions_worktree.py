"""The working tree beside a bundle: `git diff <start commit>` of the files the session
edited, read from this machine's checkout of the scope at resume time — through the real
CLI, on the real Codex rollout whose `session_meta` records its git commit, with a real git
repository made here standing in for the user's checkout (its commit and path written into
the rollout's `session_meta`, nothing else changed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.clirun import lifeline

CODEX = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "transcripts"
    / "codex"
    / (
        "AcidicSoil__codex-session-view__rollout-2025-11-17T15-30-28-"
        "019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
    )
)
NATIVE = "019a93b9-f380-7600-98ff-940e6b99603c"
EDITED = "components/chat/chat-helpers/index.ts"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> tuple[Path, str]:
    """A checkout of the rollout's repository: the edited file committed, then changed."""
    repo = tmp_path / "chatbot-ui"
    (repo / "components/chat/chat-helpers").mkdir(parents=True)
    git(repo.parent, "init", "-q", str(repo))
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    git(repo, "remote", "add", "origin", "git@github.com:AcidicSoil/chatbot-ui.git")
    (repo / EDITED).write_text("export const handleLocalChat = async () => {}\n")
    (repo / "README.md").write_text("untouched by the session\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "start")
    start = git(repo, "rev-parse", "HEAD")
    (repo / EDITED).write_text("export const handleLocalChat = async () => { stream() }\n")
    (repo / "README.md").write_text("changed, but not by the session\n")
    return repo, start


def _rollout(tmp_path: Path, repo: Path, commit: str) -> Path:
    lines = CODEX.read_bytes().splitlines(keepends=True)
    meta = json.loads(lines[0])
    meta["payload"]["git"]["commit_hash"] = commit
    meta["payload"]["cwd"] = str(repo)
    out = tmp_path / CODEX.name.split("__")[-1]
    out.write_bytes(json.dumps(meta, separators=(",", ":")).encode() + b"\n" + b"".join(lines[1:]))
    return out


def test_resume_adds_the_diff_of_the_edited_files_since_the_start_commit(
    tmp_path: Path, checkout: tuple[Path, str]
) -> None:
    repo, start = checkout
    done = lifeline(
        repo, "sessions", "ingest", "--tool", "codex", str(_rollout(tmp_path, repo, start))
    )
    assert done.returncode == 0, done.stderr
    md = lifeline(repo, "sessions", "resume", NATIVE)
    assert md.returncode == 0, md.stderr
    bundle, _, tree = md.stdout.partition("\n## Working tree\n")
    assert f"- commit_at_start: {start}" in bundle
    assert f"- head: {start}" in tree and f"git diff {start} -- {EDITED}" in tree
    assert "+export const handleLocalChat = async () => { stream() }" in tree
    assert "README.md" not in tree  # only what the session edited
    js = json.loads(lifeline(repo, "sessions", "resume", NATIVE, "--format", "json").stdout)
    assert js["worktree"]["files"] == [EDITED] and "stream()" in js["worktree"]["diff"]
    small = lifeline(repo, "sessions", "resume", NATIVE, "--budget", "3000")
    assert len(small.stdout) <= 3000 and "## Working tree" in small.stdout
    alone = lifeline(repo, "sessions", "resume", NATIVE, "--no-worktree")
    assert alone.stdout == bundle + "\n" or alone.stdout.startswith(bundle.rstrip("\n"))
    assert "## Working tree" not in alone.stdout


def test_no_git_or_no_checkout_never_fails_the_bundle(
    tmp_path: Path, checkout: tuple[Path, str]
) -> None:
    repo, start = checkout
    lifeline(repo, "sessions", "ingest", "--tool", "codex", str(_rollout(tmp_path, repo, start)))
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    without_git = lifeline(repo, "sessions", "resume", NATIVE, env={"PATH": str(empty)})
    assert without_git.returncode == 0, without_git.stderr
    assert "## Dedup" in without_git.stdout  # no git: no checkout can be named, no section
    assert "## Working tree" not in without_git.stdout
    clone = tmp_path / "clone"  # another checkout of the scope, whose history lacks the
    git(tmp_path, "clone", "-q", str(repo), str(clone))  # commit the rollout records
    git(clone, "remote", "set-url", "origin", "https://github.com/AcidicSoil/chatbot-ui")
    unknown = _rollout(tmp_path, clone, "0f022a043b3f8ca67224e1c56d5b85e28a81b910")
    lifeline(clone, "sessions", "ingest", "--tool", "codex", str(unknown))
    elsewhere = lifeline(clone, "sessions", "resume", NATIVE)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert "the start commit 0f022a043b3f is not in this checkout" in elsewhere.stdout
    assert "diff since HEAD; no difference in those files" in elsewhere.stdout
