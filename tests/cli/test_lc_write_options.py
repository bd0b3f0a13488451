"""lifeline-context 0.6.1's options on the commands both tools have: who wrote a
checkpoint, a correction, a pin or a relation (`--author`, `--agent`, `--provider`,
`--model`, as `log` takes them), a checkpoint's own `--summary`, `resume --thread`, and its
option forms of `relate` (`--from --to [--rel]`), `graph` (`--of`, `--depends-on`,
`--dependents`) and `promote` (`--from LINE --id IDS`). Scripts and hooks written for it
run here unchanged; the same command lines record the same entry ids in both tools (ids
leave out the time)."""

from __future__ import annotations

import json
import sqlite3
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


def test_relate_graph_and_promote_take_its_option_forms(root: Path) -> None:
    a = _written(root, "checkpoint", "--thread", "a", "--next", "x")["id"]
    b = _written(root, "checkpoint", "--thread", "b", "--next", "y")["id"]
    by_options = _written(root, "relate", "--from", a[:10], "--to", b[:10], *WHO)
    by_words = _written(root, "relate", a, "depends_on", b, *WHO)
    assert by_options["id"] == by_words["id"]  # --rel defaults to depends_on: one relation
    assert by_options["author"] == "claude"

    def edges(*args: str) -> list[tuple[str, str, str]]:
        found = json.loads(_lifeline(root, "graph", *args, "--json").stdout)["edges"]
        return [(e["direction"], e["rel"], e["other"]) for e in found]

    assert edges("--depends-on", a) == [("out", "depends_on", b)]
    assert edges("--dependents", b) == [("in", "depends_on", a)]
    assert edges("--dependents", a) == []
    assert edges("--of", b) == edges(b) == [("in", "depends_on", a)]
    _lifeline(root, "--line", "side", "init")
    _lifeline(root, "promote", "--from", "ledger", "--id", f"{a[:10]}, {b[:10]}", "--to", "side")
    promoted = json.loads(_lifeline(root, "--line", "side", "history", "--json").stdout)
    assert len(promoted) == 2
    for wrong, said in [
        (["relate", a, "--to", b], "not both"),
        (["relate", "--from", a], "name the relation"),
        (["graph"], "name one entry"),
        (["graph", a, "--of", b], "name one entry"),
        (["promote", "--from", "ledger", "--line", "side", "--id", a, "--to", "x"], "give one"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "lifeline", "--root", str(root), *wrong],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and said in done.stderr, (wrong, done.stderr)


@pytest.mark.slow
def test_the_same_command_lines_record_the_same_entries_in_both_tools(
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
    other = ["checkpoint", "--thread", "db", "--next", "index", *WHO]
    assert run_lc(lc, theirs, *other).returncode == 0
    db = _written(root, *other)["id"]
    related = ["relate", "--from", ours["id"][:12], "--to", db[:12], "--author", "t"]
    assert run_lc(lc, theirs, *related).returncode == 0
    relation = _written(root, *related)
    listed = run_lc(lc, theirs, "graph", "--of", db).stdout
    assert "depends_on" in listed or "relates" in listed, listed
    with sqlite3.connect(theirs / ".lifeline" / "ledger.db") as conn:
        assert conn.execute("SELECT 1 FROM entries WHERE id = ?", (relation["id"],)).fetchone()
