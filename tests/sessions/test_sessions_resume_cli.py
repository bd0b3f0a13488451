"""`lifeline sessions resume|unfinished` as a user runs them: a real subprocess on a line
ingested from the real fixtures; `--launch` runs a stand-in program named like the tool."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from lifeline.errors import ConfigError
from lifeline.sessions.bundles.launch import LAUNCHERS, MAX_ARG_BYTES, launch_argv
from tests.support.sessions_support import lay_out_home, run_cli

CODEX_CRASHED = "019a93b9-f380-7600-98ff-940e6b99603c"
NEVER_USED = "1af7fc5e-8455-4414-9ccd-011d40f70b2a"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("resume")
    home = lay_out_home(base / "home")
    root = base / "project"
    root.mkdir()
    done = run_cli(root, "sessions", "ingest", "--all", home=home)
    assert done.returncode == 0, done.stderr
    return root, home


def test_resume_prints_the_bundle_in_both_formats(project: tuple[Path, Path]) -> None:
    root, home = project
    md = run_cli(root, "sessions", "resume", CODEX_CRASHED, "--budget", "2500", home=home)
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("<!-- lifeline continuation bundle v1 -->")
    assert len(md.stdout) <= 2500 and "## Worklog" in md.stdout
    js = run_cli(root, "sessions", "resume", CODEX_CRASHED, "--format", "json", home=home)
    data = json.loads(js.stdout)
    assert data["ready"] and data["budget"] == {"limit": 24000, "unit": "chars"}
    tokens = run_cli(root, "sessions", "resume", CODEX_CRASHED, "--budget-tokens", "500", home=home)
    assert (len(tokens.stdout.encode()) + 3) // 4 <= 500


def test_not_ready_unknown_and_empty_each_get_one_line(project: tuple[Path, Path]) -> None:
    root, home = project
    never = run_cli(root, "sessions", "resume", NEVER_USED, home=home)
    assert never.returncode == 3
    assert never.stderr.count("\n") == 1 and "no real user turn" in never.stderr
    assert never.stdout.startswith("## Acceptance") and "- ready: no" in never.stdout
    unknown = run_cli(root, "sessions", "resume", "ffffffff", home=home)
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert unknown.stderr.count("\n") == 1 and "no session 'ffffffff'" in unknown.stderr
    empty = run_cli(root, "sessions", "resume", "--scope", "path:/nowhere", home=home)
    assert empty.returncode == 3 and empty.stdout == "" and "no sessions in scope" in empty.stderr
    here = run_cli(root, "sessions", "resume", home=home)  # this project has no sessions
    assert here.returncode == 3 and "no sessions in scope 'path:" in here.stderr


def test_unfinished_lists_newest_first(project: tuple[Path, Path]) -> None:
    root, home = project
    rows = json.loads(run_cli(root, "sessions", "unfinished", "--json", home=home).stdout)
    assert rows and rows == sorted(rows, key=lambda r: r["last_activity"] or "", reverse=True)
    codex = next(r for r in rows if r["native_id"] == CODEX_CRASHED)
    assert codex["state"] == "crashed" and codex["outstanding"]["outstanding"]
    text = run_cli(root, "sessions", "unfinished", home=home).stdout
    assert "crashed" in text and "outstanding: Implement necessary code updates" in text


def test_unfinished_shows_unconfirmed_edits_and_the_last_failure(
    project: tuple[Path, Path],
) -> None:
    """The Codex session crashed after patching a file twice (no test, build or commit
    after) and after `rg` exited 1 with no output."""
    root, home = project
    rows = json.loads(run_cli(root, "sessions", "unfinished", "--json", home=home).stdout)
    codex = next(r for r in rows if r["native_id"] == CODEX_CRASHED)
    assert codex["unconfirmed_edits"] == [
        "components/chat/chat-helpers/index.ts (no test, build or commit passed after it)"
    ]
    assert codex["last_failure"] == 'shell(bash -lc rg -n "OLLAMA" -n) → (failed with no output)'
    assert all("unconfirmed_edits" in r and "last_failure" in r for r in rows)
    text = run_cli(root, "sessions", "unfinished", home=home).stdout
    assert "    unconfirmed edit: components/chat/chat-helpers/index.ts (no test," in text
    assert '    last failure: shell(bash -lc rg -n "OLLAMA" -n) → (failed with no output)' in text


@pytest.mark.parametrize("tool", sorted(LAUNCHERS))
def test_launch_starts_the_tool_with_the_bundle_as_first_prompt(
    project: tuple[Path, Path], tmp_path: Path, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, home = project
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / tool
    record = tmp_path / "argv.json"
    stand_in.write_text(
        "#!/usr/bin/env python3\nimport json, sys\n"
        f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n"
    )
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    done = run_cli(root, "sessions", "resume", CODEX_CRASHED, "--launch", tool, home=home)
    assert done.returncode == 0, done.stderr
    argv = json.loads(record.read_text())
    expected = launch_argv(tool, argv[-1])[1:]
    assert argv == expected and argv[-1].startswith("<!-- lifeline continuation bundle")
    assert argv[:-1] == (["--prompt-interactive"] if tool == "gemini" else [])


def test_launch_refuses_what_cannot_be_one_argument() -> None:
    with pytest.raises(ConfigError, match="smaller --budget"):
        launch_argv("claude", "x" * (MAX_ARG_BYTES + 1))
    with pytest.raises(ConfigError, match="cannot launch"):
        launch_argv("vim", "hello")


def test_provider_shapes_carry_the_same_markdown(project: tuple[Path, Path]) -> None:
    root, home = project
    md = run_cli(root, "sessions", "resume", CODEX_CRASHED, home=home).stdout
    shapes = {
        fmt: json.loads(
            run_cli(root, "sessions", "resume", CODEX_CRASHED, "--format", fmt, home=home).stdout
        )
        for fmt in ("anthropic", "openai", "gemini")
    }
    assert shapes["anthropic"]["system"][0]["text"] == md
    assert shapes["anthropic"]["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert shapes["openai"]["messages"] == [{"role": "system", "content": md}]
    assert shapes["gemini"]["system_instruction"]["parts"] == [{"text": md}]
