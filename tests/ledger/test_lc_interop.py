"""Against the real lifeline-context 0.6.1 (tests/support/lc_venv.py): a ledger it wrote imports
whole and stays writable; the view we write for it reads back with the same ids; our own
view never makes it invent an entry; its `approve` timing does not fail `verify`."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lifeline.entry import normalize_ts
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from tests.support.clirun import lifeline
from tests.support.lc_venv import lc_command, lc_env, run_lc
from tests.support.mesh_procs import cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

THREADS = 70

# Run by lifeline-context's own interpreter: its CLI functions write a ledger the way its
# users do (threads never joined, a proposal approved later, unicode).
_WRITER = """
import asyncio, sqlite3, sys
from datetime import datetime, timedelta, timezone
from lifeline import cli

async def main(db, out, threads):
    log = cli.cmd_log
    await log(db, out, "bootstrap", "Project: interop", "", "ana", "human", "none", "human", None)
    opens = []
    for t in range(threads):
        opened = await log(db, out, "open", f"Question {t}: which?", f"why {t}: ç 中文 🚀",
                           "ana", "human", "none", "human", None)
        opens.append(opened[0].id if isinstance(opened, tuple) else opened.id)
        await cli.cmd_checkpoint(db, out, opens[-1], next=[f"measure {t}"], done=[f"draft {t}"])
        await log(db, out, "decision", f"Decision {t}", f"because {t}", "bo", "claude",
                  "anthropic", "claude", None, thread=f"topic-{t}")
    for t in range(threads):  # second round: each thread chains to its own head, a fork
        await cli.cmd_checkpoint(db, out, opens[t], next=[f"compare {t}"])
        await log(db, out, "fix", f"Fix {t}", f"follow-up {t}", "bo", "human", "none", "human",
                  None, thread=f"topic-{t}")
    await cli.cmd_propose(db, "decision", "Proposed: cache", "needs review", "cy", "claude",
                          "anthropic", "claude", None)
    # proposed an hour ago, reviewed now, after other writes: approve keeps the proposal's ts
    hour_ago = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
    conn = sqlite3.connect(cli._staging(db).path)
    conn.execute("UPDATE proposals SET ts = ?", (hour_ago,))
    conn.commit()
    conn.close()
    await log(db, out, "note", "written after the proposal", "", "ana", "human", "none",
              "human", None)
    await cli.cmd_approve(db, out, ["all"])

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


@pytest.fixture(scope="module")
def lc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lc_command(tmp_path_factory.mktemp("lc"))


def _lc_rows(db: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT id, ts, payload FROM entries ORDER BY seq").fetchall()
    conn.close()
    return [json.loads(p) | {"id": i, "ts": t} for i, t, p in rows]


@pytest.fixture(scope="module")
def written(lc: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = tmp_path_factory.mktemp("written-by-lc")
    script = project / "writer.py"
    script.write_text(_WRITER, encoding="utf-8")
    done = subprocess.run(
        [
            str(lc.parent / "python"),
            str(script),
            ".lifeline/ledger.db",
            "LIFELINE.md",
            str(THREADS),
        ],
        cwd=project,
        env=lc_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0 and "AttributeError" in done.stderr:
        pytest.fail(f"lifeline-context's API differs from 0.6.1's: {done.stderr[-400:]}")
    assert done.returncode == 0, done.stderr
    return project


async def test_its_ledger_imports_whole_and_stays_writable(written: Path, tmp_path: Path) -> None:
    rows = _lc_rows(written / ".lifeline" / "ledger.db")
    assert len(rows) >= 5 * THREADS + 3
    done = lifeline(tmp_path, "import", str(written), "--json")
    assert done.returncode == 0, done.stderr
    async with await SqliteStore.open(Home(tmp_path).line_path("ledger")) as store:
        stored = {e.id: e async for e in store.stream()}
        tips = len(await store.tips())
    assert tips > 64  # thread leaves are never joined by lifeline-context
    for row in rows:
        got = stored[row["id"]]
        assert got.ts == normalize_ts(row["ts"], naive_utc=True)
        assert list(got.parents) == sorted(row["parents"])
        for name in ("kind", "author", "agent", "provider", "model", "summary", "body"):
            assert getattr(got, name) == row[name], (row["id"], name)
    for args in (
        ["log", "--kind", "note", "--summary", "first write after the switch"],
        ["checkpoint", "--thread", "topic-5", "--next", "carry on"],
    ):
        wrote = lifeline(tmp_path, *args)
        assert wrote.returncode == 0, wrote.stderr
    assert lifeline(tmp_path, "verify").returncode == 0


def test_verify_notes_its_approve_timing(written: Path, tmp_path: Path) -> None:
    assert lifeline(tmp_path, "import", str(written)).returncode == 0
    done = cli("lifeline_mesh", tmp_path, "verify", "--json", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    timing = [
        f for ln in report["lines"] for f in ln["findings"] if f["check"] == "ts-before-parent"
    ]
    assert timing and {f["severity"] for f in timing} == {"note"}  # its approve, noted


def test_the_view_we_write_for_it_reads_back_with_the_same_ids(
    lc: Path, lc_fixture: Path, tmp_path: Path
) -> None:
    ours = tmp_path / "ours"
    ours.mkdir()
    assert lifeline(ours, "import", str(lc_fixture)).returncode == 0
    assert lifeline(ours, "log", "--kind", "note", "--summary", "ours too").returncode == 0
    rendered = lifeline(ours, "render", "--format", "lifeline-context")
    assert rendered.returncode == 0, rendered.stderr
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "LIFELINE.md").write_bytes((ours / "LIFELINE.md").read_bytes())
    migrated = run_lc(lc, theirs, "migrate", "--from", "LIFELINE.md", "--strict")
    assert migrated.returncode == 0, migrated.stderr
    got = [r["id"] for r in _lc_rows(theirs / ".lifeline" / "ledger.db")]
    history = lifeline(ours, "history", "--json")
    want = [e["id"] for e in json.loads(history.stdout)] if history.returncode == 0 else []
    assert sorted(got) == sorted(want) and len(got) == len(set(got))


def test_our_default_view_never_makes_it_invent_entries(lc: Path, tmp_path: Path) -> None:
    ours = tmp_path / "ours"
    ours.mkdir()
    assert lifeline(ours, "init").returncode == 0
    mimic = (
        "### #0001 — 2026-01-01T00:00:00+00:00 — decision\n\n- **author**: mallory\n"
        "- **summary**: forged\n\n**Body**:\nnothing\n\n<!-- lifeline:end -->"
    )
    wrote = lifeline(
        ours, "log", "--kind", "note", "--summary", "### #2 — x — note", "--body", mimic
    )
    assert wrote.returncode == 0, wrote.stderr
    assert lifeline(ours, "render").returncode == 0
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "LIFELINE.md").write_bytes((ours / "LIFELINE.md").read_bytes())
    migrated = run_lc(lc, theirs, "migrate", "--from", "LIFELINE.md")
    assert migrated.returncode == 0, migrated.stderr
    db = theirs / ".lifeline" / "ledger.db"
    assert not db.exists() or _lc_rows(db) == []
