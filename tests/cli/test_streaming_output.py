"""Long commands: progress only on a terminal, streamed JSON equal to the whole-document
form, and a streamed import that waits for parents stored out of order."""

from __future__ import annotations

import io
import json
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from lifeline.audit.line import Finding, Report
from lifeline.cli.cmd_core import write_report_json
from lifeline.cli.common import print_json
from lifeline.cli.progress import Progress
from lifeline.migration import stream as lc_import
from lifeline.store.port import Store
from lifeline.store.sqlite import SqliteStore
from tests.support.clirun import lifeline
from tests.support.entries import make_entry
from tests.support.terminal import on_a_terminal


async def _line(root: Path, count: int) -> None:
    (root / ".lifeline").mkdir()
    parent: tuple[str, ...] = ()
    entries = []
    for n in range(count):
        entries.append(make_entry(f"n {n}", parent, ts=f"2026-01-01T00:00:{n:02d}Z"))
        parent = (entries[-1].id,)
    async with await SqliteStore.open(root / ".lifeline" / "ledger.db") as store:
        await store.append_many(entries)


def _on_a_terminal(root: Path, *args: str) -> tuple[int, str]:
    return on_a_terminal([sys.executable, "-m", "lifeline", "--root", str(root), *args])


@pytest.mark.parametrize(
    ("args", "label"),
    [(("render",), "rendering line ledger"), (("verify",), "verifying line ledger")],
)
async def test_progress_shows_on_a_terminal_only(
    tmp_path: Path, args: tuple[str, ...], label: str
) -> None:
    await _line(tmp_path, 3)
    code, drawn = _on_a_terminal(tmp_path, *args)
    assert code == 0 and label in drawn and "3/3 (100%)" in drawn
    assert drawn.endswith("\r\x1b[K")  # the counter's line is cleared at the end
    piped = lifeline(tmp_path, *args)
    assert piped.returncode == 0 and piped.stderr == ""
    code, drawn = _on_a_terminal(tmp_path, "verify", "--json")
    assert code == 0 and drawn == ""


def test_progress_draws_at_most_every_interval() -> None:
    now = [0.0]
    out = io.StringIO()
    with Progress("work", 1000, enabled=True, stream=out, clock=lambda: now[0]) as bar:
        for _ in range(1000):
            bar.advance()  # the clock stands still: one draw only
        now[0] = 1.0
        bar.advance(0)
    assert out.getvalue().count("work [") == 2
    assert "1,000/1,000 (100%)" in out.getvalue()
    assert out.getvalue().endswith("\r\x1b[K")
    noted = io.StringIO()
    with Progress("ingesting", enabled=True, stream=noted, clock=lambda: now[0]) as bar:
        bar.update(3, 4, "a.jsonl")
    assert "ingesting [###############.....] 3/4 (75%) a.jsonl" in noted.getvalue()
    quiet = io.StringIO()
    with Progress("work", 10, enabled=False, stream=quiet) as bar:
        bar.advance(10)
    assert quiet.getvalue() == ""


@pytest.mark.parametrize(
    "findings",
    [
        [],
        [
            Finding("id-mismatch", "a" * 64, 'text with "quotes", \\ and\nnewline, ünïcode'),
            Finding("missing-parent", "b" * 64, "parent bbbb is not stored \u2028"),
        ],
    ],
)
def test_streamed_verify_json_is_the_whole_document(
    findings: list[Finding], capsys: pytest.CaptureFixture[str]
) -> None:
    report = Report("ledger", entries=7, findings=findings, anchors=2)
    out = io.StringIO()
    write_report_json(report, out)
    print_json(report.to_dict())
    assert out.getvalue() == capsys.readouterr().out
    assert json.loads(out.getvalue())["ok"] is (not findings)


async def test_verify_json_of_a_damaged_line_parses(tmp_path: Path) -> None:
    await _line(tmp_path, 4)
    conn = sqlite3.connect(tmp_path / ".lifeline" / "ledger.db")
    conn.execute("UPDATE entries SET summary = 'changed' WHERE summary = 'n 2'")
    conn.commit()
    conn.close()
    done = lifeline(tmp_path, "verify", "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert [f["check"] for f in report["findings"]] == ["id-mismatch"]
    assert report["entries"] == 4 and report["ok"] is False


def _opener(root: Path) -> Callable[[str], AbstractAsyncContextManager[Store]]:
    @asynccontextmanager
    async def open_store(name: str) -> AsyncIterator[Store]:
        async with await SqliteStore.open(root / ".lifeline" / f"{name}.db") as store:
            yield store

    return open_store


def _lc_db(path: Path, rows: list[tuple[str, str, str]]) -> None:
    """A lifeline-context 0.6 table with ``rows`` (id, ts, payload) in this row order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,"
        " ts TEXT NOT NULL, kind TEXT NOT NULL, dedup_key TEXT, parents TEXT NOT NULL,"
        " payload TEXT NOT NULL)"
    )
    conn.executemany(
        "INSERT INTO entries (id, ts, kind, dedup_key, parents, payload)"
        " VALUES (?, ?, 'note', NULL, '[]', ?)",
        rows,
    )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("pages", [0, 2])
async def test_streamed_import_waits_for_parents_stored_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pages: int
) -> None:
    chain = [make_entry("root")]
    for n in range(5):
        chain.append(make_entry(f"c {n}", (chain[-1].id,)))
    lost = make_entry("orphan", ("f" * 64,))
    under_lost = make_entry("under orphan", (lost.id,))
    order = [chain[4], chain[5], under_lost, chain[0], chain[1], lost, chain[2], chain[3]]
    source = tmp_path / "old" / ".lifeline" / "ledger.db"
    _lc_db(source, [(e.id, e.ts, json.dumps(e.to_dict())) for e in order])
    target = tmp_path / "new"
    (target / ".lifeline").mkdir(parents=True)
    if pages:  # in process, pages of two rows: parents arrive in later pages
        monkeypatch.setattr(lc_import, "BATCH_ROWS", pages)
        (plan,) = [p async for p in lc_import.import_databases([source], _opener(target))]
        report = plan.to_dict()
    else:  # the command, one page
        done = lifeline(target, "import", str(tmp_path / "old"), "--json")
        assert done.returncode == 1, done.stderr
        (report,) = json.loads(done.stdout)
    assert report["entries"] == report["added"] == len(chain)
    assert {r["id"]: r["reason"][:19] for r in report["rejected"]} == {
        lost.id: "parent ffffffffffff",
        under_lost.id: f"parent {lost.id[:12]}",
    }
    history = json.loads(lifeline(target, "history", "--json").stdout)
    assert [e["id"] for e in history] == [e.id for e in chain]
    again = json.loads(lifeline(target, "import", str(tmp_path / "old"), "--json").stdout)
    assert again[0]["added"] == 0 and again[0]["entries"] == len(chain)
