"""`lifeline exam`: the four checks, their gaps, --json and the --min gate."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.exam import examine
from lifeline.truth.reducers import fold_all
from lifeline.truth.service import resume_of
from lifeline.truth.views import derive
from tests.support.clirun import lifeline


def _e(n: int, kind: str, summary: str, body: str = "", parents: tuple[str, ...] = ()) -> Entry:
    return Entry.create(
        ts=f"2026-01-01T00:00:{n:02d}Z", kind=kind, summary=summary, body=body, parents=parents
    )


def _exam(*entries: Entry) -> dict[str, Any]:
    state = fold_all(entries)
    return examine(state, derive(state), []).to_dict()


def test_an_empty_line_scores_what_it_lacks() -> None:
    exam = _exam()
    checks = {c["name"]: c["score"] for c in exam["checks"]}
    assert checks == {"what": 0, "why": 25, "decided": 0, "next": 13}
    assert exam["score"] == 38 and exam["max"] == 100
    assert {g["check"] for g in exam["gaps"]} == {"what", "decided", "next"}


def test_gaps_name_the_entries_and_the_fix() -> None:
    boot = _e(0, "bootstrap", "Project: atlas")
    bare = _e(1, "decision", "Use Kafka")
    told = _e(2, "decision", "Use Postgres", "audit trail needs ACID")
    question = _e(3, "open", "Which CDN?")
    exam = _exam(boot, bare, told, question)
    by = {c["name"]: c for c in exam["checks"]}
    assert by["what"]["score"] == 12 and by["why"]["score"] == 12 and by["decided"]["score"] == 25
    gaps = {(g["check"], g["id"]) for g in exam["gaps"]}
    assert gaps == {("what", boot.id), ("why", bare.id), ("next", None), ("next", question.id)}
    fixed = [m["message"] for m in exam["gaps"] if m["id"] == bare.id]
    assert f"lifeline correct {bare.id[:12]}" in fixed[0]


def test_cli_text_json_and_min(tmp_path: Path) -> None:
    def ok(*args: str) -> str:
        done = lifeline(tmp_path, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    ok("init")
    ok("log", "--kind", "bootstrap", "--summary", "Project: atlas", "--body", "a map service")
    ok("log", "--kind", "decision", "--summary", "Use Postgres", "--body", "ACID")
    q = ok("log", "--kind", "open", "--summary", "Which CDN?").strip()
    gate = lifeline(tmp_path, "exam", "--min", "90")
    assert gate.returncode == 1 and "below --min 90" in gate.stdout
    assert "open question 'Which CDN?' has no checkpoint" in gate.stdout
    ok("checkpoint", "--thread", q[:10], "--next", "compare prices")
    report = json.loads(ok("exam", "--json", "--min", "90"))
    assert report["score"] == 100 and report["gaps"] == [] and report["line"] == "ledger"
    assert "100/100" in ok("exam")
    bad = lifeline(tmp_path, "exam", "--min", "101")
    assert bad.returncode == 2 and "not a score from 0 to 100" in bad.stderr


def test_the_cli_scores_what_a_full_fold_scores(tmp_path: Path) -> None:
    """`exam` reads only what is in force (issue 21); its report is the one the whole
    state gives: decisions with and without a why, a corrected one, open questions with and
    without a checkpoint, a closed one."""

    def ok(*args: str) -> str:
        done = lifeline(tmp_path, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    ok("init")
    ok("log", "--kind", "bootstrap", "--summary", "Project: atlas", "--body", "a map service")
    bare = ok("log", "--kind", "decision", "--summary", "Use Kafka")
    ok("log", "--kind", "decision", "--summary", "Use Postgres", "--body", "ACID")
    ok("correct", bare[:12], "--summary", "Use NATS")
    ok("log", "--kind", "decision", "--summary", "Use Redis")
    asked = ok("log", "--kind", "open", "--summary", "Which CDN?")
    ok("log", "--kind", "open", "--summary", "Which region?")
    closed = ok("log", "--kind", "open", "--summary", "Which font?")
    ok("correct", closed[:12], "--summary", "Inter", "--body", "readable")
    ok("checkpoint", "--thread", asked[:10], "--next", "compare prices")
    got = json.loads(ok("exam", "--json"))

    async def whole() -> dict[str, Any]:
        async with await SqliteStore.open(tmp_path / ".lifeline" / "ledger.db") as store:
            state = fold_all([e async for e in store.stream()])
            return examine(state, derive(state), await resume_of(store)).to_dict()

    assert got == asyncio.run(whole()) | {"line": "ledger"}
    assert {g["check"] for g in got["gaps"]} == {"why", "next"}
