"""A typo gets one line that names the likely command or option; an author is never a bare
"unknown" where the user variables are unset (a container, a CI job)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.terminal import on_a_terminal

BIN = Path(sys.executable).parent


def _run(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["lifeline-mesh", "serv"], "did you mean `serve`?"),
        (["lifeline", "contxt"], "did you mean `context`?"),
        (["lifeline-mesh", "serve", "--lisen", "127.0.0.1:0"], "did you mean `--listen`?"),
        (["lifeline", "completion", "bsh"], "did you mean `bash`?"),
    ],
)
def test_a_typo_names_the_likely_word_in_one_line(argv: list[str], hint: str) -> None:
    done = _run(*argv)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and hint in done.stderr, done.stderr
    assert "choose from" not in done.stderr  # the suggestion replaces the list of every word


def test_a_value_starting_with_a_dash_is_told_to_go_after_two_dashes(tmp_path: Path) -> None:
    done = _run("lifeline", "--root", str(tmp_path), "recall", "-x")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "'-x' was taken for an option: put `--` before" in done.stderr
    bare = _run("lifeline", "--root", str(tmp_path), "recall")  # nothing given: no such hint
    assert "required: QUERY" in bare.stderr and "taken for an option" not in bare.stderr


def test_a_word_like_no_other_gets_the_list_and_no_guess() -> None:
    done = _run("lifeline-mesh", "xyzzy")
    assert done.returncode == 2 and "choose from" in done.stderr
    assert "did you mean" not in done.stderr


def test_the_author_without_user_variables_is_gits_user_name(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("USER", "LOGNAME", "LIFELINE_AUTHOR")}
    env["HOME"] = str(tmp_path)  # git reads its global config from here
    subprocess.run(["git", "config", "--global", "user.name", "Ada Lovelace"], env=env, check=True)
    assert _run("lifeline", "--root", str(tmp_path), "init", env=env).returncode == 0
    done = _run(
        "lifeline", "--root", str(tmp_path), "log", "--kind", "note", "--summary", "s", env=env
    )
    assert done.returncode == 0, done.stderr
    shown = _run("lifeline", "--root", str(tmp_path), "history", "--json", env=env)
    assert '"author": "Ada Lovelace"' in shown.stdout, shown.stdout


def test_an_unknown_option_is_told_by_its_command_among_its_own_options() -> None:
    done = _run("lifeline-mesh", "serve", "--bogus")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    said = "lifeline-mesh serve: error: unrecognized arguments: --bogus; see `lifeline-mesh serve"
    assert done.stderr.startswith(said + " --help`"), done.stderr
    assert "did you mean" not in done.stderr  # the dashes alone made it look like --verbose
    done = _run("lifeline-mesh", "serve", "--join-lisen", "127.0.0.1:0")
    assert "did you mean `--join-listen`?; see `lifeline-mesh serve --help`" in done.stderr
    # `mcp token issue --role` is another command's option: not offered for `mcp`
    done = _run("lifeline-mesh", "mcp", "token", "issue", "n", "--rle", "member")
    assert "did you mean `--role`?; see `lifeline-mesh mcp token issue --help`" in done.stderr
    done = _run("lifeline-mesh", "mcp", "--rle", "member")
    assert "unrecognized arguments: --rle member; see `lifeline-mesh mcp --help`" in done.stderr


def test_mcp_says_what_it_takes_for_a_word_it_does_not_know() -> None:
    done = _run("lifeline-mesh", "mcp", "stdio")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "unknown mcp subcommand 'stdio'; `mcp` alone serves on stdio" in done.stderr
    assert "`mcp --http HOST:PORT` over HTTP" in done.stderr and "`mcp token" in done.stderr
    assert "choose from" not in done.stderr and "argument [token]" not in done.stderr
    done = _run("lifeline-mesh", "mcp", "tokn")
    assert "unknown mcp subcommand 'tokn'; did you mean `token`?" in done.stderr
    # an unknown option's value is not taken for a subcommand
    done = _run("lifeline-mesh", "mcp", "--policy", "x")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "unrecognized arguments: --policy x; see `lifeline-mesh mcp --help`" in done.stderr
    assert "invalid choice" not in done.stderr


def test_init_on_a_terminal_says_what_to_do_next(tmp_path: Path) -> None:
    """A person who just made a line is told how to write, read and let an agent in; a
    script (stdout not a terminal) and a second `init` get the one line only."""
    root = tmp_path / "my project"
    root.mkdir()
    status, drawn = on_a_terminal([str(BIN / "lifeline"), "--root", str(root), "init"], stdout=True)
    assert status == 0
    assert drawn.splitlines()[1] == "next:", drawn
    assert f"lifeline-mesh mcp --root '{root}' --agent claude-code" in drawn, drawn
    assert "lifeline hooks install claude-code" in drawn
    again = on_a_terminal([str(BIN / "lifeline"), "--root", str(root), "init"], stdout=True)
    assert again[1].strip().startswith("line 'ledger' already exists") and "next:" not in again[1]
    piped = _run("lifeline", "--root", str(root), "--line", "other", "init")
    assert piped.stdout.startswith("created line 'other'") and "next:" not in piped.stdout
