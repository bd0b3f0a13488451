"""Topics and merges on real and faithfully modified real transcripts, through the CLI:
what an IDE puts before a prompt is never the prompt, topics work in every script, and
unrelated sessions never merge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.sessions_support import FIXTURES, run_cli

MODIFIED = FIXTURES.parent / "modified-transcripts"
SUMMARY_ONLY = "4e27c414-a885-46a0-b5c8-d58e1417377d.jsonl"


def _ingest(root: Path, *paths: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    done = run_cli(root, "sessions", "ingest", *map(str, paths), "--json")
    assert done.returncode == 0, done.stderr


def _sessions(root: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(run_cli(root, "sessions", "list", "--json").stdout)
    return rows


def _bundle(root: Path, session: str) -> dict[str, Any]:
    done = run_cli(root, "sessions", "resume", session, "--format", "json")
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def _slice(bundle: dict[str, Any], kind: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in bundle["slices"] if s["kind"] == kind)
    return found


def _goal(bundle: dict[str, Any]) -> str:
    text: str = _slice(bundle, "intent")["groups"]["goal"][0]["text"]
    return text


def test_an_ide_note_before_the_prompt_is_context_and_merges_nothing(tmp_path: Path) -> None:
    """Claude Code's VS Code extension sends the open file as a first text block: it is
    neither the prompt nor the topic, so two sessions of one folder stay two."""
    root = tmp_path / "p"
    _ingest(
        root,
        MODIFIED / "ide__marot__spotter__short.jsonl",
        MODIFIED / "ide__marot__spotter__tool_heavy.jsonl",
    )
    rows = _sessions(root)
    assert len(rows) == 2 and len({r["scope"] for r in rows}) == 1
    prompts = sorted(r["facts"]["first_prompt"] for r in rows)
    assert prompts == ["mix phx.server doesnt seem to start", "start phoenix in background"]
    bundles = [_bundle(root, r["id"]) for r in rows]
    assert len({b["key"] for b in bundles}) == 2
    assert sorted(_goal(b) for b in bundles) == prompts
    assert all(_slice(b, "acceptance")["fields"]["sessions"] == 1 for b in bundles)
    shown = run_cli(root, "sessions", "show", rows[0]["id"]).stdout
    assert "· ide: <ide_opened_file>The user opened the file" in shown


def test_codex_ide_sessions_take_the_request_and_stay_apart(tmp_path: Path) -> None:
    root = tmp_path / "p"
    files = sorted(MODIFIED.glob("rollout-*-019e9625-802f-7e91-840a-cfe88d1411?b.jsonl"))
    _ingest(root, *files)
    rows = _sessions(root)
    assert sorted(r["facts"]["first_prompt"] for r in rows) == [
        "Add a --dry-run flag to the sync command.",
        "Fix the flaky timeout in the watcher tests.",
    ]
    assert all(r["turns"] == 1 for r in rows)
    bundles = [_bundle(root, r["id"]) for r in rows]
    assert len({b["key"] for b in bundles}) == 2
    assert {b["topic"] for b in bundles} == {
        "add-a-dry-run-flag-to-the-sync",
        "fix-the-flaky-timeout-in-the-watcher-tests",
    }


def test_a_codex_image_prompt_is_one_prompt_with_its_image(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _ingest(root, *MODIFIED.glob("rollout-*-019e9625-802f-7e91-840a-cfe88d14119c.jsonl"))
    (row,) = _sessions(root)
    assert row["turns"] == 1
    page = json.loads(run_cli(root, "sessions", "show", row["id"], "--json").stdout)
    prompts = [i for i in page["items"] if i["kind"] == "prompt"]
    assert [(p["text"], p["images"]) for p in prompts] == [
        ("What does this screenshot show? [Image #1]", 1)
    ]
    (image,) = [i for i in page["items"] if i["kind"] == "image"]
    assert image["media_type"] == "image/png" and image["bytes"] > 0 and image["sha256"]
    bundle = _bundle(root, row["id"])
    assert _goal(bundle) == "What does this screenshot show? [Image #1]"
    assert _slice(bundle, "acceptance")["fields"]["user_turns"] == 1


def test_an_injected_block_after_a_codex_prompt_is_not_a_prompt(tmp_path: Path) -> None:
    """Codex writes a named skill's SKILL.md as a user-role item right after the prompt
    that named it: context, never a prompt, never the latest request."""
    root = tmp_path / "p"
    _ingest(root, *MODIFIED.glob("rollout-*-019e9625-802f-7e91-840a-cfe88d14115d.jsonl"))
    (row,) = _sessions(root)
    assert row["turns"] == 1
    typed = "$make-changelog write the changelog for 0.2"
    page = json.loads(run_cli(root, "sessions", "show", row["id"], "--json").stdout)
    assert [i["text"] for i in page["items"] if i["kind"] == "prompt"] == [typed]
    (skill,) = [i for i in page["items"] if i["kind"] == "context" and "<skill>" in i["text"]]
    assert skill["subtype"] == "user-context"
    intent = _slice(_bundle(root, row["id"]), "intent")["groups"]
    assert [f["text"] for f in intent["goal"]] == [typed]
    assert [f["text"] for f in intent["latest"]] in ([], [typed])


def test_topics_work_in_every_script(tmp_path: Path) -> None:
    """Chinese and Russian first prompts of two sessions of one folder: each its own
    topic (before, both were "(no topic)" and merged)."""
    root = tmp_path / "p"
    _ingest(root, *sorted(MODIFIED.glob("script__*.jsonl")))
    rows = _sessions(root)
    assert len(rows) == 2
    bundles = {b["topic"]: b for b in (_bundle(root, r["id"]) for r in rows)}
    assert set(bundles) == {
        "请看一下这个补丁我改变了主意想把",
        "помоги-пожалуйста-лучше-использовать-эти-модели-pydantic-мне",
    }
    assert len({b["key"] for b in bundles.values()}) == 2


def test_sessions_without_a_topic_never_merge(tmp_path: Path) -> None:
    """Real sessions with no typed prompt (an empty main file's warm-up agent aside, a
    summary-only file, a session opened with a slash command only) are each their own
    group, never one "(no topic)" bundle."""
    root = tmp_path / "p"
    claude = FIXTURES / "claude-code"
    _ingest(
        root,
        claude / ("daaain__claude-code-log__claude-code-log-sample__" + SUMMARY_ONLY),
        claude / "d-kimuson__claude-code-viewer__1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
        claude / "kvsankar__agent-history__real_sessions__claude__session-01.jsonl",
    )
    rows = [r for r in _sessions(root) if not r["facts"].get("first_prompt")]
    assert len(rows) >= 2
    listed = run_cli(root, "sessions", "resume", rows[0]["id"], "--format", "json")
    data = json.loads(listed.stdout)
    assert data["topic"].startswith("session:claude:")
    assert data["topic"] != _topic_of(root, rows[1]["id"])


def _topic_of(root: Path, session: str) -> str:
    done = run_cli(root, "sessions", "resume", session, "--format", "json")
    topic: str = json.loads(done.stdout)["topic"]
    return topic
