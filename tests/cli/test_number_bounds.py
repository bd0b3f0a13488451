"""A number or a duration too large for what takes it is one clear line (exit 2), not an
OverflowError from SQLite or from a date."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clirun import lifeline, one_line_error
from tests.support.mesh_procs import cli

HUGE = "99999999999999999999999"  # past SQLite's 64-bit integers


@pytest.fixture
def project(tmp_path: Path) -> Path:
    assert lifeline(tmp_path, "init").returncode == 0
    assert lifeline(tmp_path, "--line", "sessions", "init").returncode == 0
    done = lifeline(tmp_path, "log", "--kind", "note", "--summary", "queue choice")
    assert done.returncode == 0, done.stderr
    return tmp_path


@pytest.mark.parametrize(
    "args",
    [
        ("recall", "-k", HUGE, "queue"),
        ("history", "--limit", HUGE),
        ("context", "--budget", HUGE),
        ("sessions", "search", "queue", "--limit", HUGE),
        ("sessions", "show", "0", "--json", "--offset", HUGE),
    ],
)
def test_a_count_past_the_bound_is_refused_by_name(project: Path, args: tuple[str, ...]) -> None:
    one_line_error(lifeline(project, *args), "is too large: give at most 1,000,000,000")


def test_a_count_at_the_bound_is_taken(project: Path) -> None:
    done = lifeline(project, "recall", "-k", "1000000000", "queue")
    assert done.returncode == 0, done.stderr
    assert "queue choice" in done.stdout


@pytest.mark.parametrize("digits", ["\u0663", "1" * 5_000])
def test_digits_int_would_read_otherwise_are_refused(project: Path, digits: str) -> None:
    one_line_error(lifeline(project, "history", "--limit", digits), "--limit")


@pytest.mark.parametrize("ttl", ["99999999999999999d", "3" * 5_000 + "s"])
def test_an_invite_ttl_past_any_date_is_refused(tmp_path: Path, ttl: str) -> None:
    cli("lifeline_mesh", tmp_path, "init", "--new-mesh", "team")
    done = cli("lifeline_mesh", tmp_path, "invite", "--ttl", ttl, check=False)
    one_line_error(done, "is longer than 36500d")
    assert not (tmp_path / ".lifeline" / "mesh" / "invites.json").exists()


def test_an_mcp_token_ttl_past_any_date_is_refused(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    cli("lifeline_mesh", tmp_path, "init")
    done = cli(
        "lifeline_mesh", tmp_path, "mcp", "token", "issue", "ci", "--ttl", "99999999999999999d",
        check=False,
    )  # fmt: skip
    one_line_error(done, "is longer than 36500d")
