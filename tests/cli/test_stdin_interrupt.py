"""One Ctrl-C stops a command waiting on its stdin (the event loop's first SIGINT used to be
swallowed by the blocked read, so it took a second one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clirun import lifeline
from tests.support.interrupt import assert_one_sigint_stops, spawn, wait_until_read

pytestmark = pytest.mark.timeout(90)


def test_join_reading_the_token_from_stdin(tmp_path: Path) -> None:
    proc = spawn("lifeline_mesh", tmp_path, "join", "-")
    wait_until_read(proc, b"llm1")
    assert_one_sigint_stops(proc, "lifeline-mesh")


def test_log_reading_the_body_from_stdin(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    proc = spawn(
        "lifeline", tmp_path, "log", "--kind", "note", "--summary", "x", "--body-file", "-"
    )
    wait_until_read(proc, b"a body ")
    assert_one_sigint_stops(proc, "lifeline")
    assert lifeline(tmp_path, "history", "--json").stdout.strip() == "[]"  # nothing logged


def test_hook_reading_its_event_from_stdin(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    proc = spawn("lifeline", tmp_path, "hooks", "run", "session-start", "--client", "claude-code")
    wait_until_read(proc, b'{"session_id": ')
    assert_one_sigint_stops(proc, "lifeline")
