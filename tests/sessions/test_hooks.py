"""`lifeline hooks`: entries written into the tools' own config files (fixture copies in
tmp folders, located through CLAUDE_CONFIG_DIR, CODEX_HOME or --config-dir, never the real
home), idempotently and reversibly; and the entries' commands run on real events."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES
from tests.support.sessions_support import rate_limited_session

HOOKS = FIXTURES / "hooks"
CASES = {  # client: (fixture, file name, how the folder is given, end event)
    "claude-code": ("claude-settings.json", "settings.json", "CLAUDE_CONFIG_DIR", "SessionEnd"),
    "codex": ("codex-hooks.json", "hooks.json", "CODEX_HOME", "Stop"),
    "gemini": ("gemini-settings.json", "settings.json", "--config-dir", "SessionEnd"),
}


def _lifeline(
    args: list[str], env: dict[str, str], stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifeline", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        cwd=cwd,
    )


def _setup(tmp_path: Path, client: str) -> tuple[Path, dict[str, str], list[str]]:
    fixture, name, how, _ = CASES[client]
    folder = tmp_path / "conf"
    folder.mkdir()
    target = folder / name
    shutil.copyfile(HOOKS / fixture, target)
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME")}
    env["HOME"] = str(tmp_path / "home")  # were the folder ignored, nothing real is touched
    extra: list[str] = []
    if how == "--config-dir":
        extra = ["--config-dir", str(folder)]
    else:
        env[how] = str(folder)
    return target, env, extra


@pytest.mark.parametrize("client", sorted(CASES))
def test_install_is_idempotent_and_uninstall_gives_the_file_back(
    tmp_path: Path, client: str
) -> None:
    target, env, extra = _setup(tmp_path, client)
    original = target.read_text()
    dry = _lifeline(["hooks", "install", client, "--dry-run", *extra], env)
    assert dry.returncode == 0, dry.stderr
    assert "+" in dry.stdout and "hooks run session-start" in dry.stdout
    assert target.read_text() == original and "not written" in dry.stdout

    done = _lifeline(["hooks", "install", client, *extra], env)
    assert done.returncode == 0, done.stderr
    data = json.loads(target.read_text())
    end_event = CASES[client][3]
    for event, run in (("SessionStart", "session-start"), (end_event, "session-end")):
        commands = [h["command"] for g in data["hooks"][event] for h in g["hooks"]]
        ours = [c for c in commands if f"hooks run {run} --client {client}" in c]
        assert len(ours) == 1
    before = json.loads(original)
    for key, value in before.items():  # the user's own settings and hooks are all kept
        if key != "hooks":
            assert data[key] == value
    for event, groups in before["hooks"].items():
        for group in groups:
            assert group in data["hooks"][event]
    if client == "codex":
        assert "codex_hooks = true" in done.stdout
    if client == "gemini":
        assert all(h.get("name") for g in data["hooks"]["SessionStart"] for h in g["hooks"])

    installed = target.read_bytes()
    again = _lifeline(["hooks", "install", client, *extra], env)
    assert again.returncode == 0 and "already installed" in again.stdout
    assert target.read_bytes() == installed

    removed = _lifeline(["hooks", "uninstall", client, *extra], env)
    assert removed.returncode == 0, removed.stderr
    assert json.loads(target.read_text()) == before
    assert not (tmp_path / "home").exists()


def test_a_broken_config_is_refused_and_left_alone(tmp_path: Path) -> None:
    target, env, extra = _setup(tmp_path, "claude-code")
    target.write_text('{"hooks": {')
    done = _lifeline(["hooks", "install", "claude-code", *extra], env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "not valid JSON" in done.stderr and "nothing was changed" in done.stderr
    assert target.read_text() == '{"hooks": {'


def test_the_entries_ingest_at_the_end_and_bring_the_bundle_at_the_start(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".lifeline").mkdir(parents=True)
    (project / "src").mkdir()
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    transcript = rate_limited_session(
        tmp_path / "t" / "7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f.jsonl", project
    )
    end = {"session_id": "7f3c2a10", "transcript_path": str(transcript), "cwd": str(project)}
    ended = _lifeline(
        ["hooks", "run", "session-end", "--client", "claude-code"], env, json.dumps(end)
    )
    assert ended.returncode == 0 and json.loads(ended.stdout) == {}, ended.stderr
    assert (project / ".lifeline" / "sessions.db").exists()

    start = {"session_id": "new-one", "cwd": str(project / "src"), "source": "startup"}
    started = _lifeline(
        ["hooks", "run", "session-start", "--client", "claude-code"], env, json.dumps(start)
    )
    assert started.returncode == 0, started.stderr
    out = json.loads(started.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    assert "# Continuing: add-rate-limiting-to-login" in out["additionalContext"]
    assert "rate_limit 429" in out["additionalContext"]

    elsewhere = _lifeline(
        ["hooks", "run", "session-start", "--client", "gemini"], env, "not json", cwd=tmp_path
    )
    assert elsewhere.returncode == 0 and json.loads(elsewhere.stdout) == {}
