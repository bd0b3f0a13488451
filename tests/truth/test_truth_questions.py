"""Open questions and identity (docs/truth.md): a correction of an open closes it and ends
its thread in Resume; with `status: open` it rewords it; the newest bootstrap is the project."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

from lifeline.entry import Entry
from lifeline.truth.parse import reword_body, rewords
from lifeline.truth.reducers import fold_all
from lifeline.truth.views import Truth, derive
from tests.support.clirun import lifeline
from tests.support.mcp_client import call_tool, mcp_client, new_project


def _at(n: int) -> str:
    return f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"


def _e(n: int, kind: str, summary: str, parents: tuple[str, ...] = (), body: str = "") -> Entry:
    return Entry.create(ts=_at(n), kind=kind, summary=summary, body=body, parents=parents)


def _truth(*entries: Entry) -> Truth:
    shuffled = list(entries)
    random.Random(7).shuffle(shuffled)  # arrival order never matters
    return derive(fold_all(shuffled))


def _question() -> tuple[Entry, Entry, Entry]:
    q = _e(0, "open", "CDN: CloudFront or Fastly?", body="thread: cdn")
    by_id = _e(1, "checkpoint", "cp", (q.id,), f"thread: {q.id}\nnext:\n  - price it")
    by_name = _e(2, "checkpoint", "cp", (by_id.id,), "thread: cdn\nnext:\n  - ask legal")
    return q, by_id, by_name


def test_a_correction_of_an_open_closes_it_and_its_threads() -> None:
    q, by_id, by_name = _question()
    other = _e(3, "checkpoint", "cp", (), "thread: main\nnext:\n  - ship")
    assert _truth(q, by_id, by_name, other).open == [q.id]
    assert set(_truth(q, by_id, by_name, other).resume) == {q.id, "cdn", "main"}
    closing = _e(4, "correction", "CDN decided: CloudFront", (q.id,), "cheaper egress")
    truth = _truth(q, by_id, by_name, other, closing)
    assert truth.open == [] and closing.id not in truth.decisions
    assert truth.resume == {"main": other.id}  # the closed question's threads are gone


def test_status_open_rewords_the_question() -> None:
    q, by_id, by_name = _question()
    body = reword_body("Fastly joined the race")
    assert body == "status: open\nFastly joined the race" and rewords("correction", body)
    assert reword_body(body) == body and not rewords("note", body)
    reword = _e(4, "correction", "CDN: CloudFront, Fastly or Bunny?", (q.id,), body)
    truth = _truth(q, by_id, by_name, reword)
    assert truth.open == [reword.id] and truth.is_superseded(q.id)
    assert set(truth.resume) == {q.id, "cdn"}


def test_a_correction_of_a_rewording_acts_on_the_question() -> None:
    q, _a, _b = _question()
    reword = _e(4, "correction", "CDN: which of three?", (q.id,), reword_body(""))
    close = _e(5, "correction", "CDN decided: Bunny", (reword.id,))
    truth = _truth(q, reword, close)
    assert truth.open == [] and q.id in truth.superseded  # not restored by the undo
    again = _e(5, "correction", "CDN: which of four?", (reword.id,), reword_body(""))
    assert _truth(q, reword, again).open == [again.id]


def test_the_newest_correction_decides_a_question() -> None:
    q, _a, _b = _question()
    close = _e(4, "correction", "decided", (q.id,))
    reword = _e(5, "correction", "reopened wider", (q.id,), reword_body(""))
    assert _truth(q, close, reword).open == [reword.id]
    late_close = _e(6, "correction", "decided after all", (q.id,))
    assert _truth(q, close, reword, late_close).open == []


def test_identity_is_the_newest_bootstrap_in_force() -> None:
    old = _e(0, "bootstrap", "Project: atlas")
    new = _e(5, "bootstrap", "Project: atlas-mesh", (old.id,))
    assert _truth(old, new).identity == new.id
    undo = _e(6, "correction", "rename reverted", (new.id,))
    assert _truth(old, new, undo).identity == old.id


def test_cli_correct_closes_or_rewords(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0

    def write(*args: str) -> str:
        done = lifeline(tmp_path, *args, "--json")
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["id"])

    first = write("log", "--kind", "open", "--summary", "Queue: SQS vs RabbitMQ")
    write("checkpoint", "--thread", first, "--next", "load test")
    second = write("log", "--kind", "open", "--summary", "CDN: which?")
    reworded = write("correct", second, "--summary", "CDN: CloudFront or Fastly?", "--still-open")
    write("correct", first, "--summary", "Queue decided: RabbitMQ")
    context = lifeline(tmp_path, "context").stdout
    opens = context.split("## Open", 1)[1].split("\n## ", 1)[0]
    assert "CDN: CloudFront or Fastly?" in opens and "Queue" not in opens
    resume = json.loads(lifeline(tmp_path, "resume", "--json").stdout)
    assert all(row["thread"] != first for row in resume)
    assert reworded != second


async def test_mcp_correct_closes_or_rewords(tmp_path: Path) -> None:
    root = await new_project(tmp_path, {"default": "direct"})
    async with mcp_client(root) as client:
        q1 = (await call_tool(client, "append", kind="open", summary="Queue?"))["entry"]["id"]
        q2 = (await call_tool(client, "append", kind="open", summary="CDN?"))["entry"]["id"]
        await call_tool(client, "correct", ids=[q1], summary="Queue: RabbitMQ")
        kept = await call_tool(client, "correct", ids=[q2], summary="CDN: A or B?", still_open=True)
        assert kept["entry"]["body"].startswith("status: open")
        context = lifeline(root, "context").stdout
        opens = context.split("## Open", 1)[1].split("\n## ", 1)[0]
        assert "CDN: A or B?" in opens and "Queue" not in opens


def test_a_snapshot_of_the_previous_version_is_refolded_quietly(tmp_path: Path) -> None:
    assert lifeline(tmp_path, "init").returncode == 0
    q = lifeline(tmp_path, "log", "--kind", "open", "--summary", "Which CDN?").stdout.strip()
    lifeline(tmp_path, "correct", q, "--summary", "CDN: Fastly")
    assert lifeline(tmp_path, "context").returncode == 0  # writes the snapshot
    db = tmp_path / ".lifeline" / "ledger.db"
    conn = sqlite3.connect(db)
    (text,) = conn.execute("SELECT state FROM truth_core").fetchone()
    old = json.loads(text) | {"version": 1}
    old.pop("rewords")
    conn.execute("UPDATE truth_core SET state = ?", (json.dumps(old),))
    conn.commit()
    conn.close()
    shown = lifeline(tmp_path, "context")
    assert shown.returncode == 0 and shown.stderr == ""
    assert "Which CDN?" not in shown.stdout.split("## Open", 1)[-1].split("\n## ", 1)[0]
