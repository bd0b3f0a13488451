"""Rows damaged directly in SQLite: verify reports them, reads go on, nothing else is lost."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from tests.support.clirun import lifeline

N = 30


async def _fill(path: Path) -> list[str]:
    async with await SqliteStore.open(path) as store:
        drafts = [Draft(kind="note", summary=f"s{n}", parents=()) for n in range(N)]
        return list((await Ledger(store).append_many(drafts)).added)


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A line of N entries with three rows corrupted and one summary tampered with."""
    assert lifeline(tmp_path, "init").returncode == 0
    ids = asyncio.run(_fill(tmp_path / ".lifeline" / "ledger.db"))
    bad = {"parents": ids[3], "blob": ids[7], "int": ids[11], "tampered": ids[20]}
    conn = sqlite3.connect(tmp_path / ".lifeline" / "ledger.db")
    conn.execute("UPDATE entries SET parents = 'not json' WHERE id = ?", (bad["parents"],))
    conn.execute("UPDATE entries SET summary = x'00ff10' WHERE id = ?", (bad["blob"],))
    conn.execute("UPDATE entries SET parents = 42 WHERE id = ?", (bad["int"],))
    conn.execute("UPDATE entries SET summary = 'edited' WHERE id = ?", (bad["tampered"],))
    conn.commit()
    conn.close()
    return tmp_path, bad


def test_verify_reports_corrupt_rows_and_tampering(damaged: tuple[Path, dict[str, str]]) -> None:
    root, bad = damaged
    done = lifeline(root, "verify", "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    found = {(f["check"], f["entry_id"]) for f in report["findings"]}
    assert found == {
        ("corrupt-row", bad["parents"]),
        ("corrupt-row", bad["blob"]),
        ("corrupt-row", bad["int"]),
        ("id-mismatch", bad["tampered"]),
    }
    assert report["entries"] == N - 3
    text = lifeline(root, "verify")
    assert text.returncode == 1 and "corrupt-row" in text.stdout and "id-mismatch" in text.stdout


def test_history_prints_the_rest_and_warns_once(damaged: tuple[Path, dict[str, str]]) -> None:
    root, bad = damaged
    done = lifeline(root, "history")
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == N - 3
    warnings = done.stderr.strip().splitlines()
    assert len(warnings) == 1, done.stderr
    assert "3 undecodable rows" in warnings[0] and "lifeline verify" in warnings[0]
    assert "Traceback" not in done.stderr
    listed = json.loads(lifeline(root, "history", "--json").stdout)
    assert bad["tampered"] in {e["id"] for e in listed}
    # read from the line's end: the same rows, the same one warning
    tail = lifeline(root, "history", "--limit", str(N - 5))
    assert tail.returncode == 0 and tail.stdout.splitlines() == done.stdout.splitlines()[-(N - 5) :]
    assert tail.stderr.strip().splitlines() == warnings


def test_writes_go_on_and_nothing_else_is_lost(damaged: tuple[Path, dict[str, str]]) -> None:
    root, bad = damaged
    done = lifeline(root, "log", "--kind", "note", "--summary", "after the damage")
    assert done.returncode == 0, done.stderr
    assert lifeline(root, "lines", "--json").stdout.count(f'"entries": {N + 1}') == 1
    rendered = lifeline(root, "render", "--stdout")
    assert rendered.returncode == 0
    assert rendered.stdout.count("### entry ") == N + 1 - 3
    assert "undecodable" in rendered.stderr
    corrupt = lifeline(root, "show", bad["blob"][:12])
    assert corrupt.returncode == 2 and "cannot be decoded" in corrupt.stderr
    assert len(corrupt.stderr.strip().splitlines()) == 1, corrupt.stderr
    shown = lifeline(root, "show", bad["tampered"][:12])
    assert shown.returncode == 0 and "does not match its content" in shown.stdout
