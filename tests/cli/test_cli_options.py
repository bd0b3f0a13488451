"""`--line` is offered only where it means something; `share`/`unshare` take one form."""

from __future__ import annotations

import re

import pytest

from lifeline_mesh.cli.main import build_parser

MEANINGLESS = ["init", "id", "invite", "join", "revoke", "members", "share", "unshare"]
MEANINGFUL = ["sync", "verify", "mcp"]


def _help(command: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return str(sub.choices[command].format_help())  # type: ignore[index]


@pytest.mark.parametrize("command", MEANINGLESS)
def test_no_line_option_where_it_means_nothing(command: str) -> None:
    assert not re.search(r"--line\b", _help(command))  # `invite --lines` is another option


@pytest.mark.parametrize("command", MEANINGFUL)
def test_line_option_where_it_selects_a_line(command: str) -> None:
    assert re.search(r"--line\b", _help(command))


def test_share_takes_only_the_positional_form(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["share", "ledger", "--line", "other"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --line other" in capsys.readouterr().err
    assert build_parser().parse_args(["share", "ledger"]).name == "ledger"
