"""Importing the lifeline-context 0.6.1 fixture: same ids, ts, parents; cross-line parent."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from lifeline.entry import normalize_ts
from lifeline.migration.importer import plan_import, read_lc_project
from lifeline.projection.markdown import parse_document
from lifeline.store.sqlite import SqliteStore
from tests.support.clirun import lifeline

CROSS_PARENT = "49bc1aa4e93b4610afafe9c2794e24987422709c62617d4a003bd1195b2808d0"


async def _stored(root: Path, line: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    async with await SqliteStore.open(root / ".lifeline" / f"{line}.db", create=False) as store:
        entries = [e.to_dict() async for e in store.stream()]
        return entries, await store.externals()


def _check_against_expected(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    by_id = {e["id"]: e for e in got}
    assert len(got) == len(expected)
    for want in expected:
        have = by_id[want["id"]]
        assert have["parents"] == sorted(want["parents"])
        assert have["ts"] == normalize_ts(want["ts"])
        for name in ("kind", "author", "agent", "provider", "model", "summary", "body"):
            assert have[name] == want[name]


async def test_import_fixture_keeps_ids_and_resolves_cross_line_parent(
    tmp_path: Path, lc_fixture: Path, lc_expected: dict[str, list[dict[str, Any]]]
) -> None:
    done = lifeline(tmp_path, "import", str(lc_fixture), "--json")
    assert done.returncode == 0, done.stderr
    report = {r["line"]: r for r in json.loads(done.stdout)}
    assert report["ledger"]["added"] == len(lc_expected["ledger"])
    assert report["ledger"]["externals"] == {CROSS_PARENT: "research"}
    for line in ("ledger", "research"):
        got, externals = await _stored(tmp_path, line)
        _check_against_expected(got, lc_expected[line])
        assert lifeline(tmp_path, "--line", line, "verify").returncode == 0
    _, externals = await _stored(tmp_path, "ledger")
    assert externals == {CROSS_PARENT: "research"}
    research, _ = await _stored(tmp_path, "research")
    assert CROSS_PARENT in {e["id"] for e in research}
    again = lifeline(tmp_path, "import", str(lc_fixture), "--json")
    assert again.returncode == 0
    assert all(r["added"] == 0 for r in json.loads(again.stdout))
    assert len((await _stored(tmp_path, "ledger"))[0]) == len(lc_expected["ledger"])


def test_import_one_db_file_and_markdown_fallback(
    tmp_path: Path, lc_fixture: Path, lc_expected: dict[str, list[dict[str, Any]]]
) -> None:
    single = tmp_path / "a"
    single.mkdir()
    one = lifeline(single, "import", str(lc_fixture / ".lifeline" / "research.db"))
    assert one.returncode == 0, one.stderr
    assert "1 entry (1 new) into line 'research'" in one.stdout
    only_md = tmp_path / "md"
    only_md.mkdir()
    for name in ("LIFELINE.md", "LIFELINE.research.md"):
        shutil.copy(lc_fixture / name, only_md / name)
    lines = read_lc_project(only_md)
    assert sorted(ln.name for ln in lines) == ["ledger", "research"]
    plans = {p.name: p for p in plan_import(lines, {})}
    assert [e.id for e in plans["ledger"].entries] == [d["id"] for d in lc_expected["ledger"]]
    assert plans["ledger"].externals == {CROSS_PARENT: "research"}
    target = tmp_path / "b"
    target.mkdir()
    done = lifeline(target, "import", str(only_md))
    assert done.returncode == 0, done.stderr
    assert lifeline(target, "verify").returncode == 0


def _tampered_copy(lc_fixture: Path, dest: Path) -> Path:
    project = dest / "old"
    (project / ".lifeline").mkdir(parents=True)
    for name in ("ledger.db", "research.db"):
        shutil.copy(lc_fixture / ".lifeline" / name, project / ".lifeline" / name)
    conn = sqlite3.connect(project / ".lifeline" / "ledger.db")
    payload = conn.execute("SELECT payload FROM entries WHERE seq = 3").fetchone()[0]
    conn.execute(
        "UPDATE entries SET payload = ? WHERE seq = 3",
        (payload.replace("Cache: Redis", "Cache: Valkey"),),
    )
    conn.commit()
    conn.close()
    return project


def test_import_reports_mismatched_ids_and_their_descendants(
    tmp_path: Path, lc_fixture: Path, lc_expected: dict[str, list[dict[str, Any]]]
) -> None:
    project = _tampered_copy(lc_fixture, tmp_path)
    target = tmp_path / "new"
    target.mkdir()
    done = lifeline(target, "import", str(project), "--json")
    assert done.returncode == 1
    ledger = next(r for r in json.loads(done.stdout) if r["line"] == "ledger")
    bad = lc_expected["ledger"][2]["id"]
    reasons = {r["id"]: r["reason"] for r in ledger["rejected"]}
    assert "does not match" in reasons[bad]
    # everything that descends from the refused entry cannot close over its parents
    assert ledger["added"] == len(lc_expected["ledger"]) - len(reasons)
    assert len(reasons) > 1
    assert lifeline(target, "verify").returncode == 0


def test_ingest_round_trips_a_line_and_refuses_hand_edits(tmp_path: Path, lc_fixture: Path) -> None:
    assert lifeline(tmp_path, "import", str(lc_fixture)).returncode == 0
    rendered = lifeline(tmp_path, "render")
    assert rendered.returncode == 0, rendered.stderr
    path = Path(rendered.stdout.strip())
    assert path == tmp_path / "LIFELINE.md"
    first = path.read_bytes()
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".LIFELINE")] == []
    assert lifeline(tmp_path, "render", "--stdout").stdout.encode() == first
    document = parse_document(first.decode())
    assert document.externals == {CROSS_PARENT: "research"}

    for _ in range(2):  # idempotent
        done = lifeline(tmp_path, "--line", "copy", "ingest", str(path), "--json")
        assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["added"] == 0
    assert lifeline(tmp_path, "--line", "copy", "verify").returncode == 0
    copy = lifeline(tmp_path, "--line", "copy", "render", "--stdout").stdout
    assert copy.replace("line copy", "line ledger").replace("`copy`", "`ledger`") == first.decode()

    edited = tmp_path / "edited.md"
    edited.write_text(first.decode().replace("Cache: Redis", "Cache: Valkey"), encoding="utf-8")
    refused = lifeline(tmp_path, "--line", "fresh", "ingest", str(edited))
    assert refused.returncode == 2
    assert "584d0d181f11617bd98eecb258d86f595a5912250b7c0534964ff6fc47e86a03" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / ".lifeline" / "fresh.db").exists()


def test_a_hostile_database_is_refused_before_any_row_is_read(tmp_path: Path) -> None:
    """A file that is not lifeline-context's: `entries` a view that computes rows forever
    (the import used to count them until killed), or a table without its columns."""
    forever = tmp_path / "forever.db"
    with sqlite3.connect(forever) as conn:
        conn.execute(
            "CREATE VIEW entries AS WITH RECURSIVE n(seq) AS (SELECT 1 UNION ALL SELECT seq + 1 "
            "FROM n) SELECT seq, printf('%064d', seq) AS id, '2026-01-01T00:00:00Z' AS ts, "
            "NULL AS dedup_key, '{}' AS payload FROM n"
        )
    conn.close()
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE entries (seq INTEGER, id TEXT)")
    conn.close()
    root = tmp_path / "project"
    root.mkdir()
    assert lifeline(root, "init").returncode == 0
    for path, reason in ((forever, "is a view, not a table"), (other, "has no dedup_key, payload")):
        done = lifeline(root, "import", str(path), timeout=30)
        assert done.returncode == 2, done.stderr
        assert reason in done.stderr and "lifeline-context 0.6 ledger" in done.stderr
    assert lifeline(root, "history", "--json").stdout.strip() == "[]"
