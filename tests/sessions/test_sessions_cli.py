"""`lifeline sessions …` run as a user runs it: a real subprocess, a real HOME layout."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.support.sessions_support import (
    FIXTURES,
    claude_line,
    lay_out_home,
    run_cli,
    watching,
    write_jsonl,
)

SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"


def test_ingest_list_show_from_the_standard_folders(tmp_path: Path) -> None:
    home = lay_out_home(tmp_path / "home")
    root = tmp_path / "project"
    root.mkdir()
    done = run_cli(root, "sessions", "ingest", "--all", "--json", home=home)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["sessions"] == 21 and summary["empty"] == 1 and summary["failures"] == []
    assert summary["skipped"]["metadata"] > 1000 and summary["turns"] > 20
    assert (root / ".lifeline" / "sessions.db").exists()
    assert (root / ".lifeline" / "sessions-sources.sqlite").exists()
    lines = json.loads(run_cli(root, "lines", "--json", home=home).stdout)
    assert [line["line"] for line in lines] == ["sessions"]  # the source ledger is no line

    again = run_cli(root, "sessions", "ingest", "--all", home=home)
    assert again.returncode == 0 and again.stdout.startswith("0 sessions ingested")
    assert "22 unchanged" in again.stdout

    (root / ".lifeline" / "sessions.db").unlink()  # the line lost: read everything again
    for extra in ("-wal", "-shm"):
        (root / ".lifeline" / f"sessions.db{extra}").unlink(missing_ok=True)
    rebuilt = run_cli(root, "sessions", "ingest", "--all", "--json", home=home)
    assert json.loads(rebuilt.stdout)["entries"] == summary["entries"]

    listed = run_cli(root, "sessions", "list", "--json", home=home)
    rows = json.loads(listed.stdout)
    assert len(rows) == 21 and all("items" not in r for r in rows)
    interrupted = run_cli(root, "sessions", "list", "--status", "interrupted", home=home)
    assert "tool_heavy" not in interrupted.stdout  # rows show ids and titles, not file names
    assert len(interrupted.stdout.splitlines()) == 1 + sum(
        r["status"]["status"] == "interrupted" for r in rows
    )

    shown = run_cli(root, "sessions", "show", SPOTTER, home=home)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "status    complete" in text and "you: Implement spotter-gqc" in text
    assert "~~ compacted (auto" in text
    assert "┌ subagent a881341" in text  # the 2.1.x subagent nested under the call
    assert "▸ Read(" in text

    page = run_cli(
        root, "sessions", "show", SPOTTER, "--json", "--offset", "5", "--limit", "3", home=home
    )
    data = json.loads(page.stdout)
    assert len(data["items"]) == 3 and data["item_count"] > 600
    assert data["items"][0]["prov"]["tool"] == "claude"


def test_ingest_without_all_keeps_to_this_project(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = tmp_path / "work" / "acme"
    root.mkdir(parents=True)
    mine = (
        home / ".claude" / "projects" / "-work-acme" / "11111111-1111-1111-1111-111111111111.jsonl"
    )
    other = (
        home / ".claude" / "projects" / "-elsewhere" / "22222222-2222-2222-2222-222222222222.jsonl"
    )
    write_jsonl(mine, [claude_line("user", "u1", "hello", cwd=str(root / "sub"))])
    write_jsonl(other, [claude_line("user", "u1", "hello", cwd="/srv/elsewhere")])
    done = run_cli(root, "sessions", "ingest", "--tool", "claude", "--json", home=home)
    summary = json.loads(done.stdout)
    assert summary["sessions"] == 1 and summary["out_of_scope"] == 1
    rows = json.loads(run_cli(root, "sessions", "list", "--json", "--scope", ".").stdout)
    assert [r["native_id"] for r in rows] == ["11111111-1111-1111-1111-111111111111"]


def test_errors_are_one_line(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    missing = run_cli(root, "sessions", "list")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "no lifeline project under" in missing.stderr
    bad = run_cli(root, "sessions", "ingest", str(tmp_path / "nope.jsonl"))
    assert bad.returncode == 2 and "no such file or folder" in bad.stderr
    run_cli(root, "sessions", "ingest", str(FIXTURES / "codex"))
    unknown = run_cli(root, "sessions", "show", "ffffffffffff")
    assert unknown.returncode == 2 and "no session 'ffffffffffff'" in unknown.stderr
    config = root / ".lifeline" / "config.json"
    config.write_text(json.dumps({"sessions": {"redact": [{"name": "x", "pattern": "("}]}}))
    broken = run_cli(root, "sessions", "ingest", str(FIXTURES / "codex"))
    assert broken.returncode == 2 and "redact pattern" in broken.stderr


def test_a_configured_line_name_and_pattern_are_used(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / ".lifeline").mkdir(parents=True)
    (root / ".lifeline" / "config.json").write_text(
        json.dumps(
            {
                "sessions": {
                    "line": "agents",
                    "redact": [{"name": "ticket", "pattern": "ACME-[0-9]{4}"}],
                }
            }
        )
    )
    path = write_jsonl(tmp_path / "in" / "s.jsonl", [claude_line("user", "u1", "fix ACME-1234")])
    done = run_cli(root, "sessions", "ingest", str(path), "--json")
    assert json.loads(done.stdout)["redactions"] == {"ticket": 1}
    assert (root / ".lifeline" / "agents.db").exists()
    too_short = run_cli(root, "sessions", "show", "ab")
    assert too_short.returncode == 2 and "too short" in too_short.stderr
    rows = json.loads(run_cli(root, "sessions", "list", "--json").stdout)
    assert rows[0]["facts"]["first_prompt"] == "fix [REDACTED:ticket]"


def test_watch_ingests_appended_lines_and_stops_on_sigterm(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = tmp_path / "p"
    root.mkdir()
    live = home / ".claude" / "projects" / "-p" / "33333333-3333-3333-3333-333333333333.jsonl"
    write_jsonl(live, [claude_line("user", "u1", "first")])
    with watching(root, home, seconds=60) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("watching every project")
        assert proc.stdout.readline().startswith("read ")
        with live.open("a") as out:
            out.write(json.dumps(claude_line("user", "u2", "second")) + "\n")
        line = proc.stdout.readline()
        assert line.startswith("resumed") and "+1 turn," in line
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline().strip() == "stopped"
        assert proc.wait(timeout=30) == 0
    rows = json.loads(run_cli(root, "sessions", "list", "--json").stdout)
    assert rows[0]["turns"] == 2


def test_reading_before_any_ingest_points_to_ingest(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    assert run_cli(root, "init").returncode == 0  # a project, without its sessions line yet
    home = tmp_path / "home"
    for args in (["list"], ["show", "abc"], ["usage"], ["search", "x"], ["unfinished"]):
        done = run_cli(root, "sessions", *args, home=home)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (args, done.stderr)
        assert done.stderr.startswith("lifeline: error: no sessions yet: line 'sessions' ")
        assert done.stderr.rstrip().endswith(
            "`lifeline sessions ingest` creates it from the agents' transcripts"
        ), done.stderr
        assert "init" not in done.stderr
    named = run_cli(root, "sessions", "list", "--line", "agents", home=home)
    assert "`lifeline sessions ingest --line agents` creates it" in named.stderr, named.stderr


def test_an_ingest_that_finds_nothing_says_where_it_looked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "p"
    root.mkdir()
    done = run_cli(root, "sessions", "ingest", home=home)
    assert done.returncode == 0, done.stderr
    summary, looked = done.stdout.splitlines()
    assert summary.startswith("0 sessions ingested")
    assert looked.startswith("no agent transcripts found: none of the tools' folders exists (")
    for folder in ("~/.claude/projects", "~/.codex/sessions", "~/.gemini/tmp", "~/.forge"):
        assert folder in looked
    assert looked.endswith("give their files or folders: `lifeline sessions ingest PATH…`")
    (home / ".codex" / "sessions").mkdir(parents=True)
    codex = run_cli(root, "sessions", "ingest", "--tool", "codex", home=home)
    assert codex.stdout.splitlines()[-1].startswith(
        "no agent transcripts found: none in ~/.codex/sessions; "  # the folder that exists
    ), codex.stdout
    given = run_cli(root, "sessions", "ingest", str(FIXTURES / "codex"), home=home)
    assert "no agent transcripts found" not in given.stdout  # it was told where to look
