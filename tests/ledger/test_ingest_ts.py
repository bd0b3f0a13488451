"""A file never re-dates an entry the line holds: `ts` is outside the id, so an edited one
cannot be checked, and the store keeps the earliest ts it is given (a backdate for good,
and on a signed line a broken signature). Real CLI subprocesses on real files."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.support.clirun import lifeline
from tests.support.mesh_procs import cli

BACKDATE = "2001-01-01T00:00:00.000000Z"


def _history(root: Path, *line: str) -> dict[str, str]:
    done = lifeline(root, *line, "history", "--json")
    assert done.returncode == 0, done.stderr
    return {e["id"]: e["ts"] for e in json.loads(done.stdout)}


def _project(root: Path, *, signed: bool) -> tuple[Path, list[str]]:
    """Two entries written by `lifeline log` (signed when ``signed``) and LIFELINE.md."""
    root.mkdir(exist_ok=True)
    if signed:
        cli("lifeline_mesh", root, "init", "--new-mesh", "team")
    assert lifeline(root, "init").returncode == 0
    if signed:
        cli("lifeline_mesh", root, "share", "ledger")
    ids = []
    for summary in ("Database: PostgreSQL", "Queue: SQS"):
        done = lifeline(root, "log", "--kind", "decision", "--summary", summary, "--json")
        assert done.returncode == 0, done.stderr
        ids.append(json.loads(done.stdout)["id"])
    rendered = lifeline(root, "render")
    assert rendered.returncode == 0, rendered.stderr
    return Path(rendered.stdout.strip()), ids


def _redate(path: Path, old: str, new: str) -> Path:
    edited = path.with_name("edited.md")
    text = path.read_text(encoding="utf-8")
    assert text.count(f"- ts: {old}\n") == 1
    edited.write_text(text.replace(f"- ts: {old}\n", f"- ts: {new}\n"), encoding="utf-8")
    return edited


@pytest.mark.parametrize("new", [BACKDATE, "2099-01-01T00:00:00.000000Z"])
def test_an_edited_ts_is_reported_and_the_held_one_kept(tmp_path: Path, new: str) -> None:
    path, ids = _project(tmp_path, signed=False)
    before = _history(tmp_path)
    edited = _redate(path, before[ids[1]], new)
    done = lifeline(tmp_path, "ingest", str(edited))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert f"#2 {ids[1][:12]}: dated {new}, but the line holds this entry at" in done.stderr
    assert _history(tmp_path) == before  # before: the stored ts became 2001
    verified = lifeline(tmp_path, "verify")
    assert verified.returncode == 0 and "note" not in verified.stdout, verified.stdout
    report = json.loads(lifeline(tmp_path, "ingest", str(edited), "--json").stdout)[0]
    assert [(r["number"], r["id"]) for r in report["rejected"]] == [("2", ids[1])]
    assert report["added"] == 0 and report["entries"] == 1
    # the file as rendered still ingests cleanly
    assert lifeline(tmp_path, "ingest", str(path)).returncode == 0


def test_an_edited_file_does_not_break_a_signed_entry(tmp_path: Path) -> None:
    path, ids = _project(tmp_path, signed=True)
    before = _history(tmp_path)
    edited = _redate(path, before[ids[1]], BACKDATE)
    assert lifeline(tmp_path, "ingest", str(edited)).returncode == 1
    assert _history(tmp_path) == before
    audit = cli("lifeline_mesh", tmp_path, "verify", "--json", check=False)
    assert audit.returncode == 0, audit.stdout  # before: ts-mismatch and ts-before-parent
    checks = {f["check"] for ln in json.loads(audit.stdout)["lines"] for f in ln["findings"]}
    assert not checks & {"ts-mismatch", "ts-before-parent"}


def test_a_line_that_does_not_hold_the_entries_takes_the_file_as_it_is(tmp_path: Path) -> None:
    path, ids = _project(tmp_path, signed=False)
    edited = _redate(path, _history(tmp_path)[ids[0]], "2025-01-01T00:00:00.000000Z")
    done = lifeline(tmp_path, "--line", "copy", "ingest", str(edited))
    assert done.returncode == 0, done.stderr
    assert _history(tmp_path, "--line", "copy")[ids[0]] == "2025-01-01T00:00:00.000000Z"


def test_an_import_does_not_re_date_what_the_line_holds(
    tmp_path: Path, lc_fixture: Path, lc_expected: dict[str, list[dict[str, Any]]]
) -> None:
    assert lifeline(tmp_path, "import", str(lc_fixture)).returncode == 0
    before = _history(tmp_path)
    old = tmp_path / "old"
    shutil.copytree(lc_fixture / ".lifeline", old / ".lifeline")
    target = lc_expected["ledger"][3]["id"]
    conn = sqlite3.connect(old / ".lifeline" / "ledger.db")
    conn.execute("UPDATE entries SET ts = ? WHERE id = ?", ("2001-01-01T00:00:00Z", target))
    conn.commit()
    conn.close()
    done = lifeline(tmp_path, "import", str(old), "--json")
    assert done.returncode == 1, done.stderr
    ledger = next(r for r in json.loads(done.stdout) if r["line"] == "ledger")
    assert [r["id"] for r in ledger["rejected"]] == [target]
    assert _history(tmp_path) == before


OUT_OF_RANGE = "9999-12-31T23:59:59-14:00"  # the year 10000 in UTC


def test_a_ts_past_the_year_9999_in_a_projection_is_one_line(tmp_path: Path) -> None:
    path, ids = _project(tmp_path, signed=False)
    edited = _redate(path, _history(tmp_path)[ids[0]], OUT_OF_RANGE)
    done = lifeline(tmp_path, "--line", "copy", "ingest", str(edited))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "falls outside the years 1 to 9999" in done.stderr
    assert not (tmp_path / ".lifeline" / "copy.db").exists()


def test_a_ts_past_the_year_9999_in_an_import_is_reported(
    tmp_path: Path, lc_fixture: Path, lc_expected: dict[str, list[dict[str, Any]]]
) -> None:
    old = tmp_path / "old"
    shutil.copytree(lc_fixture / ".lifeline", old / ".lifeline")
    target = lc_expected["ledger"][-1]["id"]  # a tip: nothing else is left out with it
    conn = sqlite3.connect(old / ".lifeline" / "ledger.db")
    conn.execute("UPDATE entries SET ts = ? WHERE id = ?", (OUT_OF_RANGE, target))
    conn.commit()
    conn.close()
    new = tmp_path / "new"
    new.mkdir()
    done = lifeline(new, "import", str(old), "--json")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    ledger = next(r for r in json.loads(done.stdout) if r["line"] == "ledger")
    reasons = {r["id"]: r["reason"] for r in ledger["rejected"]}
    assert "falls outside the years 1 to 9999" in reasons[target]
    md = tmp_path / "md"
    md.mkdir()
    text = (lc_fixture / "LIFELINE.md").read_text(encoding="utf-8")
    stamp = "### #0015 — 2026-11-30T03:55:44.273298+00:00 —"  # its heading holds its ts
    assert stamp in text
    edited = text.replace(stamp, f"### #0015 — {OUT_OF_RANGE} —")
    (md / "LIFELINE.md").write_text(edited, encoding="utf-8")
    from_md = lifeline(new, "--line", "md", "ingest", str(md / "LIFELINE.md"), "--json")
    assert from_md.returncode == 1, from_md.stderr
    assert "Traceback" not in from_md.stderr
    (report,) = json.loads(from_md.stdout)
    assert [r["number"] for r in report["rejected"]] == ["0015"]
    assert "falls outside the years 1 to 9999" in report["rejected"][0]["reason"]
