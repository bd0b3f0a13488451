"""A hint names a command that exists and a default that is the real one: what `sessions
resume` suggests when there is nothing to resume, what `sessions ... --help` says of --line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.clirun import lifeline


def _suggested(text: str) -> list[str]:
    """The `lifeline ...` commands a message suggests."""
    return re.findall(r"`(lifeline [^`]*)`", text)


def test_resume_with_nothing_suggests_commands_that_run(tmp_path: Path) -> None:
    empty = tmp_path / "transcripts"
    empty.mkdir()
    assert lifeline(tmp_path, "sessions", "ingest", str(empty)).returncode == 0
    done = lifeline(tmp_path, "sessions", "resume")
    assert done.returncode != 0 and "no sessions in scope" in done.stderr
    suggested = _suggested(done.stderr)
    assert "lifeline sessions list" in suggested, done.stderr
    for command in suggested:  # each one the user is told to type is accepted
        ran = lifeline(tmp_path, *command.split()[1:])
        assert "unrecognized arguments" not in ran.stderr, (command, ran.stderr)
        assert "invalid choice" not in ran.stderr, (command, ran.stderr)


def test_sessions_help_names_the_sessions_lines_default() -> None:
    for sub in ("list", "show", "ingest", "resume", "unfinished"):
        done = subprocess.run(
            [sys.executable, "-m", "lifeline", "sessions", sub, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        text = " ".join(done.stdout.split())
        assert "--line LINE the sessions line (default: sessions," in text, (sub, text)
        assert "(default: ledger)" not in text, sub
    top = subprocess.run(
        [sys.executable, "-m", "lifeline", "log", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "(default: ledger)" in " ".join(top.stdout.split())


def test_an_option_of_another_command_is_not_suggested_back(tmp_path: Path) -> None:
    done = lifeline(tmp_path, "sessions", "list", "--all")
    assert done.returncode == 2 and "unrecognized arguments: --all" in done.stderr
    assert "did you mean `--all`" not in done.stderr, done.stderr
