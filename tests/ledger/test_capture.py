"""`lifeline-mesh capture`: drafts from git commits that say why, reviewed as proposals;
capturing again proposes nothing twice, after approval or rejection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lifeline.capture import Commit, commit_draft, kind_of, why_of

pytestmark = pytest.mark.timeout(120)


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ana Lima",
        "GIT_AUTHOR_EMAIL": "ana@example.org",
        "GIT_COMMITTER_NAME": "Ana Lima",
        "GIT_COMMITTER_EMAIL": "ana@example.org",
    }
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _mesh(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_pure_rules() -> None:
    assert why_of(
        "Because the queue backs up.\n\nSigned-off-by: A <a@b>\nCo-authored-by: B <b@c>\n"
    ) == ("Because the queue backs up.")
    assert why_of("Signed-off-by: A <a@b>") == ""
    assert [kind_of(s) for s in ["feat(api): x", "fix: y", "refactor!: z", "docs: w", "plain"]] == [
        "feature",
        "fix",
        "decision",
        "note",
        "note",
    ]
    assert commit_draft(Commit("a" * 40, "ana", "fix: x", "")) is None
    draft = commit_draft(Commit("b" * 40, "ana", "fix: retry", "The API drops 1% of calls."))
    assert draft is not None and draft.dedup_key == f"git:{'b' * 40}"
    assert draft.body == f"The API drops 1% of calls.\n\ncommit: {'b' * 40}"


def test_capture_review_and_capture_again(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    for message in [
        "chore: initial import",
        "feat(queue): move to RabbitMQ\n\nSQS FIFO caps at 300 msg/s; the PIX path needs 2k."
        "\n\nSigned-off-by: Ana Lima <ana@example.org>",
        "fix: retry on 503\n\nThe gateway sheds load with 503 during deploys.",
    ]:
        _git(tmp_path, "commit", "-q", "--allow-empty", "-m", message)
    assert _mesh(tmp_path, "--help").returncode == 0
    lifeline_init = subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(tmp_path), "init"], capture_output=True
    )
    assert lifeline_init.returncode == 0
    done = _mesh(tmp_path, "capture", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["outcome"] for r in rows] == ["no-why", "proposed", "proposed"]
    pending = json.loads(_mesh(tmp_path, "proposals", "--json").stdout)["proposals"]
    drafts = {p["draft"]["summary"]: p for p in pending}
    queue = drafts["feat(queue): move to RabbitMQ"]
    assert queue["draft"]["kind"] == "feature" and queue["draft"]["author"] == "Ana Lima"
    assert "Signed-off-by" not in queue["draft"]["body"]
    approved = _mesh(tmp_path, "approve", queue["id"])
    assert approved.returncode == 0, approved.stderr
    rejected = _mesh(tmp_path, "reject", drafts["fix: retry on 503"]["id"], "--reason", "noise")
    assert rejected.returncode == 0, rejected.stderr
    _git(
        tmp_path, "commit", "-q", "--allow-empty", "-m", "perf: batch writes\n\nOne fsync per 250."
    )
    again = json.loads(_mesh(tmp_path, "capture", "--json").stdout)
    assert [r["outcome"] for r in again] == ["no-why", "duplicate", "already-proposed", "proposed"]
    text = _mesh(tmp_path, "capture", "--since", "HEAD~1").stdout
    assert "already-proposed" in text and "review with `lifeline-mesh proposals`" in text


def test_outside_a_git_work_tree_is_one_line(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(tmp_path), "init"],
        check=True,
        capture_output=True,
    )
    done = _mesh(tmp_path, "capture")
    assert done.returncode == 2 and "capture needs a git work tree" in done.stderr
    assert len(done.stderr.splitlines()) == 1
