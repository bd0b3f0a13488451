"""lifeline-context 0.6.1's options on the writes both tools have: who wrote a checkpoint,
a correction or a pin (`--author`, `--agent`, `--provider`, `--model`, as `log` takes
them), a checkpoint's own `--summary`, and `resume --thread`. Scripts and hooks written
for it run here unchanged; the same `checkpoint` command line records the same entry id
in both tools (ids leave out the time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.lc_venv import lc_command, run_lc

WHO = ["--author", "claude", "--agent", "claude-code", "--provider", "anthropic"]
WHO += ["--model", "opus"]
CHECKPOINT = ["checkpoint", "--thread", "auth", "--next", "wire tokens", "--done", "login"]
CHECKPOINT += ["--summary", "auth: tokens next", *WHO]


def _lifeline(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (args, done.stderr)
    return done


def _written(root: Path, *args: str) -> dict[str, str]:
    entry: dict[str, str] = json.loads(_lifeline(root, *args, "--json").stdout)
    return entry


@pytest.fixture
def root(tmp_path: Path) -> Path:
    _lifeline(tmp_path, "init")
    return tmp_path


def test_writes_name_who_wrote_them(root: Path) -> None:
    checkpoint = _written(root, *CHECKPOINT)
    assert checkpoint["summary"] == "auth: tokens next"
    fields = ("author", "agent", "provider", "model")
    assert [checkpoint[f] for f in fields] == ["claude", "claude-code", "anthropic", "opus"]
    decision = _lifeline(root, "log", "--kind", "decision", "--summary", "use x").stdout.strip()
    for command in (["pin", decision], ["unpin", decision], ["correct", decision]):
        extra = ["--summary", "use y"] if command[0] == "correct" else []
        entry = _written(root, *command, *extra, *WHO)
        assert [entry[f] for f in fields] == ["claude", "claude-code", "anthropic", "opus"]
    # Without them: the defaults `log` has (the author from the environment)
    plain = _written(root, "checkpoint", "--thread", "db", "--next", "index")
    assert (plain["agent"], plain["provider"], plain["model"]) == ("human", "none", "human")
    assert plain["summary"] != "" and plain["author"] != ""


def test_resume_shows_one_thread(root: Path) -> None:
    _lifeline(root, *CHECKPOINT)
    _lifeline(root, "checkpoint", "--thread", "db", "--next", "index")
    opened = _lifeline(root, "log", "--kind", "open", "--summary", "which cache?").stdout.strip()
    _lifeline(root, "checkpoint", "--thread", opened[:10], "--next", "measure")
    rows = json.loads(_lifeline(root, "resume", "--thread", "auth", "--json").stdout)
    assert [r["thread"] for r in rows] == ["auth"]
    by_id = json.loads(_lifeline(root, "resume", "--thread", opened[:10], "--json").stdout)
    assert [r["thread"] for r in by_id] == [opened]
    assert len(json.loads(_lifeline(root, "resume", "--json").stdout)) == 3
    none = _lifeline(root, "resume", "--thread", "nope").stdout
    assert none.startswith("no checkpoint on thread 'nope'"), none


@pytest.mark.slow
def test_the_same_checkpoint_command_records_the_same_entry_in_both_tools(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    lc = lc_command(tmp_path_factory.mktemp("lc"))
    theirs = tmp_path_factory.mktemp("theirs")
    assert run_lc(lc, theirs, "init").returncode == 0
    recorded = run_lc(lc, theirs, *CHECKPOINT)
    assert recorded.returncode == 0, recorded.stderr
    (row,) = json.loads(run_lc(lc, theirs, "resume", "--thread", "auth", "--json").stdout)
    ours = _written(root, *CHECKPOINT)
    assert ours["id"] == row["id"]
    (mine,) = json.loads(_lifeline(root, "resume", "--thread", "auth", "--json").stdout)
    assert mine["checkpoint"] == row["id"]
