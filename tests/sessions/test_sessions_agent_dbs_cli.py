"""`lifeline sessions ingest` finds Cursor's and Forge's databases where the tools keep
them, or takes one given on the command line: a real subprocess, a real HOME layout."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.agent_dbs import cursor_user_folder, forge_db, forge_rows
from tests.support.sessions_support import run_cli

WORKSPACE = "8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e"


def test_standard_folders_project_scope_and_a_given_database(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "acme-api"
    project.mkdir()
    cursor_user_folder(home / ".config" / "Cursor" / "User", {WORKSPACE: project})
    db = forge_db(home / ".forge", forge_rows())

    mine = run_cli(project, "sessions", "ingest", "--json", home=home)
    assert mine.returncode == 0, mine.stderr
    summary = json.loads(mine.stdout)  # this project's: the chats of its Cursor workspace
    assert summary["sessions"] == 3 and summary["failures"] == []
    assert summary["out_of_scope"] == 4  # a chat of another folder, forge's three

    every = run_cli(project, "sessions", "ingest", "--all", "--json", home=home)
    assert json.loads(every.stdout)["sessions"] == 4  # the rest; the first three unchanged
    rows = json.loads(run_cli(project, "sessions", "list", "--json", home=home).stdout)
    assert sorted(r["tool"] for r in rows) == ["cursor"] * 4 + ["forge"] * 3

    other = tmp_path / "other"
    other.mkdir()
    given = run_cli(other, "sessions", "ingest", "--tool", "forge", str(db), "--json", home=home)
    assert json.loads(given.stdout)["sessions"] == 3  # given explicitly: no project filter
    shown = run_cli(other, "sessions", "show", "conv-001", home=home)
    assert shown.returncode == 0, shown.stderr
    assert "you: Please add Forge support." in shown.stdout
    listed = run_cli(other, "sessions", "list", "--tool", "forge", "--json", home=home)
    assert {r["native_id"] for r in json.loads(listed.stdout)} == {
        "conv-001",
        "d0e2b1f5-6405-4e52-9c1e-6410279de630",
        "ff7e318b-017e-4db0-b9b4-23e4e2b27391",
    }
