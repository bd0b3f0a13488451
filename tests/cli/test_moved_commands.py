"""A lifeline-context 0.6.1 command that `lifeline` lacks is answered with where its work is
done here (lifeline/cli/moved.py, docs/migration.md), not with the list of every command
and a guess: `lifeline propose` used to say "did you mean `promote`?", `reject` "did you
mean `correct`?", `migrate` "did you mean `relate`?".

Every command of the real lifeline-context 0.6.1 (its own `--help`, from the venv the
interoperability tests install; tests/support/lc_venv.py) is either ours or answered so."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lifeline.cli.main import build_parser
from lifeline.cli.moved import MOVED
from tests.support.lc_venv import lc_command, run_lc
from tests.support.mesh_procs import cli


def _lifeline(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("lifeline", root, *args, check=False)


def _our_commands() -> set[str]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)
    return set(sub.choices)


@pytest.mark.slow
def test_every_lifeline_context_command_is_ours_or_says_where_it_went(tmp_path: Path) -> None:
    lc = lc_command(tmp_path / "lc")
    listed = run_lc(lc, tmp_path, "--help").stdout
    theirs = set(re.findall(r"^    ([a-z][a-z-]+)\s", listed, flags=re.MULTILINE))
    assert {"propose", "migrate", "install-hooks", "context"} <= theirs, listed[:2000]
    ours = _our_commands()
    assert theirs - ours - set(MOVED) == set()
    assert not ours & set(MOVED)  # a command of ours is never answered as moved


@pytest.mark.parametrize(
    ("typed", "told"),
    [
        (["propose", "--kind", "decision"], "`lifeline-mesh proposals`"),
        (["reject", "abc"], "`lifeline-mesh reject ID`"),
        (["migrate", "--from", "LIFELINE.md"], "`lifeline ingest LIFELINE.md`"),
        (["install-hooks", "claude-code"], "`lifeline hooks install claude-code`"),
        (["--line", "ledger", "push"], "`lifeline-mesh share`"),
    ],
)
def test_a_lifeline_context_command_says_where_its_work_is_done(
    tmp_path: Path, typed: list[str], told: str
) -> None:
    done = _lifeline(tmp_path, *typed)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    command = next(w for w in typed if w in MOVED)
    assert line.startswith(f"lifeline: error: `{command}` is a lifeline-context command; here: ")
    assert told in line and line.endswith("(docs/migration.md)"), line
    assert "did you mean" not in line and "choose from" not in line


def test_a_mistyped_command_of_ours_is_still_guessed(tmp_path: Path) -> None:
    done = _lifeline(tmp_path, "contxt")
    assert done.returncode == 2
    assert "did you mean `context`?" in done.stderr, done.stderr


def test_a_lifeline_context_option_says_what_to_give_instead(tmp_path: Path) -> None:
    done = _lifeline(tmp_path, "--db", ".lifeline/ledger.db", "context")
    assert done.returncode == 2
    assert "that is lifeline-context's option: name the project with --root" in done.stderr
    lines = _lifeline(tmp_path, "lines", "--mesh")
    assert "`lifeline where ID`" in lines.stderr, lines.stderr
    # not said by the other command, whose users never had that tool's options
    mesh = cli("lifeline_mesh", tmp_path, "status", "--db", "x", check=False)
    assert mesh.returncode == 2 and "lifeline-context" not in mesh.stderr, mesh.stderr


def test_its_ledger_variable_left_in_the_environment_is_named(tmp_path: Path) -> None:
    """lifeline-context read ``LIFELINE_DB`` as its ledger; a shell that still exports it
    would have `lifeline` write elsewhere than its user thinks, without a word."""
    _lifeline(tmp_path, "init")
    ours = tmp_path / ".lifeline" / "ledger.db"
    theirs = tmp_path / "elsewhere" / "team.db"

    def run(given: Path, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "LIFELINE_DB": str(given)}
        return subprocess.run(
            [sys.executable, "-m", "lifeline", "--root", str(tmp_path), *args],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip

    logged = run(theirs, "log", "--kind", "decision", "--summary", "use x")
    assert logged.returncode == 0, logged.stderr
    (note,) = logged.stderr.splitlines()
    assert note.startswith("lifeline: note: LIFELINE_DB is lifeline-context's"), note
    assert f"this uses line 'ledger' ({ours})" in note and "unset LIFELINE_DB" in note
    assert not theirs.parent.exists()  # nothing made where it points
    shown = run(theirs, "context")
    assert "use x" in shown.stdout and "LIFELINE_DB" in shown.stderr
    # pointing at the line used: nothing to say
    assert run(ours, "context").stderr == ""
