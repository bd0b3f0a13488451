"""The worklog tells the truth: edits as the transcripts record them, and only when their
call's result says they happened — through the real CLI, on real transcripts and on real
ones changed only where a finding needs a shape the fixtures lack
(tests/fixtures/PROVENANCE.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.clirun import lifeline

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
REAL = FIXTURES / "transcripts"
MODIFIED = FIXTURES / "modified-transcripts"
CODEX = (
    REAL
    / "codex"
    / (
        "AcidicSoil__codex-session-view__rollout-2025-11-17T15-30-28-"
        "019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
    )
)
CODEX_ID = "019a93b9-f380-7600-98ff-940e6b99603c"
GEMINI = REAL / "gemini" / "Mai0313__VibeCodingTracker__test_conversation_gemini.jsonl"
GEMINI_ID = "0ab84937-9fe7-4284-986a-33c832af0b6a"
CLAUDE = REAL / "claude-code" / "marot__spotter__subagent.jsonl"
CLAUDE_REFUSED = MODIFIED / "marot__spotter__subagent__write-rejected.jsonl"
CHECKED = (
    REAL
    / "claude-code"
    / "daaain__claude-code-log__deep-manifest__a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"
)


def ingest(root: Path, tool: str, *paths: Path) -> None:
    done = lifeline(root, "sessions", "ingest", "--tool", tool, *map(str, paths))
    assert done.returncode == 0, done.stderr


def bundle(root: Path, ref: str, *extra: str) -> dict[str, Any]:
    done = lifeline(root, "sessions", "resume", ref, "--single", "--format", "json", *extra)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def groups(data: dict[str, Any], kind: str) -> dict[str, list[str]]:
    piece = next(s for s in data["slices"] if s["kind"] == kind)
    return {name: [f["text"] for f in facts] for name, facts in piece["groups"].items()}


def fields(data: dict[str, Any], kind: str) -> dict[str, Any]:
    piece: dict[str, Any] = next(s for s in data["slices"] if s["kind"] == kind)
    return dict(piece["fields"])


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("worklog")
    ingest(base, "codex", CODEX)
    ingest(base, "gemini", GEMINI)
    ingest(base, "claude", CLAUDE, CLAUDE_REFUSED)
    return base


def test_codex_edits_made_through_shell_apply_patch_heredocs_are_seen(root: Path) -> None:
    """codex-cli 0.58 with `shell` as its only tool patches files with `bash -lc
    "apply_patch <<'PATCH' …"`: two such calls on one file, both answered `Success`."""
    data = bundle(root, CODEX_ID)
    assert groups(data, "worklog")["edits"] == ["components/chat/chat-helpers/index.ts (2×)"]
    context = fields(data, "context")
    assert context["commit_at_start"] == "0f022a043b3f8ca67224e1c56d5b85e28a81b910"
    assert context["commit_at_end"] == context["commit_at_start"]


def test_gemini_write_file_and_replace_are_edits(root: Path) -> None:
    data = bundle(root, GEMINI_ID)
    assert groups(data, "worklog")["edits"] == ["GEMINI.md (2×)"]


def test_an_edit_the_user_refused_is_a_constraint_not_work_done(root: Path) -> None:
    """The same Claude Code session twice: as written (the Write answered "File created")
    and with that one result replaced by the refusal Claude Code 2.1.38 writes."""
    original = groups(bundle(root, CLAUDE.stem), "worklog")
    assert original["edits"] == ["~/projects/spotter/plan.md (1×)"]
    data = bundle(root, CLAUDE_REFUSED.stem)
    assert groups(data, "worklog")["edits"] == []
    refused = groups(data, "contract")["refused"]
    assert refused == [
        "Write(/home/marco/projects/spotter/plan.md): refused by the user, not done; "
        "do not redo it without asking"
    ]
    md = lifeline(root, "sessions", "resume", CLAUDE_REFUSED.stem, "--single").stdout
    assert "### refused\n- [refused] Write(/home/marco/projects/spotter/plan.md)" in md


def test_an_edit_whose_result_never_came_is_not_claimed(root: Path, tmp_path: Path) -> None:
    """The real rollout cut right after its first apply_patch call, as a crash leaves it
    (research doc §1.2, "For a crash fixture"): the patch may or may not be on disk."""
    lines = CODEX.read_bytes().splitlines(keepends=True)
    first = next(i for i, raw in enumerate(lines) if b"apply_patch <<" in raw)
    crashed = tmp_path / "rollout-2025-11-17T15-30-28-019a93b9-0000-7600-98ff-940e6b99603c.jsonl"
    crashed.write_bytes(b"".join(lines[: first + 1]))
    ingest(tmp_path, "codex", crashed)
    listed = json.loads(lifeline(tmp_path, "sessions", "list", "--json").stdout)
    data = bundle(tmp_path, listed[0]["id"])
    worklog = groups(data, "worklog")
    assert worklog["edits"] == []
    assert worklog["edits_unconfirmed"] == [
        "components/chat/chat-helpers/index.ts (shell asked for it; no result was recorded: "
        "check the file before relying on it)"
    ]
    assert worklog["unanswered_calls"] and "apply_patch" in worklog["unanswered_calls"][0]


def test_the_failing_call_and_its_output_are_in_a_crash_bundle(root: Path) -> None:
    """The Codex session crashed (no task_complete) after `rg` exited 1 with no output."""
    worklog = groups(bundle(root, CODEX_ID), "worklog")
    assert worklog["last_failure"] == [
        'shell(bash -lc rg -n "OLLAMA" -n) → (failed with no output)'
    ]


def test_rules_files_the_agent_read_are_contract(root: Path) -> None:
    """The Gemini session read CLAUDE.md with `read_file` before writing GEMINI.md."""
    rules = groups(bundle(root, GEMINI_ID), "contract")["rules_files"]
    assert len(rules) == 1 and rules[0].startswith("CLAUDE.md: # CLAUDE.md This file provides")
    assert "All tooling runs through `uv`." in rules[0]


def test_edits_with_no_passing_check_after_them_are_unchecked(root: Path) -> None:
    """Codex patched a file and Gemini wrote GEMINI.md; neither ran a test, a build or a
    commit afterwards."""
    assert groups(bundle(root, CODEX_ID), "worklog")["edits_unchecked"] == [
        "components/chat/chat-helpers/index.ts"
    ]
    assert groups(bundle(root, GEMINI_ID), "worklog")["edits_unchecked"] == ["GEMINI.md"]


def test_a_passing_check_or_commit_confirms_the_edits_before_it(tmp_path: Path) -> None:
    """The real deep-manifest session edits 23 times, each run followed by a pytest, ruff or
    git commit that passes: nothing is unchecked. Cut just before its first `pytest -x`,
    the edits made since its first commit are; the .gitignore edit that commit holds is not."""
    (tmp_path / "whole").mkdir()
    ingest(tmp_path / "whole", "claude", CHECKED)
    worklog = groups(bundle(tmp_path / "whole", CHECKED.stem), "worklog")
    assert len(worklog["edits"]) == 5 and worklog["edits_unchecked"] == []
    lines = CHECKED.read_bytes().splitlines(keepends=True)
    first = next(i for i, raw in enumerate(lines) if b"&& pytest -x" in raw)
    cut = tmp_path / "cut" / CHECKED.name
    cut.parent.mkdir()
    cut.write_bytes(b"".join(lines[:first]))
    ingest(tmp_path / "cut", "claude", cut)
    worklog = groups(bundle(tmp_path / "cut", CHECKED.stem), "worklog")
    assert any(t.startswith("/src/deep-manifest/.gitignore") for t in worklog["edits"])
    assert worklog["edits_unchecked"] == [
        "~/.claude/plans/humble-doodling-wolf.md",
        "/src/deep-manifest/deep_manifest/deep_manifest.py",
    ]
