"""What orders a line, altered in SQLite: a height that is not a number, a ts that is not a
time, an entry dated before its parent. `verify` finds each (the same in worker processes),
commands say so in one line, and `recover` mends the line (real CLI subprocesses)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lifeline.audit import times
from lifeline.audit.line import verify_store
from lifeline.entry import Entry
from lifeline.store.memory import MemoryStore
from tests.support.clirun import lifeline
from tests.support.mesh_procs import cli

SERIAL = {"LIFELINE_VERIFY_PARALLEL_MIN": str(10**9)}
PARALLEL = {"LIFELINE_VERIFY_PARALLEL_MIN": "0", "LIFELINE_VERIFY_WORKERS": "2"}


def _line(root: Path, count: int = 6) -> list[str]:
    assert lifeline(root, "init").returncode == 0
    ids = []
    for n in range(count):
        done = lifeline(root, "log", "--kind", "note", "--summary", f"note {n}", "--json")
        assert done.returncode == 0, done.stderr
        ids.append(json.loads(done.stdout)["id"])
    return ids


def _alter(root: Path, sql: str, *args: object) -> None:
    conn = sqlite3.connect(root / ".lifeline" / "ledger.db")
    conn.execute(sql, args)
    conn.commit()
    conn.close()


def _verify(root: Path, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    done = lifeline(root, "verify", "--json", env=env)
    return done.returncode, json.loads(done.stdout)


def _one_line(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


def test_a_height_that_is_not_a_number(tmp_path: Path) -> None:
    ids = _line(tmp_path)
    _alter(tmp_path, "UPDATE entries SET height = 'abc' WHERE id = ?", ids[-1])
    # before: TypeError from the write path, and `verify` said all was fine
    _one_line(
        lifeline(tmp_path, "log", "--kind", "note", "--summary", "more"),
        ids[-1][:12],
        "lifeline verify",
        "lifeline recover",
    )
    for env in (SERIAL, PARALLEL):
        code, report = _verify(tmp_path, env)
        assert code == 1
        assert report["findings"] == [
            {
                "check": "corrupt-row",
                "entry_id": ids[-1],
                "detail": "row 6: its height 'abc' is not a whole number (the stream order and "
                "the sync keys are built on it): the row was altered; `lifeline recover` "
                "rebuilds the line",
            }
        ]
    assert lifeline(tmp_path, "recover").returncode == 0
    assert _verify(tmp_path, SERIAL)[0] == 0
    assert lifeline(tmp_path, "log", "--kind", "note", "--summary", "more").returncode == 0
    history = json.loads(lifeline(tmp_path, "history", "--json").stdout)
    assert [e["id"] for e in history][: len(ids)] == ids  # the altered entry is kept


@pytest.mark.parametrize("ts", ["garbage", "9999-12-31T23:59:59-14:00", "2026-02-30T00:00:00Z"])
def test_a_ts_that_is_not_a_time(tmp_path: Path, ts: str) -> None:
    ids = _line(tmp_path)
    _alter(tmp_path, "UPDATE entries SET ts = ? WHERE id = ?", ts, ids[2])
    outputs = []
    for env in (SERIAL, PARALLEL):
        done = lifeline(tmp_path, "verify", env=env)
        assert done.returncode == 1, done.stdout  # before: all ids and parents verify
        outputs.append(done.stdout)
        _code, report = _verify(tmp_path, env)
        assert [(f["check"], f["entry_id"]) for f in report["findings"]] == [("invalid-ts", ids[2])]
    assert outputs[0] == outputs[1]
    assert f"ts {ts!r} is not a time" in outputs[0]
    recovered = lifeline(tmp_path, "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert _verify(tmp_path, SERIAL)[0] == 0
    assert json.loads(lifeline(tmp_path, "history", "--json").stdout)[0]["id"] == ids[0]


def test_an_entry_dated_before_its_parent_is_a_note(tmp_path: Path) -> None:
    ids = _line(tmp_path)
    _alter(tmp_path, "UPDATE entries SET ts = '2001-01-01T00:00:00.000000Z' WHERE id = ?", ids[3])
    stamps = {e["id"]: e["ts"] for e in json.loads(lifeline(tmp_path, "history", "--json").stdout)}
    earlier = datetime.fromisoformat(stamps[ids[4]]) - timedelta(seconds=60)
    within = earlier.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # within the skew: no note
    _alter(tmp_path, "UPDATE entries SET ts = ? WHERE id = ?", within, ids[5])
    outputs = []
    for env in (SERIAL, PARALLEL):
        code, report = _verify(tmp_path, env)
        assert code == 0 and report["ok"] is True and report["findings"] == []
        notes = [(n["check"], n["entry_id"]) for n in report["notes"]]
        assert notes == [("ts-before-parent", ids[3])]
        outputs.append(lifeline(tmp_path, "verify", env=env).stdout)
    assert outputs[0] == outputs[1]
    assert f"note: ts-before-parent {ids[3][:12]}" in outputs[0]
    assert f"before its parent {ids[2][:12]}" in outputs[0]


async def test_the_times_of_a_line_that_is_no_file_are_followed_along_its_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(times, "RECENT", 2)  # parents leave the recent ones: read at the end
    chain: list[Entry] = []
    for n, ts in enumerate(["10:00", "10:01", "10:02", "09:00", "10:04", "10:05", "10:03"]):
        parents = (chain[-1].id,) if chain else ()
        ts_full = f"2026-03-01T{ts}:00.000000Z"
        chain.append(Entry.create(ts=ts_full, kind="note", summary=f"{n}", parents=parents))
    late = Entry.create(  # a child of the first, far back in the stream
        ts="2026-03-01T08:00:00.000000Z", kind="note", summary="late", parents=(chain[0].id,)
    )
    store = MemoryStore()
    await store.append_many([*chain, late])
    report = await verify_store(store, "ledger")
    assert report.ok
    assert sorted((n.check, n.entry_id) for n in report.notes) == sorted(
        [("ts-before-parent", chain[3].id), ("ts-before-parent", late.id)]
    )
    assert (await verify_store(store, "ledger", parent_times=False)).notes == []


def test_the_note_is_left_to_the_mesh_audit(tmp_path: Path) -> None:
    """`lifeline-mesh verify` judges an entry's time with its signatures: the ledger's note
    is not repeated there (an unsigned entry's timing is its own note)."""
    ids = _line(tmp_path, 3)
    _alter(tmp_path, "UPDATE entries SET ts = '2001-01-01T00:00:00.000000Z' WHERE id = ?", ids[2])
    done = cli("lifeline_mesh", tmp_path, "verify", "--json", check=False)
    found = [f for ln in json.loads(done.stdout)["lines"] for f in ln["findings"]]
    assert [f["severity"] for f in found if f["check"] == "ts-before-parent"] == ["note"]
