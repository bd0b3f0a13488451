"""`--line` is offered only where it means something; `share`/`unshare` take one form."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from lifeline_mesh.cli.main import COMMANDS, build_parser

MEANINGLESS = ["init", "id", "invite", "revoke", "members", "share", "unshare"]
MEANINGFUL = ["sync", "verify", "mcp", "join"]  # join: the lines `--shallow` takes


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


def test_a_command_builds_only_its_module() -> None:
    """The map of which module registers each command is what the modules register, so a
    command line that names a command loads that module alone (and parses the same)."""
    every = build_parser()
    sub = next(a for a in every._actions if a.dest == "command")
    # `completion` is in every parser, made from the whole one (its word loads every module)
    assert set(COMMANDS) | {"completion"} == set(sub.choices)  # type: ignore[arg-type]
    for name, module in COMMANDS.items():
        parser = build_parser(["--root", "x", "-v", name, "--help"])
        owned = set(next(a for a in parser._actions if a.dest == "command").choices)  # type: ignore[arg-type]
        owned.discard("completion")
        assert name in owned
        assert owned == {c for c, m in COMMANDS.items() if m == module}


def test_verify_does_not_import_the_viewer_or_the_runner() -> None:
    probe = (
        "import sys; from lifeline_mesh.cli.main import build_parser; "
        "build_parser(['verify', '--json']); "
        "print(sorted(m for m in ('lifeline_mesh.ui.app', 'lifeline_mesh.ci.job', "
        "'lifeline_mesh.cli.cmd_sync') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
