"""The core `lifeline` commands, run as real subprocesses."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lifeline.cli.main import LIGHT_COMMANDS, build_parser, command_word
from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from tests.support.clirun import lifeline


def _commands() -> list[str]:
    parser = build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(subs[0].choices)


def test_a_light_command_builds_only_its_module() -> None:
    light = {name for name in LIGHT_COMMANDS}
    every = set(_commands())
    # `completion` is in every parser (a script made from a light one would be incomplete, so
    # the command word `completion` builds the whole parser)
    assert light <= every and every - light == {"completion"}
    for name, module in LIGHT_COMMANDS.items():
        parser = build_parser(["--root", "x", "-v", name, "--help"])
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        owned = set(subs[0].choices) - {"completion"}
        assert name in owned and {c for c, m in LIGHT_COMMANDS.items() if m == module} == owned
    assert command_word(["--line=a", "render"]) == "render"
    assert command_word(["--ro", "x", "render"]) is None  # abbreviated: every module
    assert command_word(["--help"]) is None and command_word([]) is None
    sessions = (
        "import sys; from lifeline.cli.main import build_parser; "
        "build_parser(['sessions', 'resume']); "
        "print(sorted(m for m in sys.modules if m.startswith('lifeline.')))"
    )
    loaded = subprocess.run([sys.executable, "-c", sessions], capture_output=True, text=True)
    for heavy in (
        "lifeline.sessions.ingest.ingester",
        "lifeline.sessions.bundles.okf",
        "lifeline.truth.service",
    ):
        assert f"'{heavy}'" not in loaded.stdout, (heavy, loaded.stderr)  # lazily, where used
    probe = (
        "import sys; from lifeline.cli.main import build_parser; build_parser(['render']); "
        "from lifeline.store.schema import line_schema; "
        "print('lifeline.sessions.model' in sys.modules, sorted(line_schema()))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    everything = "import sys, lifeline.cli.main as m; m.build_parser(); " + probe.split("; ", 3)[3]
    full = subprocess.run([sys.executable, "-c", everything], capture_output=True, text=True)
    # every table a line gets is created whatever command opens it first
    assert done.stdout.split(" ", 1)[0] == "False", done.stderr
    assert done.stdout.split(" ", 1)[1] == full.stdout.split(" ", 1)[1], full.stderr


@pytest.fixture
def root(tmp_path: Path) -> Path:
    done = lifeline(tmp_path, "init")
    assert done.returncode == 0, done.stderr
    return tmp_path


def test_init_twice_says_the_line_already_exists(root: Path) -> None:
    again = lifeline(root, "init")
    assert again.returncode == 0, again.stderr
    where = root / ".lifeline" / "ledger.db"
    assert again.stdout == f"line 'ledger' already exists at {where}\n", again.stdout


def test_every_command_has_help(tmp_path: Path) -> None:
    commands = _commands()
    assert {"init", "log", "show", "history", "lines", "verify", "render", "ingest"} <= set(
        commands
    )
    for name in commands:
        done = lifeline(tmp_path, name, "--help")
        assert done.returncode == 0, (name, done.stderr)
        assert f"usage: lifeline {name}" in done.stdout
    assert not (tmp_path / ".lifeline").exists()


def test_log_show_history_lines_verify(root: Path) -> None:
    first = lifeline(
        root,
        "log",
        "--kind",
        "decision",
        "--summary",
        "Database: PostgreSQL",
        "--body",
        "Audit trail needs cross-row ACID.",
        "--author",
        "alice",
    )
    assert first.returncode == 0, first.stderr
    first_id = first.stdout.strip()
    assert first_id == "403ba775847eb9bddc331751d9ac45afac96bb80e2a4c682a9126067d2eb5ad1"
    second = lifeline(root, "log", "--kind", "note", "--summary", "then", "--json")
    entry = json.loads(second.stdout)
    assert entry["parents"] == [first_id]  # default parents: the tips
    shown = lifeline(root, "show", first_id[:8], "--json")
    assert json.loads(shown.stdout)["children"] == [entry["id"]]
    assert "Audit trail" in lifeline(root, "show", first_id[:8]).stdout
    history = json.loads(lifeline(root, "history", "--json").stdout)
    assert [e["id"] for e in history] == [first_id, entry["id"]]
    assert lifeline(root, "history", "--kind", "note").stdout.count("\n") == 1
    assert lifeline(root, "history", "--limit", "1").stdout.startswith(entry["id"][:12])
    assert json.loads(lifeline(root, "lines", "--json").stdout) == [
        {"entries": 2, "line": "ledger"}
    ]
    verified = lifeline(root, "verify", "--json")
    assert verified.returncode == 0
    assert json.loads(verified.stdout)["ok"] is True


@pytest.mark.parametrize(
    "args",
    [
        ["log", "--summary", "no kind"],
        ["log", "--kind", "nonsense", "--summary", "x"],
        ["log", "--kind", "note", "--summary", "   "],
        ["log", "--kind", "note", "--summary", "undecodable \udcff byte"],
        ["log", "--kind", "note", "--summary", "x", "--body", "a", "--body-file", "f"],
        ["log", "--kind", "note", "--summary", "x", "--body-file", "/nonexistent/file"],
        ["log", "--kind", "note", "--summary", "x", "--parents", "zzzz"],
        ["log", "--kind", "note", "--summary", "x", "--parents", "abcdef"],
        ["show", "not-hex"],
        ["history", "--limit", "many"],
        ["--line", "Bad Name", "history"],
        ["nonsense-command"],
        ["--root", "/nonexistent/dir", "history"],
    ],
)
def test_wrong_arguments_give_one_line_and_no_traceback(root: Path, args: list[str]) -> None:
    done = lifeline(root, *args)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("lifeline")
    assert lifeline(root, "verify").returncode == 0  # nothing was half-written


def test_missing_line_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    for args in (["history"], ["--line", "nope", "show", "abc"], ["verify"], ["render"]):
        done = lifeline(tmp_path, *args)
        assert done.returncode == 2
        assert "no lifeline project under" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


async def test_history_into_head_ends_quietly(root: Path) -> None:
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        await Ledger(store).append_many(
            [Draft(kind="note", summary=f"entry number {n} " + "x" * 40) for n in range(4000)]
        )
    cmd = f"{sys.executable} -m lifeline --root {root} history | head -1"
    done = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.count("\n") == 1 and "entry number" in done.stdout
    assert done.stderr == ""


async def test_history_json_is_streamed_in_the_bytes_of_one_array(root: Path) -> None:
    assert lifeline(root, "history", "--json").stdout == "[]\n"
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        await Ledger(store).append_many(
            [
                Draft(kind="note", summary=f"n{n} — ünïcode 🎉", body="a\nb\u2028c\x85d")
                for n in range(5)
            ]
        )
        expected = [e.to_dict() async for e in store.stream()]
    whole = json.dumps(expected, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    assert lifeline(root, "history", "--json").stdout == whole
    rows = lifeline(root, "history", "--jsonl").stdout.rstrip("\n").split("\n")
    assert [json.loads(r) for r in rows] == expected
    last = lifeline(root, "history", "--jsonl", "--limit", "2").stdout.rstrip("\n").split("\n")
    assert [json.loads(r) for r in last] == expected[-2:]
    both = lifeline(root, "history", "--json", "--jsonl")
    assert both.returncode == 2 and "not allowed with" in both.stderr


def test_body_file_dash_reads_stdin(root: Path) -> None:
    body = "line one\nline two — ünïcode 🎉"
    done = lifeline(
        root,
        "log",
        "--kind",
        "note",
        "--summary",
        "s",
        "--body-file",
        "-",
        "--json",
        stdin=body + "\n",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["body"] == body


def test_parents_by_prefix_and_cross_line(root: Path) -> None:
    a = lifeline(root, "log", "--kind", "note", "--summary", "a").stdout.strip()
    b = lifeline(root, "log", "--kind", "note", "--summary", "b", "--parents", a[:10]).stdout
    assert lifeline(root, "--line", "research", "init").returncode == 0
    r = lifeline(root, "--line", "research", "log", "--kind", "note", "--summary", "r")
    rid = r.stdout.strip()
    done = lifeline(
        root,
        "log",
        "--kind",
        "note",
        "--summary",
        "joined",
        "--json",
        "--parents",
        f"{a[:8]},{b.strip()[:8]},research:{rid[:8]}",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["parents"] == sorted([a, b.strip(), rid])
    verified = lifeline(root, "verify", "--json")
    assert verified.returncode == 0, verified.stdout
    missing = lifeline(
        root, "log", "--kind", "note", "--summary", "x", "--parents", "research:ffffff"
    )
    assert missing.returncode == 2 and "ffffff" in missing.stderr


def test_dedup_key_retried_records_once(root: Path) -> None:
    args = ["log", "--kind", "note", "--summary", "deploy", "--dedup-key", "job-17"]
    first = lifeline(root, *args)
    again = lifeline(root, *args[:-1], "job-17")
    assert first.returncode == again.returncode == 0
    assert first.stdout == again.stdout
    assert len(json.loads(lifeline(root, "history", "--json").stdout)) == 1
